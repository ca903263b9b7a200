"""on_exhausted = "suspend_run": a spent recovery budget suspends the Run; `ade resume` continues it."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from harness_world import config, dry_run, models

from ade_core.harness.operator import append_action
from ade_core.harness.run import SimulationSettings, drive_run
from ade_core.harness.status import format_status, run_status
from ade_core.store import RunStore, check_store
from ade_core.testing import run_command

TRIAL = "C1/P1/T1"
ADE = str(Path(sys.executable).with_name("ade"))
SUSPEND = ["operational.recovery.on_exhausted=suspend_run"]


def test_a_spent_recovery_budget_suspends_the_run_and_resume_grants_a_fresh_one(tmp_path):
    run_dir = tmp_path / "run"
    simulation = SimulationSettings(failures={TRIAL: ("crashed", "killed", "crashed")})
    loaded = config(coordinators=2, plans=2, extra=SUSPEND)
    assert loaded.operational.recovery.on_exhausted == "suspend_run"
    assert dry_run(run_dir, loaded, simulation=simulation) == "suspended"

    with RunStore.open(run_dir) as store:
        assert check_store(store) == []
        record = store.get_model("run", "run")
        status = run_status(store)
        suspended_at = store.revision
    assert record.phase == "suspended" and record.selection is None
    assert record.suspended.trial_id == TRIAL and record.suspended.failures == 3
    assert record.suspended.phase_before == "search" and record.suspended.last_failure == "crashed"
    trial = next(t for t in models(run_dir, "trial") if t.trial_id == TRIAL)
    assert trial.status == "running" and len(trial.attempts) == 3  # where it was: not failed, not retried
    assert status["phase"] == "suspended" and status["suspended"]["trial_id"] == TRIAL
    assert "SUSPENDED" in format_status(status) and "ade resume" in format_status(status)

    # Without the operator's resume it stays suspended (an automatic restart must not loop on a broken node).
    assert drive_run(run_dir) == "suspended"
    with RunStore.open(run_dir) as store:
        assert store.revision == suspended_at

    proc = run_command([ADE, "resume", str(run_dir)], idle_s=15)
    assert proc.returncode == 0, proc.stderr
    assert "phase completed" in proc.stdout
    trials = {t.trial_id: t for t in models(run_dir, "trial")}
    trial = trials[TRIAL]
    assert trial.status == "completed" and trial.attempts[-1] == f"{TRIAL}/a4"  # a fresh budget, fresh id
    assert {t.status for t in trials.values()} == {"completed"} and len(trials) == 5
    with RunStore.open(run_dir) as store:
        record = store.get_model("run", "run")
        assert record.phase == "completed" and record.suspended is None
        assert record.recovery_grants == {TRIAL: 3}
        actions = [e.model().action for e in store.list("ledger")]
        # then `ade resume`'s end-of-run held-out evaluations: the final selection, then every other Trial
        assert actions == ["resume"] + ["held_out_evaluation"] * len(trials)
        assert check_store(store) == []
    status = json.loads(run_command([ADE, "status", str(run_dir), "--json"], idle_s=10).stdout)
    assert status["suspended"] is None and status["phase"] == "completed"


def test_a_resumed_run_that_exhausts_again_is_suspended_again(tmp_path):
    run_dir = tmp_path / "run"
    simulation = SimulationSettings(failures={TRIAL: ("crashed",) * 5})
    loaded = config(coordinators=1, plans=1, extra=[*SUSPEND, "budget.engine_attempts=2"])
    assert dry_run(run_dir, loaded, simulation=simulation) == "suspended"
    with RunStore.open(run_dir) as store:
        append_action(store, "resume")
    assert drive_run(run_dir) == "suspended"
    with RunStore.open(run_dir) as store:
        record = store.get_model("run", "run")
        assert record.suspended.failures == 4 and record.recovery_grants == {TRIAL: 2}
        append_action(store, "resume")
    assert drive_run(run_dir) == "completed"  # a5 fails, a6 succeeds within the second grant
    trial = next(t for t in models(run_dir, "trial") if t.trial_id == TRIAL)
    assert trial.status == "completed" and len(trial.attempts) == 6


def test_fail_trial_stays_the_default(tmp_path):
    assert config().operational.recovery.on_exhausted == "fail_trial"
