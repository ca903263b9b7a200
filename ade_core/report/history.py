"""A run's history as the report draws it: score over time, held-out records, stage times, tokens, lineage.

Read from the run store's events, attempts and memory (and, for held-out scores only, from the
operator-only held-out store). Time is the clock the run itself recorded: virtual seconds in dry
runs, wall-clock seconds otherwise.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from ade_core.harness.ranking import MetricOrder, eligible
from ade_core.harness.status import STAGES
from ade_core.schemas.memory import PlanMemory, RunMemory
from ade_core.schemas.plan import Plan
from ade_core.schemas.trial import Attempt, Trial
from ade_core.store import Event, RunStore

_TRIAL_SUFFIX = re.compile(r"/T\d+$")


@dataclass(frozen=True)
class TimelinePoint:
    """One step of the paper's Fig. 3: at ``seconds``, the best-so-far in-loop scores and their Trial.

    ``heldout`` is the held-out macro average of that Trial, or None where no record exists.
    """

    seconds: float
    trial_id: str | None  # None: the Base model
    in_loop: dict[str, float]
    heldout: dict[str, float] | None


@dataclass(frozen=True)
class Lineage:
    """The Plan lineage graph (paper Fig. 6): artifact edges and, separately, finding-citation edges.

    Edges go from the source Plan to the Plan that built on it; a citation edge is labelled with
    the finding id that was cited.
    """

    nodes: tuple[str, ...]
    artifact_edges: tuple[tuple[str, str, str], ...]  # (source plan, plan, relation)
    citation_edges: tuple[tuple[str, str, str], ...]  # (cited Trial's plan, plan, finding id)


def clock_of(event: Event, dry_run: bool) -> float:
    """An event's clock reading: virtual seconds (dry runs) or wall-clock epoch seconds."""
    if dry_run:
        reading = event.payload.get("vt", (event.payload.get("details") or {}).get("vt"))
        if isinstance(reading, int | float):
            return float(reading)
    return datetime.fromisoformat(event.at).timestamp()


def origin(events: list[Event], dry_run: bool) -> tuple[float, str]:
    if not events:
        return 0.0, "seconds"
    if dry_run:
        return 0.0, "virtual seconds since the run started (dry run: simulated durations)"
    return clock_of(events[0], dry_run), "wall-clock seconds since the run started"


def eligible_times(
    store: RunStore, trials: list[Trial], events: list[Event], dry_run: bool, origin: float
) -> dict[str, float]:
    """When each eligible Trial first became eligible (completed with in-loop scores): its point in Fig. 3."""
    by_revision = {e.revision: e for e in events}
    out: dict[str, float] = {}
    for trial in trials:
        for version in store.history("trial", trial.trial_id):
            if eligible(Trial.model_validate(version.document)):
                event = by_revision.get(version.revision)
                out[trial.trial_id] = (clock_of(event, dry_run) - origin) if event else 0.0
                break
    return out


def heldout_by_trial(run_dir: Path) -> dict[str, list[dict[str, float]]]:
    """Held-out macro averages per Trial id, oldest first, from every record in the operator-only store.

    Records are matched by their ``trial_id`` field; a record without one (or naming ``base``) is the
    Base model's. Any JSON record under ``heldout/`` with a ``macro_avg`` counts (a pass's ``work/``
    scratch does not), so per-Trial operator evaluations written next to ``ade heldout``'s are read too.
    """
    from ade_core.harness.heldout import HELDOUT_DIR, WORK_DIR

    root = run_dir / HELDOUT_DIR
    out: dict[str, list[dict[str, float]]] = {}
    if not root.is_dir():
        return out
    records = []
    for path in sorted(root.rglob("*.json")):
        if path.relative_to(root).parts[0] == WORK_DIR:  # a pass in progress: not a record
            continue
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(record, dict) and isinstance(record.get("macro_avg"), dict):
            records.append(record)
    records.sort(key=lambda r: (str(r.get("evaluated_at", "")), r.get("sequence", 0)))
    for record in records:
        scores = {k: float(v) for k, v in record["macro_avg"].items() if isinstance(v, int | float)}
        if scores:
            out.setdefault(str(record.get("trial_id") or "base"), []).append(scores)
    return out


@dataclass(frozen=True)
class HeldOutResult:
    """One Trial's latest held-out evaluation, per benchmark (None: that benchmark is missing)."""

    trial_id: str
    benchmarks: dict[str, dict[str, float] | None]
    macro_avg: dict[str, float | None]
    simulated: bool


def heldout_results(run_dir: Path) -> dict[str, HeldOutResult]:
    """Per Trial id (``base`` for the Base model), its latest held-out evaluation in the operator-only store."""
    from ade_core.harness.heldout import HeldOutStore

    try:
        evaluations = HeldOutStore(run_dir).evaluations()
    except (OSError, ValueError):  # an unreadable record: the table is left out, like the held-out line
        return {}
    return {
        e.trial_id: HeldOutResult(
            trial_id=e.trial_id,
            benchmarks={b.name: dict(b.scores) if b.scores is not None else None for b in e.benchmarks},
            macro_avg=dict(e.macro_avg),
            simulated=e.engine == "simulated",
        )
        for e in evaluations  # sequence order: a later evaluation of the same Trial replaces an earlier one
    }


def timeline(
    base: dict[str, float] | None,
    base_time: float,
    trials: list[Trial],
    times: dict[str, float],
    metrics: MetricOrder,
    heldout: dict[str, list[dict[str, float]]],
) -> tuple[TimelinePoint, ...]:
    """Base, then the best-so-far Trial's in-loop scores over time; each step carries its Trial's held-out scores."""

    def held(trial_id: str | None) -> dict[str, float] | None:
        found = heldout.get(trial_id or "base")
        return found[-1] if found else None

    # Base is where the plot starts, not a contender: final selection ranks Trials only, and a
    # small-budget SFT Trial may well score below the untrained base (the tiny world's does).
    points: list[TimelinePoint] = []
    incumbent: dict[str, float] | None = None
    if base is not None:
        points.append(TimelinePoint(base_time, None, dict(base), held(None)))
    ordered = sorted((t for t in trials if t.trial_id in times), key=lambda t: times[t.trial_id])
    for trial in ordered:
        assert isinstance(trial.scores, dict)
        if incumbent is None or metrics.beats(trial.scores, incumbent):
            incumbent = dict(trial.scores)
            points.append(TimelinePoint(times[trial.trial_id], trial.trial_id, incumbent, held(trial.trial_id)))
    return tuple(points)


def search_end(events: list[Event], dry_run: bool, origin: float) -> float:
    """Seconds from ``origin`` to the end of search (its last event while the run still searches)."""
    ended = [e for e in events if e.kind in ("search_completed", "final_selection")]
    last = ended[0] if ended else (events[-1] if events else None)
    return clock_of(last, dry_run) - origin if last is not None else 0.0


def plan_of(owner: str) -> str:
    return _TRIAL_SUFFIX.sub("", owner)


def stage_seconds(store: RunStore, events: list[Event], trials: list[Trial]) -> dict[str, dict[str, float]]:
    """Seconds per stage per Plan (paper Fig. 4): agent calls by role, Engine attempts as waiting/execution."""
    out: dict[str, dict[str, float]] = {}
    for event in events:
        if event.kind == "delivery_accepted" and isinstance(event.payload.get("details"), dict):
            plan = plan_of(event.subject.split("#", 1)[0])
            stage = STAGES.get(event.actor, event.actor)
            seconds = float(event.payload["details"].get("seconds", 0.0))
            out.setdefault(plan, {}).setdefault(stage, 0.0)
            out[plan][stage] += seconds
    plan_of_trial = {t.trial_id: t.plan_id for t in trials}
    for doc in store.list("attempt"):
        attempt = Attempt.model_validate(doc.document)
        if attempt.ended_at is None:
            continue
        plan = plan_of_trial.get(attempt.trial_id, plan_of(attempt.trial_id))
        waited = attempt.waited_s or 0.0
        stages = out.setdefault(plan, {})
        stages["waiting"] = stages.get("waiting", 0.0) + waited
        ran = max(0.0, (attempt.ended_at - attempt.started_at).total_seconds() - waited)
        stages["execution"] = stages.get("execution", 0.0) + ran
    return {plan: {k: round(v, 3) for k, v in stages.items()} for plan, stages in out.items()}


def tokens(events: list[Event]) -> dict[str, dict[str, int]]:
    """Agent tokens by Trial (Coordinator calls: by Plan) and role, refused or failed calls included."""
    out: dict[str, dict[str, int]] = {}
    for event in events:
        if event.kind == "delivery_accepted" and isinstance(event.payload.get("details"), dict):
            role, spent = event.actor, int(event.payload["details"].get("tokens", 0) or 0)
        elif event.payload.get("spent_tokens"):
            role, spent = str(event.payload.get("role", event.actor)), int(event.payload["spent_tokens"])
        else:
            continue
        owner = event.subject.split("#", 1)[0]
        out.setdefault(owner, {}).setdefault(role, 0)
        out[owner][role] += spent
    return out


def lineage(store: RunStore, plans: list[Plan]) -> Lineage:
    """Artifact edges from each Plan's relation and sources; citation edges from the findings it cited."""
    finding_trials: dict[str, tuple[str, ...]] = {}
    for doc in store.list("run_memory"):
        for f in RunMemory.model_validate(doc.document).findings:
            finding_trials.setdefault(f.finding_id, tuple(f.source_trials))
    for doc in store.list("plan_memory"):
        for f in PlanMemory.model_validate(doc.document).findings:
            finding_trials.setdefault(f.finding_id, tuple(f.source_trials))
    known = {p.plan_id for p in plans}
    artifact = tuple((source, p.plan_id, p.relation) for p in plans for source in p.sources if source in known)
    citation = []
    for plan in plans:
        for cited in plan.cited_findings:
            for trial_id in finding_trials.get(cited.finding_id, ()):
                source = plan_of(trial_id)
                if source in known and source != plan.plan_id:
                    citation.append((source, plan.plan_id, cited.finding_id))
    return Lineage(tuple(p.plan_id for p in plans), artifact, tuple(dict.fromkeys(citation)))
