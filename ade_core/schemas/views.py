"""Role views: the fixed input inventory of one agent call (paper Sec 3.3, App. C.1, C.9).

Each view is built from one store revision (``basis_revision``), which the delivery must echo,
and has a digest. What a view leaves out is the information boundary: the Analyzer's view has
no Plan, hypothesis, memory or Builder account; the Review Worker sees only the records the
Harness bound to its request.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from ade_core.schemas.artifact import BuilderAccount
from ade_core.schemas.common import Model
from ade_core.schemas.deliveries import Analysis, ReviewDesign
from ade_core.schemas.memory import PlanMemory, RunMemory
from ade_core.schemas.plan import Commitment, FrozenTarget, Plan, Relation
from ade_core.schemas.trial import HypothesisStatus, PortfolioStatus, RealizationStatus, TrialStatus, Unavailable
from ade_core.specs import Role


class View(Model):
    """Fields every view carries: who is called, for what, from which revision."""

    role: Role = Field(description="The role called.")
    subject: str = Field(description="What the delivery is for (a Plan slot, a Trial step, a commit key).")
    run_id: str = Field(description="The run.")
    task: str = Field(description="Task name.")
    basis_revision: int = Field(ge=0, description="Store revision the view was built from; echo it.")
    feedback: tuple[str, ...] = Field(default=(), description="Why the previous delivery for this call was refused.")


# -- Coordinator -------------------------------------------------------------------------------


class StrategyFamilyBrief(Model):
    """A family of the task's strategy catalog, as the Coordinator sees it."""

    name: str = Field(description="Family name.")
    description: str = Field(description="Mechanism it tests.")
    targets: tuple[str, ...] = Field(description="Defects or behaviours it targets.")
    parameters: dict[str, tuple[Any, ...]] = Field(description="Allowed values per parameter.")


class CatalogEntry(Model):
    """An admitted Plan in the catalog 𝒞: its direction and where it stands."""

    plan_id: str = Field(description="Plan id.")
    coordinator: int = Field(description="Coordinator that proposed it (0: bootstrap).")
    direction: str = Field(description="η.")
    relation: Relation = Field(description="ρ.")
    sources: tuple[str, ...] = Field(description="Source Plans.")
    status: Literal["active", "completed"] = Field(description="completed once every Trial's memory is published.")
    trials: dict[str, TrialStatus] = Field(description="Its Trials and their statuses.")


class RankEntry(Model):
    """One Plan in the ranking ℛ, represented by its best eligible Trial."""

    rank: int = Field(ge=1, description="1 is best.")
    plan_id: str = Field(description="Plan id.")
    trial_id: str = Field(description="Its best eligible Trial.")
    scores: dict[str, float] = Field(description="That Trial's in-loop scores.")


class RemainingBudget(Model):
    """β: what is left of the candidate budget."""

    plans_left_for_coordinator: int = Field(ge=0, description="Plans this Coordinator may still propose.")
    plans_left_total: int = Field(ge=0, description="Plans all Coordinators may still propose.")
    trials_per_plan: int = Field(ge=1, description="B_T.")


class RecordFamilyView(Model):
    """One record family of the package readable by the role."""

    name: str = Field(description="Record family.")
    count: int = Field(ge=0, description="Records in the package.")
    records: tuple[dict[str, Any], ...] = Field(description="The records (each with an 'id').")


class SessionNote(Model):
    """A note the unified session kept: one of its own earlier rationales or analyses."""

    plan_id: str = Field(description="The Plan the note is about.")
    trial_id: str | None = Field(default=None, description="The Trial, for an analysis note.")
    kind: Literal["plan", "analysis"] = Field(description="Its Plan rationale, or its analysis of a Trial.")
    text: str = Field(description="The note.")


class PackageEvidence(Model):
    """An accepted Experiment Package as the raw_evidence Coordinator sees it (it does its own analysis)."""

    plan_id: str = Field(description="The Plan (P000: the bootstrap baseline).")
    trial_id: str = Field(description="The Trial.")
    status: Literal["completed", "evaluation_missing"] = Field(description="Package status.")
    in_loop_scores: dict[str, float] | None = Field(description="Offline in-loop scores.")
    selected_step: int | None = Field(description="Selected checkpoint step.")
    checkpoints: tuple[dict[str, Any], ...] = Field(description="Online scores per checkpoint.")
    records: tuple[RecordFamilyView, ...] = Field(description="Record families (first records of each).")


class CoordinatorView(View):
    """Run Memory, the Plan catalog, the ranking and the remaining budget (as the research method allows)."""

    coordinator: int = Field(ge=1, description="Which Coordinator is called.")
    task_description: str = Field(description="What a strategy for this task changes.")
    metric_order: tuple[str, ...] = Field(description="In-loop metrics in ranking order.")
    families: tuple[StrategyFamilyBrief, ...] = Field(description="The task's strategy catalog.")
    run_memory: RunMemory = Field(description="The latest published Run Memory.")
    catalog: tuple[CatalogEntry, ...] = Field(description="Admitted Plans, in admission order.")
    ranking: tuple[RankEntry, ...] = Field(description="Plans ranked by their best Trial.")
    budget: RemainingBudget = Field(description="Remaining budget.")
    method: str = Field(default="full", description="The run's research method ([research].method).")
    relations: tuple[Relation, ...] = Field(
        default=("new", "revisit", "contradict", "combine"), description="Relations this method admits."
    )
    notes: tuple[SessionNote, ...] = Field(default=(), description="unified: the session's own notes.")
    packages: tuple[PackageEvidence, ...] = Field(default=(), description="raw_evidence: accepted packages.")


# -- Builder -----------------------------------------------------------------------------------


class SourceStrategy(Model):
    """An approved strategy of a source Plan: its best eligible Trial's admitted artifact."""

    plan_id: str = Field(description="Source Plan.")
    trial_id: str = Field(description="Its best eligible Trial.")
    source: str = Field(description="Admitted strategy source.")
    account: BuilderAccount = Field(description="Its Builder's account.")


class FamilyTemplate(Model):
    """A catalog family with its source template ($name fields)."""

    name: str = Field(description="Family name.")
    description: str = Field(description="Mechanism.")
    template: str = Field(description="Python source with $name fields.")
    parameters: dict[str, tuple[Any, ...]] = Field(description="Allowed values per field.")


class FrozenInputsBrief(Model):
    """What the frozen task inputs hold, for writing a strategy: statistics and real sample rows."""

    description: str = Field(description="Where the frozen inputs came from.")
    statistics: dict[str, Any] = Field(description="The task's statistics of the inputs (counts, token totals).")
    sample: tuple[dict[str, Any], ...] = Field(description="Real input rows, long texts truncated.")


class BuildInputs(Model):
    """The task's build package 𝒟^build: interface, constraints, templates, development inputs."""

    entry_points: tuple[str, ...] = Field(description="Signatures the strategy must define.")
    allowed_imports: tuple[str, ...] = Field(description="Modules a strategy may import.")
    constraints: tuple[str, ...] = Field(description="Output constraints.")
    families: tuple[FamilyTemplate, ...] = Field(description="Catalog templates.")
    development_inputs: str = Field(description="What the admission run on development inputs uses.")
    frozen_inputs: FrozenInputsBrief | Unavailable | None = Field(
        default=None, description="Statistics and sample rows of the frozen task inputs (None: not provided)."
    )


class CheckOutcome(Model):
    """One admission check as a development check reports it."""

    name: str = Field(description="static_check, sandbox_run, output_validation, or probe:<name>.")
    status: Literal["passed", "failed", "skipped"] = Field(description="passed, failed, or skipped (could not run).")
    reason: str = Field(default="", description="Why it failed or was skipped.")


class DevCallDiagnostics(Model):
    """One entry-point call of a development check: what the draft returned on the development inputs."""

    entry_point: str = Field(description="Entry point called.")
    status: str = Field(description="The sandbox's typed status (ok, invalid_output, exception, timeout, ...).")
    error: str | None = Field(default=None, description="Error text when not ok.")
    statistics: dict[str, Any] = Field(
        default_factory=dict, description="The task's statistics of the output (e.g. selected count, distributions)."
    )
    output_preview: str = Field(default="", description="The start of the canonical output, as JSON.")
    service_answers: dict[str, int] = Field(
        default_factory=dict, description="How many service answers had each status (completed, unavailable, ...)."
    )


class DevCheck(Model):
    """Diagnostics of a development check (paper Sec 3.2, App. C.4): Builder-only evidence.

    It never trains the target model, and no ranking, memory record or other role's view reads it.
    """

    inputs: str = Field(description="The development inputs the draft ran on.")
    admitted: bool = Field(description="Whether the draft passed every admission check.")
    checks: tuple[CheckOutcome, ...] = Field(description="Every admission check, probes included, in order.")
    calls: tuple[DevCallDiagnostics, ...] = Field(default=(), description="Each call on the development inputs.")
    claims: str = Field(description="The realization check of the declared claims on these outputs: its verdict.")
    claim_reasons: tuple[str, ...] = Field(default=(), description="Why, citing the statistics.")
    isolation: str | None = Field(default=None, description="Sandbox isolation level used.")


class AdmissionFeedback(Model):
    """The admission verdict of an earlier round of this Trial."""

    round: int = Field(ge=0, description="Round number.")
    admitted: bool = Field(description="Whether it passed.")
    failed_checks: tuple[str, ...] = Field(description="Failed checks as 'name: reason'.")
    notes: tuple[str, ...] = Field(
        default=(),
        description="Why an admitted round came back: 'duplicate_of_reference: ...' when its realization on the "
        "frozen inputs equalled the generic reference's.",
    )
    source: str = Field(description="The source delivered in that round.")
    dev_check: DevCheck | None = Field(
        default=None, description="The development check's diagnostics when that round asked for one."
    )


class BuilderView(View):
    """Plan snapshot, frozen Plan Memory, approved source strategies, the task's build inputs."""

    trial_id: str = Field(description="Trial being built.")
    plan: Plan = Field(description="The immutable Plan.")
    plan_memory: PlanMemory = Field(description="The Trial's frozen Plan-Memory base.")
    sources: tuple[SourceStrategy, ...] = Field(description="Approved strategies of the source Plans.")
    build_inputs: BuildInputs = Field(description="Task build inputs.")
    round: int = Field(ge=0, description="This round (0 = first draft).")
    reflections_left: int = Field(ge=0, description="Rounds left after this one.")
    previous: tuple[AdmissionFeedback, ...] = Field(default=(), description="Earlier rounds' admission results.")


# -- Analyzer and Review Worker ----------------------------------------------------------------


class PoolBrief(Model):
    """A review pool the Analyzer may request review over."""

    name: str = Field(description="Pool name.")
    record: str = Field(description="Record family it draws from.")
    selections: tuple[str, ...] = Field(description="Allowed selection modes.")
    min_coverage: float = Field(description="Fraction of the pool a request must cover.")
    group_key: str | None = Field(description="Field defining groups.")
    size: int = Field(default=0, ge=0, description="Records in the pool (the denominator of record coverage).")
    groups: tuple[str, ...] = Field(
        default=(),
        description="Every group id of the pool, in order (the denominator of group coverage); the records "
        "shown in the view may be fewer.",
    )


class PackageSummary(Model):
    """The package's measurements (no Plan, no hypothesis)."""

    status: Literal["completed", "evaluation_missing"] = Field(description="Package status.")
    in_loop_scores: dict[str, float] | None = Field(description="Offline in-loop scores.")
    selected_step: int | None = Field(description="Selected checkpoint step.")
    checkpoints: tuple[dict[str, Any], ...] = Field(description="Online scores per checkpoint.")
    metric_order: tuple[str, ...] = Field(description="Metric order.")


class RealizationSummary(Model):
    """The realization record: what the admitted strategy produced on the frozen inputs."""

    verdict: RealizationStatus = Field(description="verified, deviated or unverified.")
    reasons: tuple[str, ...] = Field(description="Why.")
    statistics: dict[str, Any] = Field(description="Realized-output statistics.")
    intervention: str = Field(description="Summary of the bound intervention.")


class BoundRecords(Model):
    """A validated review request and the exact records the Harness bound to it."""

    request: int = Field(ge=0, description="Index of the request in the review design.")
    pool: str = Field(description="Review pool.")
    question: str = Field(description="What to judge.")
    records: tuple[dict[str, Any], ...] = Field(description="The bound records (each with an 'id').")


class ReviewResults(Model):
    """The frozen review (q, r) returned to the Analyzer."""

    design: ReviewDesign = Field(description="q.")
    judgments: tuple[dict[str, Any], ...] | Unavailable = Field(description="r, or why it is unavailable.")
    coverage: dict[str, dict[str, Any]] = Field(
        default_factory=dict,
        description="Per review pool, counted from the judgments: records in the package, records reviewed, "
        "and their fraction (coverage).",
    )


class AnalyzerView(View):
    """The Experiment Package without Plan, hypothesis, memory or the Builder's prose account."""

    trial_id: str = Field(description="Trial whose evidence this is.")
    stage: Literal["design", "interpret"] = Field(description="design: ask for review; interpret: analyze.")
    strategy_source: str | Unavailable = Field(description="The executed strategy's code.")
    realization: RealizationSummary | Unavailable = Field(description="The realization record.")
    package: PackageSummary | Unavailable = Field(description="Measurements.")
    records: tuple[RecordFamilyView, ...] = Field(description="Record families readable by the Analyzer.")
    review_pools: tuple[PoolBrief, ...] = Field(description="Pools a review may draw from.")
    review: ReviewResults | None = Field(default=None, description="Frozen review results (interpret stage).")


class ReviewWorkerView(View):
    """Only the records the Harness bound to the validated review requests."""

    trial_id: str = Field(description="Trial the records belong to.")
    requests: tuple[BoundRecords, ...] = Field(description="Bound requests.")


# -- Summarizers -------------------------------------------------------------------------------


class Comparison(Model):
    """A frozen comparison: the Trial's scores against a target frozen at Plan admission."""

    name: Literal["comparison_target", "portfolio_target"] = Field(description="Which target.")
    target: FrozenTarget = Field(description="The frozen target.")
    deltas: dict[str, float] | Unavailable = Field(description="Trial minus target, per metric.")


class PlanSummarizerView(View):
    """ψ, the blinded analysis, the parent Plan Memory, the objective outcome and frozen comparisons."""

    trial_id: str = Field(description="Trial to adjudicate.")
    plan_id: str = Field(description="Its Plan.")
    direction: str = Field(description="η of the Plan.")
    commitment: Commitment = Field(description="ψ, frozen at Trial start.")
    status: TrialStatus = Field(description="The Trial's terminal status.")
    failure: str | None = Field(description="Why it failed, if it did.")
    scores: dict[str, float] | Unavailable = Field(description="Objective outcome: in-loop scores.")
    realization: RealizationStatus | Unavailable = Field(description="Harness's realization conclusion.")
    portfolio: PortfolioStatus | Unavailable = Field(description="Harness's portfolio conclusion.")
    comparisons: tuple[Comparison, ...] = Field(description="Frozen comparisons.")
    analysis: Analysis | Unavailable = Field(description="The blinded analysis.")
    parent_memory: PlanMemory = Field(description="The parent Plan-Memory version.")


class RunSummarizerView(View):
    """Run Memory, the queue head's Plan-Memory update, and the Run's results."""

    commit_key: str = Field(description="The queue head being merged.")
    run_memory: RunMemory = Field(description="The latest Run Memory.")
    update: PlanMemory = Field(description="The Plan-Memory version to integrate.")
    hypothesis: HypothesisStatus | Unavailable = Field(description="The update's Trial's hypothesis conclusion.")
    ranking: tuple[RankEntry, ...] = Field(description="Current Run results.")


VIEW_MODELS: dict[str, type[View]] = {
    "coordinator": CoordinatorView,
    "builder": BuilderView,
    "analyzer": AnalyzerView,
    "review_worker": ReviewWorkerView,
    "plan_summarizer": PlanSummarizerView,
    "run_summarizer": RunSummarizerView,
}
