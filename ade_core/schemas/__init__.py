"""Pydantic models shared by everything; exported as JSON Schema by ``ade schema``."""

from __future__ import annotations

from pydantic import BaseModel

from ade_core.schemas.artifact import (
    BoundCommand,
    BuilderAccount,
    Intervention,
    StatisticClaim,
    StrategyArtifact,
)
from ade_core.schemas.common import Model, canonical_json, sha256_digest
from ade_core.schemas.config import ExperimentConfig, OperationalSettings
from ade_core.schemas.ledger import LedgerEntry
from ade_core.schemas.memory import Finding, PlanMemory, RunMemory
from ade_core.schemas.package import ExperimentPackage
from ade_core.schemas.plan import MetricExpectation, Plan, RejectionCondition
from ade_core.schemas.trial import Attempt, Conclusions, Trial

# Name used by `ade schema NAME` -> model.
EXPORTED: dict[str, type[BaseModel]] = {
    "experiment-config": ExperimentConfig,
    "operational-settings": OperationalSettings,
    "plan": Plan,
    "trial": Trial,
    "attempt": Attempt,
    "strategy-artifact": StrategyArtifact,
    "bound-command": BoundCommand,
    "experiment-package": ExperimentPackage,
    "plan-memory": PlanMemory,
    "run-memory": RunMemory,
    "ledger-entry": LedgerEntry,
}

__all__ = [
    "EXPORTED",
    "Attempt",
    "BoundCommand",
    "BuilderAccount",
    "Conclusions",
    "ExperimentConfig",
    "ExperimentPackage",
    "Finding",
    "Intervention",
    "LedgerEntry",
    "MetricExpectation",
    "Model",
    "OperationalSettings",
    "Plan",
    "PlanMemory",
    "RejectionCondition",
    "RunMemory",
    "StatisticClaim",
    "StrategyArtifact",
    "Trial",
    "canonical_json",
    "sha256_digest",
]
