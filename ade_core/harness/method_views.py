"""What a research method adds to the Coordinator's view (paper Sec 4.3, App. D.6).

``unified``: the session's own notes — its rationale for each of its Plans and its analysis of
each of their Trials, in order. ``raw_evidence``: every accepted Experiment Package, the bootstrap
baseline included, with the records the Analyzer would have read. Other methods add nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from ade_core.harness.snapshot import Snapshot
from ade_core.schemas.deliveries import Analysis
from ade_core.schemas.views import PackageEvidence, RecordFamilyView, SessionNote

if TYPE_CHECKING:
    from ade_core.harness.core import Harness

PACKAGE_RECORDS_PER_FAMILY = 50  # per package and family; the rest stay in the package


def session_notes(h: Harness, snap: Snapshot, coordinator: int) -> tuple[SessionNote, ...]:
    """The unified session's notes: its earlier Plan rationales and its analyses of their Trials."""
    notes = []
    for plan in snap.plans:
        if plan.coordinator != coordinator:
            continue
        notes.append(SessionNote(plan_id=plan.plan_id, kind="plan", text=f"{plan.direction} — {plan.rationale}"))
        for trial in snap.trials_of(plan.plan_id):
            if isinstance(trial.records.analysis, str):
                analysis = Analysis.model_validate(h.store.objects.read_json(trial.records.analysis))
                notes.append(
                    SessionNote(plan_id=plan.plan_id, trial_id=trial.trial_id, kind="analysis", text=analysis.summary)
                )
    return tuple(notes)


def package_evidence(h: Harness, snap: Snapshot) -> tuple[PackageEvidence, ...]:
    """Every accepted Experiment Package of the run (P000 included), in Trial order."""
    from ade_core.harness.views import _package_records

    found = []
    for trial in snap.trials:
        path = getattr(trial.package, "path", None)
        if path is None or not Path(path).exists():
            continue
        manifest, records = _package_records(path)
        readable = {ref.name for ref in manifest.records if "analyzer" in ref.readable_by}
        found.append(
            PackageEvidence(
                plan_id=trial.plan_id,
                trial_id=trial.trial_id,
                status=manifest.status,
                in_loop_scores=manifest.in_loop_scores,
                selected_step=manifest.selected_step,
                checkpoints=tuple(c.model_dump(mode="json") for c in manifest.checkpoints),
                records=tuple(
                    RecordFamilyView(name=name, count=len(rows), records=tuple(rows[:PACKAGE_RECORDS_PER_FAMILY]))
                    for name, rows in records.items()
                    if name in readable
                ),
            )
        )
    return tuple(found)


def coordinator_evidence(h: Harness, snap: Snapshot, coordinator: int) -> dict[str, Any]:
    """The method-specific fields of a Coordinator view."""
    method = h.method
    return {
        "method": method.method,
        "relations": method.relations,
        "notes": session_notes(h, snap, coordinator) if method.session_notes else (),
        "packages": package_evidence(h, snap) if method.packages_visible else (),
    }
