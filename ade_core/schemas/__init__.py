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
from ade_core.schemas.deliveries import (
    Analysis,
    BuilderDelivery,
    PlanProposal,
    PlanSummary,
    ReviewDesign,
    ReviewJudgments,
    RunSummary,
)
from ade_core.schemas.heldout import HeldOutEvaluation
from ade_core.schemas.ledger import LedgerEntry
from ade_core.schemas.memory import Finding, PlanMemory, RunMemory
from ade_core.schemas.package import ExperimentPackage
from ade_core.schemas.plan import MetricExpectation, Plan, RejectionCondition
from ade_core.schemas.run import RunRecord
from ade_core.schemas.trial import Attempt, Conclusions, Trial
from ade_core.schemas.views import (
    AnalyzerView,
    BuilderView,
    CoordinatorView,
    PlanSummarizerView,
    ReviewWorkerView,
    RunSummarizerView,
)

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
    "held-out-evaluation": HeldOutEvaluation,
    "run-record": RunRecord,
    "coordinator-view": CoordinatorView,
    "builder-view": BuilderView,
    "analyzer-view": AnalyzerView,
    "review-worker-view": ReviewWorkerView,
    "plan-summarizer-view": PlanSummarizerView,
    "run-summarizer-view": RunSummarizerView,
    "plan-proposal": PlanProposal,
    "builder-delivery": BuilderDelivery,
    "review-design": ReviewDesign,
    "review-judgments": ReviewJudgments,
    "analysis": Analysis,
    "plan-summary": PlanSummary,
    "run-summary": RunSummary,
}

__all__ = [
    "EXPORTED",
    "Analysis",
    "AnalyzerView",
    "Attempt",
    "BuilderDelivery",
    "BuilderView",
    "CoordinatorView",
    "HeldOutEvaluation",
    "PlanProposal",
    "PlanSummarizerView",
    "PlanSummary",
    "ReviewDesign",
    "ReviewJudgments",
    "ReviewWorkerView",
    "RunRecord",
    "RunSummarizerView",
    "RunSummary",
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
