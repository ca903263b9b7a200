"""`examples/tiny-data-selection-c3.toml`: three Coordinators searching at once on two one-thread slots."""

from __future__ import annotations

import sys
from pathlib import Path

from ade_core.config import load_config
from ade_core.executors import slots_from_resources
from ade_core.schemas.trial import Attempt
from ade_core.store import RunStore
from ade_core.testing import run_command

C3 = Path(__file__).resolve().parents[1] / "examples" / "tiny-data-selection-c3.toml"
ADE = str(Path(sys.executable).with_name("ade"))


def test_c3_example_cuts_two_cores_into_two_one_thread_slots() -> None:
    experiment = load_config(C3).experiment
    assert experiment.budget.coordinators == 3 and experiment.budget.plans_per_coordinator == 2
    slots = slots_from_resources(experiment.resources, cpus=[0, 1])
    assert [slot.cpus for slot in slots] == [(0,), (1,)]


def test_c3_example_runs_its_coordinators_concurrently(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    proc = run_command([ADE, "run", str(C3), "--dry-run", "--run-dir", str(run_dir), "--progress", "none"], idle_s=10)
    assert proc.returncode == 0, proc.stderr
    with RunStore.open(run_dir) as store:
        plans = sorted(doc.key for doc in store.list("plan"))
        attempts = [Attempt.model_validate(doc.document) for doc in store.list("attempt")]
    assert plans == ["C1/P1", "C1/P2", "C2/P1", "C2/P2", "C3/P1", "C3/P2", "P000"]
    searched = [a for a in attempts if not a.trial_id.startswith("P000/")]
    assert len(searched) == 6 and all(a.status == "succeeded" and a.ended_at for a in searched)

    def coordinator(attempt: Attempt) -> str:
        return attempt.trial_id.split("/")[0]

    # Trials of different Coordinators were in flight at the same time: search did not go one
    # Coordinator after another.
    overlapping = {
        frozenset((coordinator(a), coordinator(b)))
        for a in searched
        for b in searched
        if coordinator(a) != coordinator(b) and a.started_at < b.ended_at and b.started_at < a.ended_at  # type: ignore[operator]
    }
    assert overlapping, [(a.trial_id, a.started_at, a.ended_at) for a in searched]
    first_ends = {c: min(a.ended_at for a in searched if coordinator(a) == c) for c in ("C1", "C2", "C3")}
    first_starts = {c: min(a.started_at for a in searched if coordinator(a) == c) for c in ("C1", "C2", "C3")}
    assert max(first_starts.values()) < min(first_ends.values())  # all three had a Trial running before any finished
