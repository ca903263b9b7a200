"""`ade status` time per stage (paper Fig. 4), including the time bound commands waited for an executor slot."""

from __future__ import annotations

from harness_world import config, dry_run, models

from ade_core.harness.run import SimulationSettings
from ade_core.harness.status import format_status, run_status
from ade_core.store import RunStore


def test_waiting_for_a_slot_is_its_own_stage(tmp_path):
    run_dir = tmp_path / "run"
    simulation = SimulationSettings(engine_slots=1, engine_seconds=600.0)
    assert dry_run(run_dir, config(coordinators=3, plans=1), simulation=simulation) == "completed"
    attempts = models(run_dir, "attempt")
    assert all(a.waited_s is not None for a in attempts)
    assert any(a.waited_s > 0 for a in attempts)  # three Coordinators share one slot
    with RunStore.open(run_dir) as store:
        status = run_status(store)
    stages = status["seconds_per_stage"]
    assert set(stages) == {"proposal", "build", "waiting", "execution", "analysis", "memory_update"}
    assert stages["waiting"] == round(sum(a.waited_s for a in attempts), 3)
    total = sum((a.ended_at - a.started_at).total_seconds() for a in attempts)
    assert abs(stages["waiting"] + stages["execution"] - total) < 0.01  # waiting is not counted as execution
    assert "waiting" in format_status(status)


def test_unlimited_simulated_slots_never_wait(tmp_path):
    run_dir = tmp_path / "run"
    assert dry_run(run_dir, config(coordinators=2, plans=1)) == "completed"
    assert {a.waited_s for a in models(run_dir, "attempt")} == {0.0}
