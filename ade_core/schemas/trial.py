"""Trials and their physical attempts (paper Sec 3.2, Appendix C.10)."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import Field

from ade_core.schemas.common import DIGEST_PATTERN, DigestField, Model

RealizationStatus = Literal["verified", "deviated", "unverified"]
HypothesisStatus = Literal["supported", "rejected", "inconclusive"]
PortfolioStatus = Literal["new_best", "not_new_best", "not_comparable"]
TrialStatus = Literal[
    "planned",
    "building",
    "admitted",
    "running",
    "analyzing",
    "completed",
    "inadmissible",
    "build_failed",
    "engine_failed",
    "evaluation_missing",
    "cancelled",
]
AttemptStatus = Literal["running", "succeeded", "failed", "fenced"]
TERMINAL_STATUSES: frozenset[str] = frozenset(
    {"completed", "inadmissible", "build_failed", "engine_failed", "evaluation_missing", "cancelled"}
)


class Unavailable(Model):
    """An explicitly unavailable value: fields are never silently omitted."""

    unavailable: Literal[True] = Field(default=True, description="Marks the value as unavailable.")
    reason: str = Field(min_length=1, description="Why it is unavailable.")


class Conclusions(Model):
    """The three conclusions of a Trial; only the hypothesis one is model-generated."""

    realization: RealizationStatus | Unavailable = Field(description="Harness: implementation fidelity.")
    hypothesis: HypothesisStatus | Unavailable = Field(description="Plan Summarizer: assessment of ψ.")
    portfolio: PortfolioStatus | Unavailable = Field(description="Harness: against the Run's best.")


class Attempt(Model):
    """One physical execution of a Trial's frozen command."""

    attempt_id: str = Field(description="Fresh identifier of this attempt.")
    trial_id: str = Field(description="Logical Trial it belongs to.")
    number: int = Field(ge=1, description="m: 1 for the first attempt.")
    command_digest: str = DigestField("Digest of the frozen BoundCommand it executes.")
    resources: dict[str, str] = Field(default_factory=dict, description="ℓ: physical assignment (host, device).")
    status: AttemptStatus = Field(description="s: running, succeeded, failed, or fenced after failure.")
    failure: str | None = Field(default=None, description="Typed failure reason, when failed.")
    retryable: bool = Field(default=False, description="Whether the failure is a declared retryable one.")
    started_at: datetime = Field(description="Start time (UTC).")
    ended_at: datetime | None = Field(default=None, description="End time (UTC).")
    waited_s: float | None = Field(
        default=None, ge=0, description="Seconds the bound command waited for an executor slot (paper Fig. 4)."
    )


class BuildRound(Model):
    """One Builder round of a Trial: the delivered strategy and its admission verdict."""

    round: int = Field(ge=0, description="0 for the first draft, then one per reflection.")
    strategy_digest: str = DigestField("Digest of the StrategyArtifact delivered (in the object store).")
    action: Literal["finalize", "revise"] = Field(description="What the Builder asked for.")
    admitted: bool = Field(description="Whether the admission pipeline passed.")
    failed_checks: tuple[str, ...] = Field(default=(), description="Failed checks as 'name: reason'.")
    admission: str | None = Field(
        default=None,
        pattern=DIGEST_PATTERN,
        description="Digest of the admission record (object store): every check with its status and reason, "
        "probes and replay included, the isolation level and the seconds it took.",
    )
    notes: tuple[str, ...] = Field(
        default=(),
        description="Why an admitted round came back to the Builder: 'duplicate_of_reference: ...' when its "
        "realization on the frozen inputs equalled the generic reference's.",
    )
    dev_check: str | None = Field(
        default=None,
        pattern=DIGEST_PATTERN,
        description="Digest of the development-check diagnostics (DevCheck, object store) when the Builder asked "
        "for one; Builder-only evidence that no other role, memory record or ranking reads.",
    )


class PackageRef(Model):
    """Where a Trial's Experiment Package lives; physical (a replayed attempt writes a new package)."""

    manifest_digest: str = DigestField("Digest of the package manifest (ExperimentPackage).")
    path: str = Field(description="Package directory.")
    status: Literal["completed", "evaluation_missing"] = Field(description="The package's own status.")


class TrialRecords(Model):
    """Object-store digests of a Trial's immutable records; unavailable ones say why."""

    realization: str | Unavailable | None = Field(default=None, description="The realization record.")
    command: str | Unavailable | None = Field(default=None, description="x: the BoundCommand.")
    review_design: str | Unavailable | None = Field(default=None, description="q: the Analyzer's review design.")
    review: str | Unavailable | None = Field(default=None, description="r: the Review Worker's judgments.")
    analysis: str | Unavailable | None = Field(default=None, description="a: the blinded analysis.")
    plan_summary: str | Unavailable | None = Field(default=None, description="The Plan Summarizer's delivery.")


class Trial(Model):
    """One realization of a Plan, with frozen memory bases and its conclusions."""

    trial_id: str = Field(description="Identifier, e.g. 'C1/P3/T1'.")
    plan_id: str = Field(description="Plan it realizes.")
    plan_memory_base: str = Field(description="Plan-Memory version frozen at Trial start.")
    run_memory_base: str = Field(description="Run-Memory version frozen at Trial start.")
    commitment_digest: str | None = Field(
        default=None, description="Digest of ψ (the Plan's Commitment) frozen at Trial start."
    )
    strategy_digest: str | Unavailable | None = Field(default=None, description="z once admitted.")
    command_digest: str | Unavailable | None = Field(default=None, description="x once bound.")
    package: PackageRef | Unavailable | None = Field(default=None, description="e once packaged (physical).")
    attempts: tuple[str, ...] = Field(default=(), description="Attempt identifiers, in order.")
    build_rounds: tuple[BuildRound, ...] = Field(default=(), description="Builder rounds (at most J + 1).")
    records: TrialRecords = Field(default_factory=TrialRecords, description="Immutable records by name.")
    status: TrialStatus = Field(description="Typed Trial status.")
    failure: str | None = Field(default=None, description="Why a failed Trial failed (typed reason and detail).")
    scores: dict[str, float] | Unavailable = Field(description="In-loop scores by metric name.")
    conclusions: Conclusions = Field(description="Realization, hypothesis and portfolio conclusions.")
    plan_memory: str | None = Field(default=None, description="The Plan-Memory version this Trial published.")

    @property
    def terminal(self) -> bool:
        """True once the Trial reached a typed terminal status."""
        return self.status in TERMINAL_STATUSES
