"""What the run report shows, read from a run directory into plain dataclasses (no plotting, no HTML).

Everything here is derived from the run store (research state, events, attempts) and, for the
held-out line only, from the operator-only held-out store. The same rows back the end-of-run
terminal table and the report's summary table, so the two always agree with the store.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ade_core.harness.ranking import MetricOrder, best_trial
from ade_core.harness.snapshot import REFERENCE_PLAN
from ade_core.harness.status import agent_failures
from ade_core.report import history
from ade_core.report.history import HeldOutResult, Lineage, TimelinePoint
from ade_core.report.training import TrainingView, training_view
from ade_core.schemas.memory import PlanMemory, RunMemory
from ade_core.schemas.plan import Plan
from ade_core.schemas.run import FinalSelection, RunRecord
from ade_core.schemas.trial import Trial, Unavailable
from ade_core.store import RunStore

# Paper Fig. 4's stages, in the order a Plan goes through them.
STAGE_ORDER = ("proposal", "build", "waiting", "execution", "analysis", "memory_update")
METRIC_LABELS = {"pass_at_k": "Pass@K", "average_at_k": "Average@K"}


def metric_label(name: str) -> str:
    """The paper's name for a metric (``pass_at_k`` -> ``Pass@K``); unknown names are shown as they are."""
    return METRIC_LABELS.get(name, name)


def plain(value: Any) -> Any:
    """An ``Unavailable`` as ``"unavailable: <reason>"``; anything else unchanged (explicit, never omitted)."""
    return f"unavailable: {value.reason}" if isinstance(value, Unavailable) else value


@dataclass(frozen=True)
class SummaryRow:
    """One Plan in the end-of-run table: its best eligible Trial's in-loop scores and conclusions.

    ``scores`` is None when the Plan has no eligible Trial (then ``trial_id`` names its last Trial,
    if any, and ``conclusions`` are that Trial's). ``best`` marks the final selection's Plan (or,
    before final selection, the Plan ranked first so far).
    """

    plan_id: str
    coordinator: int
    relation: str
    sources: tuple[str, ...]
    direction: str
    trial_id: str | None
    status: str
    scores: dict[str, float] | None
    conclusions: dict[str, str]
    best: bool


@dataclass(frozen=True)
class Finding:
    """A memory finding that cites a Trial's evidence."""

    finding_id: str
    statement: str
    assessment: str
    status: str


@dataclass(frozen=True)
class TrialDetail:
    """Everything the report shows for one Trial (per-Trial section)."""

    trial_id: str
    plan_id: str
    status: str
    failure: str | None
    hypothesis: str
    strategy_source: str | None
    builder_account: str
    realization: dict[str, Any] | None
    admission: tuple[str, ...]  # the last Builder round's checks, as "status name: reason"
    intervention: str
    scores: dict[str, float] | None
    conclusions: dict[str, str]
    analysis: str
    findings: tuple[Finding, ...]


@dataclass(frozen=True)
class HeldOutColumn:
    """One strategy in the per-benchmark held-out table: the Base model, the generic reference, or a Plan's
    best Trial. ``result`` is None where that model was not evaluated on the held-out suite."""

    key: str  # "base" or the Plan id
    label: str
    trial_id: str | None
    best: bool
    result: HeldOutResult | None


@dataclass(frozen=True)
class ReportData:
    """The whole report's content. ``rows`` is the end-of-run summary table, in admission order."""

    run_id: str
    task: str
    dry_run: bool
    phase: str
    metric_order: tuple[str, ...]
    base_scores: dict[str, float] | None
    rows: tuple[SummaryRow, ...]
    trials: tuple[TrialDetail, ...]
    timeline: tuple[TimelinePoint, ...]
    search_seconds: float  # when search ended (or the latest event, while it runs), on the timeline's clock
    heldout_records: int
    lineage: Lineage
    stage_seconds: dict[str, dict[str, float]]  # plan id -> stage -> seconds
    tokens: dict[str, dict[str, int]]  # Trial (or Plan, for Coordinator calls) -> role -> tokens
    selection: str  # "<plan> (<trial>)" or why there is none
    clock: str  # what the time axis measures
    notes: tuple[str, ...] = field(default=())
    heldout_benchmarks: tuple[str, ...] = ()  # the held-out table's rows, in config order
    heldout_columns: tuple[HeldOutColumn, ...] = ()  # empty when no held-out evaluation is recorded
    training: TrainingView | None = None  # GRPO diagnostics and rollouts (RFT runs with recorded packages)
    extra_metrics: tuple[str, ...] = ()  # reported, never ranked: [evaluation].pass_k's pass@k
    agent_failures: dict[str, Any] = field(default_factory=dict)  # ade status's: per role, and output switches

    @property
    def shown_metrics(self) -> tuple[str, ...]:
        """The columns every score table shows: the ranking metrics, then the configured pass@k."""
        return self.metric_order + self.extra_metrics

    @property
    def simulated(self) -> bool:
        """Whether any number in the report is simulated (a dry run, or a simulated held-out record)."""
        return self.dry_run or any(c.result is not None and c.result.simulated for c in self.heldout_columns)


def report_data(run_dir: Path | str) -> ReportData:
    """Read everything the report shows from ``run_dir`` (read-only; safe while the run is live)."""
    from ade_core.store import STATE_FILE

    run_dir = Path(run_dir)
    if not (run_dir / STATE_FILE).is_file():  # RunStore.open would create an empty store here
        raise LookupError(f"{run_dir} holds no run store ({STATE_FILE}); start a run with `ade run CONFIG`")
    with RunStore.open_read_only(run_dir) as store, store.snapshot():
        record: RunRecord | None = store.get_model("run", "run")
        if record is None:
            raise LookupError(f"{run_dir} holds no initialized run; start one with `ade run CONFIG`")
        plans = [Plan.model_validate(d.document) for d in store.list("plan")]
        trials = [Trial.model_validate(d.document) for d in store.list("trial")]
        metrics = _metric_order(store, record)
        store_config = _frozen(store, record)
        events = store.events()
        rows = _rows(plans, trials, metrics, record)
        details = tuple(_detail(store, trial, plans) for trial in trials)
        origin, clock = history.origin(events, record.dry_run)
        times = history.eligible_times(store, trials, events, record.dry_run, origin)
        base_time = next(
            (history.clock_of(e, record.dry_run) - origin for e in events if e.kind == "base_model_evaluated"), 0.0
        )
        search_seconds = history.search_end(events, record.dry_run, origin)
        stage_seconds = history.stage_seconds(store, events, trials)
        tokens = history.tokens(events)
        lineage = history.lineage(store, plans)
        failures = agent_failures(store)
    best = next((r.trial_id for r in rows if r.best), None)
    training = training_view(trials, best)
    heldout = history.heldout_by_trial(run_dir)
    results = history.heldout_results(run_dir)
    base = record.base_model if isinstance(record.base_model, dict) else None
    timeline = history.timeline(base, base_time, trials, times, metrics, heldout)
    selection = record.selection
    notes = []
    if not heldout:
        notes.append("No held-out evaluations are recorded for this run: the held-out line is not drawn.")
    return ReportData(
        run_id=record.run_id,
        task=record.task,
        dry_run=record.dry_run,
        phase=record.phase,
        metric_order=metrics.order,
        base_scores=base,
        rows=tuple(rows),
        trials=details,
        timeline=timeline,
        search_seconds=search_seconds,
        heldout_records=sum(len(v) for v in heldout.values()),
        lineage=lineage,
        stage_seconds=stage_seconds,
        tokens=tokens,
        selection=f"{selection.plan_id} ({selection.trial_id})"
        if isinstance(selection, FinalSelection)
        else str(plain(selection) or "not yet made"),
        clock=clock,
        notes=tuple(notes),
        heldout_benchmarks=tuple(dict.fromkeys(b for r in results.values() for b in r.benchmarks)),
        heldout_columns=_heldout_columns(rows, results),
        training=training,
        extra_metrics=_extra_metrics(store_config),
        agent_failures=failures,
    )


def _extra_metrics(config: Any) -> tuple[str, ...]:
    """The configured pass@k and coverage@k, which every evaluation of the Run reports."""
    from ade_core.engine.metrics import extra_metric_names

    if config is None:
        return ()
    evaluation = config.evaluation
    return tuple(extra_metric_names(evaluation.pass_k, evaluation.coverage_k, evaluation.coverage_thresholds))


def summary_rows(run_dir: Path | str) -> list[SummaryRow]:
    """The end-of-run table (one row per Plan, admission order), as ``report_data(run_dir).rows``."""
    return list(report_data(run_dir).rows)


def _frozen(store: RunStore, record: RunRecord) -> Any:
    """The Run's frozen 𝓑, or None where it cannot be read (the report still shows the numbers)."""
    try:
        from ade_core.harness.run import frozen_config

        return frozen_config(store, record)
    except Exception:
        return None


def _metric_order(store: RunStore, record: RunRecord) -> MetricOrder:
    """The task's ordered metrics; without the task's plugin, the frozen base scores' names (higher is better)."""
    try:
        from ade_core.harness.run import frozen_config
        from ade_core.plugins import load_plugins

        task = load_plugins().task(frozen_config(store, record).task)
        found = task.metrics()
        return MetricOrder(task.spec.metric_order, {n: m.higher_is_better for n, m in found.items()})
    except Exception:  # a report of a run whose plugin is gone still shows its numbers
        names = sorted(record.base_model) if isinstance(record.base_model, dict) else []
        return MetricOrder(sorted(names, key=lambda n: (n not in METRIC_LABELS, n)))


def _rows(plans: list[Plan], trials: list[Trial], metrics: MetricOrder, record: RunRecord) -> list[SummaryRow]:
    by_plan: dict[str, list[Trial]] = {}
    for trial in trials:
        by_plan.setdefault(trial.plan_id, []).append(trial)
    if isinstance(record.selection, FinalSelection):
        best_plan: str | None = record.selection.plan_id
    else:  # before final selection: the Plan ranked first so far
        from ade_core.harness.ranking import rank_plans

        ranking = rank_plans(plans, trials, metrics)
        best_plan = ranking[0].plan_id if ranking else None
    rows = []
    for plan in plans:
        own = by_plan.get(plan.plan_id, [])
        shown = best_trial(own, metrics) or (own[-1] if own else None)
        rows.append(
            SummaryRow(
                plan_id=plan.plan_id,
                coordinator=plan.coordinator,
                relation=plan.relation,
                sources=tuple(plan.sources),
                direction=plan.direction,
                trial_id=shown.trial_id if shown else None,
                status=shown.status if shown else "no trial",
                scores=dict(shown.scores) if shown and isinstance(shown.scores, dict) else None,
                conclusions={k: str(plain(v)) for k, v in shown.conclusions.model_dump().items()} if shown else {},
                best=plan.plan_id == best_plan,
            )
        )
    return rows


def _heldout_columns(rows: list[SummaryRow], results: dict[str, HeldOutResult]) -> tuple[HeldOutColumn, ...]:
    """Base, the generic reference, then each Plan whose shown Trial has a held-out evaluation (admission order)."""
    if not results:
        return ()
    columns = [HeldOutColumn("base", "Base", None, False, results.get("base"))]
    for row in rows:
        result = results.get(row.trial_id) if row.trial_id else None
        if row.plan_id == REFERENCE_PLAN:
            label = f"generic reference ({row.plan_id})"
            columns.append(HeldOutColumn(row.plan_id, label, row.trial_id, row.best, result))
        elif result is not None:
            columns.append(HeldOutColumn(row.plan_id, row.plan_id, row.trial_id, row.best, result))
    return tuple(columns)


def _read(store: RunStore, digest: Any) -> Any:
    """An object-store record, or None when the Trial never produced it (or it is unreadable)."""
    if not isinstance(digest, str):
        return None
    try:
        return store.objects.read_json(digest)
    except Exception:
        return None


def _detail(store: RunStore, trial: Trial, plans: list[Plan]) -> TrialDetail:
    plan = next((p for p in plans if p.plan_id == trial.plan_id), None)
    artifact = _read(store, trial.strategy_digest) or {}
    command = _read(store, trial.records.command) or {}
    analysis = _read(store, trial.records.analysis) or {}
    account = artifact.get("account", {})
    return TrialDetail(
        trial_id=trial.trial_id,
        plan_id=trial.plan_id,
        status=trial.status,
        failure=trial.failure,
        hypothesis=plan.hypothesis if plan else "",
        strategy_source=artifact.get("source"),
        builder_account="\n".join(
            f"{k}: {account[k]}" for k in ("implementation", "inheritance", "limitations") if account.get(k)
        ),
        realization=_read(store, trial.records.realization),
        admission=_admission(store, trial),
        intervention=str(command.get("intervention", {}).get("summary", "")),
        scores=dict(trial.scores) if isinstance(trial.scores, dict) else None,
        conclusions={k: str(plain(v)) for k, v in trial.conclusions.model_dump().items()},
        analysis=str(analysis.get("summary", "")),
        findings=_findings_of(store, trial),
    )


def _admission(store: RunStore, trial: Trial) -> tuple[str, ...]:
    """The checks of the Trial's last Builder round: every probe and its reason, or nothing when unrecorded."""
    record = _read(store, trial.build_rounds[-1].admission) if trial.build_rounds else None
    if not isinstance(record, dict):
        return ()
    return tuple(
        f"{c['status']} {c['name']}" + (f": {c['reason']}" if c.get("reason") else "") for c in record["checks"]
    )


def _findings_of(store: RunStore, trial: Trial) -> tuple[Finding, ...]:
    """Findings resting on this Trial: from the Plan-Memory version it published and the latest Run Memory."""
    found: dict[str, Finding] = {}
    sources: list[PlanMemory | RunMemory] = []
    if trial.plan_memory:
        memory = store.get_model("plan_memory", trial.plan_memory)
        if memory is not None:
            sources.append(memory)
    run_memory = store.latest_run_memory()
    if run_memory is not None:
        sources.append(run_memory)
    for source in sources:
        for f in source.findings:
            if trial.trial_id in f.source_trials and f.finding_id not in found:
                found[f.finding_id] = Finding(f.finding_id, f.statement, f.assessment, f.status)
    return tuple(found.values())
