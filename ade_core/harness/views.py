"""Building each role's view from one store revision (paper Sec 3.3, App. C.1, C.9).

The boundary is enforced here, by construction: a builder function only reads what its role
may see. The Analyzer's view is assembled from the executed strategy's code, the realization
record and the package's analyzer-readable records — never from the Plan, Trial commitment,
memory, or the Builder's account.
"""

from __future__ import annotations

import string
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ade_core.engine.package import open_package
from ade_core.harness.snapshot import (
    REFERENCE_PLAN,
    Snapshot,
    empty_run_memory,
    latest_plan_memory,
    planned_trials,
)
from ade_core.schemas.artifact import BoundCommand, StrategyArtifact
from ade_core.schemas.deliveries import Analysis, ReviewDesign
from ade_core.schemas.memory import PlanMemory
from ade_core.schemas.trial import Trial, Unavailable
from ade_core.schemas.views import (
    AdmissionFeedback,
    AnalyzerView,
    BoundRecords,
    BuilderView,
    BuildInputs,
    CatalogEntry,
    Comparison,
    CoordinatorView,
    DevCheck,
    FamilyTemplate,
    FrozenInputsBrief,
    PackageSummary,
    PlanSummarizerView,
    PoolBrief,
    RealizationSummary,
    RecordFamilyView,
    RemainingBudget,
    ReviewResults,
    ReviewWorkerView,
    RunSummarizerView,
    SourceStrategy,
    StrategyFamilyBrief,
)

if TYPE_CHECKING:
    from ade_core.harness.core import Harness

RECORDS_PER_FAMILY = 200  # larger families stay in the package, reachable by id (App. C.9)


def _header(h: Harness, role: str, subject: str, basis: int, feedback: tuple[str, ...]) -> dict[str, Any]:
    return {
        "role": role,
        "subject": subject,
        "run_id": h.record.run_id,
        "task": h.task.name,
        "basis_revision": basis,
        "feedback": feedback,
    }


def artifact(h: Harness, digest: str) -> StrategyArtifact:
    """The stored StrategyArtifact z with ``digest``."""
    return StrategyArtifact.model_validate(h.store.objects.read_json(digest))


def catalog_entries(h: Harness, snap: Snapshot) -> tuple[CatalogEntry, ...]:
    trials_per_plan = h.config.budget.trials_per_plan
    return tuple(
        CatalogEntry(
            plan_id=p.plan_id,
            coordinator=p.coordinator,
            direction=p.direction,
            relation=p.relation,
            sources=p.sources,
            status="completed" if snap.plan_completed(p, trials_per_plan) else "active",
            trials={t.trial_id: t.status for t in snap.trials_of(p.plan_id)},
        )
        for p in snap.plans
    )


def coordinator_view(h: Harness, subject: str, basis: int, feedback: tuple[str, ...], coordinator: int):
    from ade_core.harness.method_views import coordinator_evidence

    snap = Snapshot.read(h.store, basis)
    budget = h.config.budget
    proposed = [p for p in snap.plans if p.plan_id != REFERENCE_PLAN]
    mine = [p for p in proposed if p.coordinator == coordinator]
    method = h.method
    return CoordinatorView(
        **_header(h, "coordinator", subject, basis, feedback),
        coordinator=coordinator,
        task_description=h.task.spec.description,
        metric_order=h.metrics.order,
        families=tuple(
            StrategyFamilyBrief(name=f.name, description=f.description, targets=f.targets, parameters=f.parameters)
            for f in h.families
        ),
        run_memory=snap.run_memory if method.run_memory_visible else empty_run_memory(),
        catalog=catalog_entries(h, snap) if method.shared_catalog else (),
        ranking=tuple(snap.ranking(h.metrics)) if method.shared_catalog else (),
        **coordinator_evidence(h, snap, coordinator),
        budget=RemainingBudget(
            plans_left_for_coordinator=max(0, budget.plans_per_coordinator - len(mine)),
            plans_left_total=max(0, budget.plans_per_coordinator * budget.coordinators - len(proposed)),
            trials_per_plan=budget.trials_per_plan,
        ),
    )


def build_inputs(h: Harness) -> BuildInputs:
    entry_points = tuple(
        f"{'async ' if e.is_async else ''}def {e.name}({', '.join(p.name for p in e.parameters)}) -> {e.returns}"
        for e in h.interface.entry_points
    )
    return BuildInputs(
        entry_points=entry_points,
        allowed_imports=h.interface.allowed_imports,
        constraints=h.interface.constraints,
        families=tuple(
            FamilyTemplate(name=f.name, description=f.description, template=f.template, parameters=f.parameters)
            for f in h.families
        ),
        development_inputs=h.dev_inputs,
        frozen_inputs=frozen_inputs_brief(h),
    )


def frozen_inputs_brief(h: Harness) -> FrozenInputsBrief | Unavailable:
    """The frozen inputs' statistics and sample rows, computed once per Harness (the inputs are frozen)."""
    cached = h.__dict__.get("_frozen_inputs_brief")
    if cached is None:
        try:
            inputs = h.gate.frozen_inputs()
        except Exception as exc:  # the view says why; realization reports the failure in full
            cached = Unavailable(reason=f"the frozen task inputs could not be read: {type(exc).__name__}: {exc}"[:500])
        else:
            cached = (
                Unavailable(reason="dry run: the frozen task inputs are not read")
                if inputs is None
                else FrozenInputsBrief(
                    description=inputs.description, statistics=inputs.statistics, sample=inputs.sample
                )
            )
        h.__dict__["_frozen_inputs_brief"] = cached
    return cached


def source_strategies(h: Harness, snap: Snapshot, sources: tuple[str, ...]) -> tuple[SourceStrategy, ...]:
    """The admitted artifacts of each source Plan's best eligible Trial."""
    found = []
    for plan_id in sources:
        best = snap.best_of(plan_id, h.metrics)
        if best is not None and isinstance(best.strategy_digest, str):
            z = artifact(h, best.strategy_digest)
            found.append(SourceStrategy(plan_id=plan_id, trial_id=best.trial_id, source=z.source, account=z.account))
    return tuple(found)


def builder_view(h: Harness, subject: str, basis: int, feedback: tuple[str, ...], trial_id: str, round_: int):
    snap = Snapshot.read(h.store, basis)
    trial = snap.trial(trial_id)
    assert trial is not None
    plan = snap.plan(trial.plan_id)
    assert plan is not None
    memory = h.store.get_model("plan_memory", trial.plan_memory_base, at_revision=basis)
    previous = tuple(
        AdmissionFeedback(
            round=r.round,
            admitted=r.admitted,
            failed_checks=r.failed_checks,
            notes=r.notes,
            source=artifact(h, r.strategy_digest).source,
            dev_check=DevCheck.model_validate(h.store.objects.read_json(r.dev_check)) if r.dev_check else None,
        )
        for r in trial.build_rounds  # development checks reach the Builder here, and nowhere else
    )
    return BuilderView(
        **_header(h, "builder", subject, basis, feedback),
        trial_id=trial_id,
        plan=plan,
        plan_memory=memory,
        sources=source_strategies(h, snap, plan.sources),
        build_inputs=build_inputs(h),
        round=round_,
        reflections_left=max(0, h.config.budget.builder_reflections - round_),
        previous=previous,
    )


@lru_cache(maxsize=64)
def _package_records(path: str) -> tuple[Any, dict[str, list[dict[str, Any]]]]:
    opened = open_package(Path(path))
    records = {}
    for ref in opened.manifest.records:
        rows = opened.records(ref.name)
        records[ref.name] = [{"id": row.get("id", f"{ref.name}#{i}"), **row} for i, row in enumerate(rows)]
    return opened.manifest, records


def package_records(trial: Trial, role: str) -> dict[str, list[dict[str, Any]]]:
    """The package's record families readable by ``role``, each record with an ``id``."""
    if not hasattr(trial.package, "path"):
        return {}
    manifest, records = _package_records(trial.package.path)  # type: ignore[union-attr]  # hasattr above: a package reference, not Unavailable
    readable = {ref.name for ref in manifest.records if role in ref.readable_by}
    return {name: rows for name, rows in records.items() if name in readable}


def reviewable_records(trial: Trial) -> dict[str, list[dict[str, Any]]]:
    """Every record family a review pool may draw from: what the Analyzer or the Review Worker reads."""
    return {**package_records(trial, "analyzer"), **package_records(trial, "review_worker")}


def analyzer_view(h: Harness, subject: str, basis: int, feedback: tuple[str, ...], trial_id: str, stage: str):
    trial = h.store.get_model("trial", trial_id, at_revision=basis)
    assert trial is not None
    source: str | Unavailable = Unavailable(reason="no admitted strategy")
    if isinstance(trial.strategy_digest, str):
        source = artifact(h, trial.strategy_digest).source  # the code only: the account restates ψ
    realization: RealizationSummary | Unavailable = Unavailable(reason="not realized")
    if isinstance(trial.records.realization, str) and isinstance(trial.records.command, str):
        record = h.store.objects.read_json(trial.records.realization)
        command = BoundCommand.model_validate(h.store.objects.read_json(trial.records.command))
        realization = RealizationSummary(
            verdict=record["verdict"],
            reasons=tuple(record.get("reasons", ())),
            statistics=record.get("statistics", {}),
            intervention=command.intervention.summary,
        )
    package: PackageSummary | Unavailable = Unavailable(reason="no Experiment Package")
    families: tuple[RecordFamilyView, ...] = ()
    if hasattr(trial.package, "path"):
        manifest, _ = _package_records(trial.package.path)  # type: ignore[union-attr]  # hasattr above: a package reference, not Unavailable
        package = PackageSummary(
            status=manifest.status,
            in_loop_scores=manifest.in_loop_scores,
            selected_step=manifest.selected_step,
            checkpoints=tuple(c.model_dump(mode="json") for c in manifest.checkpoints),
            metric_order=h.metrics.order,
        )
        families = tuple(
            RecordFamilyView(name=name, count=len(rows), records=tuple(rows[:RECORDS_PER_FAMILY]))
            for name, rows in package_records(trial, "analyzer").items()
        )
    readable = reviewable_records(trial)
    present = set(readable)
    pools = tuple(
        PoolBrief(
            name=p.name,
            record=p.record,
            selections=p.selections,
            min_coverage=p.min_coverage,
            group_key=p.group_key,
            size=len(readable.get(p.record, ())),
            groups=tuple(dict.fromkeys(str(r.get(p.group_key)) for r in readable.get(p.record, ())))
            if p.group_key
            else (),
        )
        for p in h.review_pools
        if p.record in present
    )
    review = None
    if stage == "interpret" and isinstance(trial.records.review_design, str):
        design = h.store.objects.read_json(trial.records.review_design)
        judgments: Any = Unavailable(reason="no review requested")
        coverage: dict[str, Any] = {}
        if isinstance(trial.records.review, str):
            stored = h.store.objects.read_json(trial.records.review)
            judgments, coverage = tuple(stored["judgments"]), stored.get("coverage", {})
        elif isinstance(trial.records.review, Unavailable):
            judgments = trial.records.review
        review = ReviewResults(
            design=ReviewDesign.model_validate(design["design"]), judgments=judgments, coverage=coverage
        )
    return AnalyzerView(
        **_header(h, "analyzer", subject, basis, feedback),
        trial_id=trial_id,
        stage=stage,
        strategy_source=source,
        realization=realization,
        package=package,
        records=families,
        review_pools=pools,
        review=review,
    )


def review_worker_view(h: Harness, subject: str, basis: int, feedback: tuple[str, ...], trial_id: str, batch=None):
    """The bound records of one review batch (all bound records when ``batch`` is None)."""
    trial = h.store.get_model("trial", trial_id, at_revision=basis)
    assert trial is not None and isinstance(trial.records.review_design, str)
    if batch is None:
        batch = h.store.objects.read_json(trial.records.review_design)["bound"]
    return ReviewWorkerView(
        **_header(h, "review_worker", subject, basis, feedback),
        trial_id=trial_id,
        requests=tuple(BoundRecords.model_validate(b) for b in batch),
    )


def plan_summarizer_view(h: Harness, subject: str, basis: int, feedback: tuple[str, ...], trial_id: str):
    from ade_core.harness.ranking import deltas

    trial = h.store.get_model("trial", trial_id, at_revision=basis)
    assert trial is not None
    plan = h.store.get_model("plan", trial.plan_id, at_revision=basis)
    assert plan is not None
    comparisons = tuple(
        Comparison(name=name, target=target, deltas=deltas(trial.scores, target))
        for name, target in (("comparison_target", plan.comparison_target), ("portfolio_target", plan.portfolio_target))
        if target is not None
    )
    analysis: Analysis | Unavailable = Unavailable(reason="no analysis")
    if isinstance(trial.records.analysis, str):
        analysis = Analysis.model_validate(h.store.objects.read_json(trial.records.analysis))
    elif isinstance(trial.records.analysis, Unavailable):
        analysis = trial.records.analysis
    return PlanSummarizerView(
        **_header(h, "plan_summarizer", subject, basis, feedback),
        trial_id=trial_id,
        plan_id=plan.plan_id,
        direction=plan.direction,
        commitment=plan.commitment(),
        status=trial.status,
        failure=trial.failure,
        scores=trial.scores,
        realization=trial.conclusions.realization,
        portfolio=trial.conclusions.portfolio,
        comparisons=comparisons,
        analysis=analysis,
        parent_memory=latest_plan_memory(h.store, plan.plan_id, basis),
    )


def run_summarizer_view(h: Harness, subject: str, basis: int, feedback: tuple[str, ...], plan_memory_ref: str):
    snap = Snapshot.read(h.store, basis)
    update = h.store.get_model("plan_memory", plan_memory_ref, at_revision=basis)
    assert isinstance(update, PlanMemory)
    trial = snap.trial(update.source_trials[-1]) if update.source_trials else None
    hypothesis: Any = trial.conclusions.hypothesis if trial else Unavailable(reason="no source Trial")
    return RunSummarizerView(
        **_header(h, "run_summarizer", subject, basis, feedback),
        commit_key=subject,
        run_memory=snap.run_memory,
        update=update,
        hypothesis=hypothesis,
        ranking=tuple(snap.ranking(h.metrics)),
    )


def render_template(template: str, values: dict[str, Any]) -> str:
    """A catalog family's source with its ``$name`` fields filled (values as Python literals)."""
    return string.Template(template).substitute({k: repr(v) for k, v in values.items()})


__all__ = ["planned_trials", "render_template"]
