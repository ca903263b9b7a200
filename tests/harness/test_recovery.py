"""Crash recovery, the operator ledger and forks: a resumed run commits what an uninterrupted one would."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from harness_world import RecordingBackend, config, digest_of, dry_run, models

from ade_core.harness.core import CRASH_ENV
from ade_core.harness.fork import fork_run
from ade_core.harness.operator import append_action
from ade_core.harness.run import drive_run, init_run
from ade_core.harness.scripted import ScriptedBackend
from ade_core.schemas.trial import Unavailable
from ade_core.store import RunStore, check_store, state_digest
from ade_core.store.digest import project
from ade_core.testing import run_command

HERE = Path(__file__).resolve().parent
CRASH_KILLS = 100


def research_without_run_record(run_dir: Path) -> list:
    """Plans, Trials and memory versions (projected as the digest sees them), in commit order."""
    with RunStore.open(run_dir) as store:
        return [
            (doc.kind, doc.key, project(doc.document))
            for kind in ("plan", "trial", "plan_memory", "run_memory")
            for doc in store.list(kind)
        ]


def test_sigkilled_controllers_resume_to_the_uninterrupted_state_digest(tmp_path):
    result = run_command(
        [sys.executable, str(HERE / "crash_driver.py"), str(tmp_path), "20260603", str(CRASH_KILLS)],
        idle_s=15,
        cwd=HERE,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["kills"] >= CRASH_KILLS
    assert report["problems"] == []
    assert report["digests"] and all(d == report["reference"] for d in report["digests"])


def test_resume_never_re_asks_a_question_already_answered(tmp_path):
    run_dir = tmp_path / "run"
    init_run(run_dir, config(coordinators=2, plans=1), dry_run=True)
    code = f"from ade_core.harness.run import drive_run; drive_run({str(run_dir)!r})"
    crashed = run_command([sys.executable, "-c", code], idle_s=10, env={**os.environ, CRASH_ENV: "40"})
    assert crashed.returncode == -9
    with RunStore.open(run_dir) as store:
        answered = {(d.role, d.subject) for d in store.accepted_deliveries()}
    assert len(answered) > 5
    backend = RecordingBackend()
    assert drive_run(run_dir, backend=backend) == "completed"
    asked = {(role, json.loads(view)["subject"]) for role, views in backend.views.items() for view in views}
    assert not asked & answered
    uninterrupted = tmp_path / "uninterrupted"
    dry_run(uninterrupted, config(coordinators=2, plans=1))
    assert digest_of(run_dir) == digest_of(uninterrupted)


class Operator(ScriptedBackend):
    """Appends an operator action to the ledger (from its own connection) when a given call comes in."""

    def __init__(self, run_dir: Path, action: str, when: str):
        super().__init__()
        self.run_dir, self.action, self.when, self.done = run_dir, action, when, False

    async def deliver(self, role, view):
        if view.subject == self.when and not self.done:
            self.done = True
            with RunStore.open(self.run_dir) as other:
                append_action(other, self.action, operator="test", reason="testing")
        return await super().deliver(role, view)


def test_pause_stops_at_a_boundary_and_resume_completes_the_run(tmp_path):
    run_dir = tmp_path / "run"
    init_run(run_dir, config(coordinators=2, plans=2), dry_run=True)
    assert drive_run(run_dir, backend=Operator(run_dir, "pause", "C1/P2")) == "paused"
    trials = models(run_dir, "trial")
    assert any(not t.terminal for t in trials) or len(trials) < 5
    with RunStore.open(run_dir) as store:
        assert store.get_model("run", "run").phase == "search"
        append_action(store, "resume", operator="test")
    assert drive_run(run_dir) == "completed"
    # Paused work restarts at the resume, later on the clock, so the interleaving may differ from an
    # uninterrupted run; the research is still complete and nothing was lost or merged twice.
    trials = models(run_dir, "trial")
    assert len(trials) == 5 and all(t.status == "completed" and t.plan_memory for t in trials)
    with RunStore.open(run_dir) as store:
        assert check_store(store) == []
        assert len(store.queue(status="published")) == 5


def test_finish_lets_in_flight_work_complete_then_selects(tmp_path):
    run_dir = tmp_path / "run"
    init_run(run_dir, config(coordinators=2, plans=3), dry_run=True)
    assert drive_run(run_dir, backend=Operator(run_dir, "finish", "C1/P2")) == "completed"
    plans = models(run_dir, "plan")
    trials = models(run_dir, "trial")
    assert len(plans) < 7  # no new Plans after the finish
    assert all(t.status == "completed" and t.plan_memory for t in trials)  # in-flight ones finished, memory too
    with RunStore.open(run_dir) as store:
        assert store.queue(status="pending") == []
        record = store.get_model("run", "run")
        assert record.phase == "completed" and not isinstance(record.selection, Unavailable)


def test_cancel_ends_unfinished_trials_cancelled_without_a_selection(tmp_path):
    run_dir = tmp_path / "run"
    init_run(run_dir, config(coordinators=1, plans=2), dry_run=True)
    assert drive_run(run_dir, backend=Operator(run_dir, "cancel", "C1/P1/T1#build-0")) == "cancelled"
    trial = next(t for t in models(run_dir, "trial") if t.trial_id == "C1/P1/T1")
    assert trial.status == "cancelled" and trial.failure == "cancelled by the operator"
    assert isinstance(trial.scores, Unavailable)
    with RunStore.open(run_dir) as store:
        record = store.get_model("run", "run")
        assert record.phase == "cancelled" and record.selection is None
        assert check_store(store) == []
    assert drive_run(run_dir) == "cancelled"  # a cancelled run stays cancelled


def test_a_fork_continues_from_its_revision_and_leaves_the_source_untouched(tmp_path):
    source = tmp_path / "source"
    dry_run(source, config(coordinators=2, plans=2))
    with RunStore.open(source) as store:
        before = (store.revision, state_digest(store))
        middle = next(e.revision for e in store.events() if e.subject == "C2/P1" and e.kind == "delivery_accepted")
    fork = fork_run(source, middle, tmp_path / "fork")
    with RunStore.open(fork) as store:
        assert store.get_model("run", "run").forked_from == f"source@{middle}"
        assert store.get_model("run", "run").phase == "search"
        assert check_store(store) == []
    assert drive_run(fork) == "completed"
    with RunStore.open(source) as store:
        assert (store.revision, state_digest(store)) == before
    # the continuation commits the same research the source did after that revision
    assert research_without_run_record(fork) == research_without_run_record(source)
