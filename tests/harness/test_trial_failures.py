"""Every failure ends in a typed terminal Trial that still gets its memory updates."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from harness_world import config, dry_run, models

from ade_core.engine.package import open_package
from ade_core.executors.base import AttemptOutcome
from ade_core.harness.run import SimulationSettings, open_harness
from ade_core.harness.scripted import ScriptedBackend
from ade_core.harness.trials import TrialRunner
from ade_core.schemas.artifact import BoundCommand
from ade_core.schemas.deliveries import BuilderDelivery
from ade_core.schemas.trial import Unavailable
from ade_core.schemas.views import BuilderView
from ade_core.store import RunStore, check_store

TRIAL = "C1/P1/T1"


def assert_memory_updates_once(run_dir, trial_ids):
    with RunStore.open(run_dir) as store:
        assert check_store(store) == []
        published = [e.commit_key for e in store.queue(status="published")]
        assert sorted(published) == sorted(f"{t}#run-memory" for t in trial_ids)
        memories = [d.model() for d in store.list("plan_memory") if d.model().version > 0]
        assert sorted(t for m in memories for t in m.source_trials[-1:]) == sorted(trial_ids)


class NetworkBuilder(ScriptedBackend):
    """A Builder whose strategy for C1/P1 always reaches for the network: never admissible."""

    def builder(self, view: BuilderView) -> BuilderDelivery:
        delivery = super().builder(view)
        if view.plan.plan_id == "C1/P1":
            return delivery.model_copy(update={"source": "import socket\n" + delivery.source})
        return delivery


def test_a_strategy_that_fails_admission_ends_inadmissible_after_j_reflections(tmp_path):
    run_dir = tmp_path / "run"
    assert dry_run(run_dir, config(coordinators=1, plans=2), backend=NetworkBuilder()) == "completed"
    trials = {t.trial_id: t for t in models(run_dir, "trial")}
    failed = trials[TRIAL]
    assert failed.status == "inadmissible"
    assert len(failed.build_rounds) == 3  # the first draft + J = 2 reflections
    assert not any(r.admitted for r in failed.build_rounds)
    assert all(
        any(c.startswith("static_check") and "socket" in c for c in r.failed_checks) for r in failed.build_rounds
    )
    for field in ("strategy_digest", "command_digest", "package", "scores"):
        assert isinstance(getattr(failed, field), Unavailable), field
    assert isinstance(failed.records.analysis, Unavailable)
    assert isinstance(failed.conclusions.realization, Unavailable)
    assert failed.conclusions.hypothesis == "inconclusive"  # the Plan Summarizer still assessed it
    assert trials["C1/P2/T1"].status == "completed"  # the slot was consumed; search went on
    assert_memory_updates_once(run_dir, trials)


def test_a_retryable_failure_is_retried_with_a_fresh_attempt_and_the_old_one_fenced(tmp_path):
    run_dir = tmp_path / "run"
    simulation = SimulationSettings(failures={TRIAL: ("crashed", "stalled")})
    assert dry_run(run_dir, config(coordinators=1, plans=1), simulation=simulation) == "completed"
    trial = next(t for t in models(run_dir, "trial") if t.trial_id == TRIAL)
    assert trial.status == "completed"
    assert trial.attempts == (f"{TRIAL}/a1", f"{TRIAL}/a2", f"{TRIAL}/a3")
    attempts = {a.attempt_id: a for a in models(run_dir, "attempt")}
    assert [attempts[a].status for a in trial.attempts] == ["fenced", "fenced", "succeeded"]
    assert [attempts[a].failure for a in trial.attempts] == ["crashed", "stalled", None]
    assert all(attempts[a].retryable for a in trial.attempts[:2])
    assert open_package(Path(trial.package.path)).manifest.attempt_id == f"{TRIAL}/a3"


def test_exhausted_retries_end_the_trial_engine_failed(tmp_path):
    run_dir = tmp_path / "run"
    simulation = SimulationSettings(failures={TRIAL: ("crashed", "crashed", "killed", "crashed")})
    assert dry_run(run_dir, config(coordinators=1, plans=1), simulation=simulation) == "completed"
    trials = {t.trial_id: t for t in models(run_dir, "trial")}
    trial = trials[TRIAL]
    assert trial.status == "engine_failed"
    assert len(trial.attempts) == 3  # the recovery budget
    assert "recovery budget exhausted" in trial.failure and "killed" in trial.failure
    assert isinstance(trial.scores, Unavailable) and isinstance(trial.package, Unavailable)
    assert_memory_updates_once(run_dir, trials)


def test_a_non_retryable_failure_is_not_retried(tmp_path):
    run_dir = tmp_path / "run"
    simulation = SimulationSettings(failures={TRIAL: ("engine_error",)})
    dry_run(run_dir, config(coordinators=1, plans=1), simulation=simulation)
    trial = next(t for t in models(run_dir, "trial") if t.trial_id == TRIAL)
    assert trial.status == "engine_failed" and len(trial.attempts) == 1
    assert trial.failure == "engine_error (not retryable)"


def test_a_missing_evaluation_is_a_typed_terminal_status_outside_the_ranking(tmp_path):
    run_dir = tmp_path / "run"
    simulation = SimulationSettings(missing_evaluation=(TRIAL,))
    dry_run(run_dir, config(coordinators=1, plans=1), simulation=simulation)
    trial = next(t for t in models(run_dir, "trial") if t.trial_id == TRIAL)
    assert trial.status == "evaluation_missing" and isinstance(trial.scores, Unavailable)
    assert isinstance(trial.records.analysis, str)  # the package was still analyzed
    assert isinstance(trial.conclusions.portfolio, Unavailable)
    with RunStore.open(run_dir) as store:
        assert store.get_model("run", "run").selection.plan_id == "P000"


def test_a_fenced_attempts_late_result_is_refused(tmp_path):
    run_dir = tmp_path / "run"
    simulation = SimulationSettings(failures={TRIAL: ("stalled",)})
    dry_run(run_dir, config(coordinators=1, plans=1), simulation=simulation)
    with RunStore.open(run_dir) as store:
        h = open_harness(store)
        trial = store.get_model("trial", TRIAL)
        fenced = store.get_model("attempt", f"{TRIAL}/a1")
        assert fenced.status == "fenced"
        revision = store.revision
        command = h.store.objects.read_json(trial.records.command)
        late = AttemptOutcome(
            attempt_id=fenced.attempt_id,
            status="failed",
            package=None,
            failure="crashed",
            retryable=True,
            resources={},
            detail="arrived after fencing",
            started_at=datetime.now(UTC),
            ended_at=datetime.now(UTC),
        )
        TrialRunner(h, "C1").record_outcome(trial, fenced, BoundCommand.model_validate(command), late)
        assert store.revision == revision  # nothing committed
        assert store.operations()[-1].action == "late_result_refused"
