"""The live progress display and the end of `ade run`: modes, heartbeats, held-out, report, summary."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from ade_core.progress import ProgressDisplay, RunProgress, TrialProgress, _stage, headline, read_progress, rich_table
from ade_core.store import RunStore
from ade_core.testing import run_command

REPO = Path(__file__).resolve().parents[1]
ADE = str(Path(sys.executable).with_name("ade"))


def ade(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    return run_command([ADE, *args], idle_s=15, cwd=cwd)


@pytest.fixture(scope="module")
def dry_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """`ade run` with no CONFIG (the tiny data-selection example) as a dry run, JSON progress."""
    run_dir = tmp_path_factory.mktemp("progress") / "run"
    proc = ade("run", "--dry-run", "--run-dir", str(run_dir), "--progress", "json")
    assert proc.returncode == 0, proc.stderr
    return run_dir, proc


def test_no_config_runs_the_tiny_data_selection_example(dry_run) -> None:
    run_dir, _ = dry_run
    status = json.loads(ade("status", str(run_dir), "--json").stdout)
    assert status["task"] == "data_selection" and status["run_id"].startswith("tiny-data-selection-")
    assert status["phase"] == "completed" and len(status["plans"]) == 6  # P000 + 1 Coordinator x 5 Plans


def test_json_progress_is_one_object_per_change_then_a_summary(dry_run) -> None:
    run_dir, proc = dry_run
    events = [json.loads(line) for line in proc.stderr.splitlines() if line.startswith("{")]
    assert events and all({"elapsed_s", "phase", "trials_done", "trials_planned"} <= set(e) for e in events)
    assert events[-1]["phase"] == "completed" or any(e["phase"] == "completed" for e in events)
    finals = {e["trial"]["trial_id"]: e["trial"] for e in events if "trial" in e}
    assert len(finals) == 6 and {t["status"] for t in finals.values()} == {"completed"}
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    assert summary["phase"] == "completed" and Path(summary["report"]) == run_dir / "report.html"
    assert (run_dir / "report.html").is_file()


def test_end_of_run_held_out_covers_the_selection_and_every_trial(dry_run) -> None:
    from ade_core.harness.heldout import HeldOutStore

    run_dir, _ = dry_run
    evaluations = HeldOutStore(run_dir).evaluations()
    status = json.loads(ade("status", str(run_dir), "--json").stdout)
    trials = {t["trial_id"] for p in status["plans"] for t in p["trials"]}
    assert [e.scope for e in evaluations].count("final_selection") == 1
    assert evaluations[0].scope == "final_selection" and evaluations[0].trial_id == status["selection"]["trial_id"]
    assert {e.trial_id for e in evaluations} == trials  # the selection once, every other Trial once
    assert len(evaluations) == len(trials)
    # resuming a completed run evaluates nothing twice
    assert ade("resume", str(run_dir), "--progress", "none").returncode == 0
    assert len(HeldOutStore(run_dir).evaluations()) == len(trials)


def test_read_progress_counts_trials_and_finds_the_best(dry_run) -> None:
    run_dir, _ = dry_run
    with RunStore.open(run_dir) as store:
        progress = read_progress(run_dir, store, started=0.0)
    status = json.loads(ade("status", str(run_dir), "--json").stdout)
    assert (progress.trials_done, progress.trials_planned) == (6, 6)
    assert progress.best is not None and progress.best[0] == status["selection"]["plan_id"]
    assert progress.base == status["base_model"]
    assert [t.trial_id for t in progress.trials][0] == "P000/T1"
    assert "6/6 Trials" in headline(progress)


def test_heartbeat_stages_name_training_steps_and_evaluation() -> None:
    assert _stage({"phase": "train", "detail": {"step": 7, "total": 52}}) == ("train", "step 7/52")
    assert _stage({"phase": "online_eval", "detail": {"checkpoint": 26, "done": 0, "total": 2}}) == (
        "online eval",
        "checkpoint 1/2",
    )
    assert _stage({"phase": "offline_eval", "detail": {"checkpoint": 52}}) == ("offline eval", "step 52")
    assert _stage({}) == ("starting", "")


def test_plain_mode_prints_a_line_per_change_not_per_step(tmp_path: Path) -> None:
    display = ProgressDisplay(tmp_path, "plain", stream=io.StringIO())
    base = RunProgress("r", "search", 5.0, 0, 2, None, None, None)
    for step in (1, 2, 3):
        trial = TrialProgress("C1/P1/T1", "C1/P1", "running", "train", f"step {step}/3")
        display._emit_changes(RunProgress(**{**base.__dict__, "trials": [trial]}))
    display._emit_changes(
        RunProgress(
            **{**base.__dict__, "trials": [TrialProgress("C1/P1/T1", "C1/P1", "running", "offline eval", "step 3")]}
        )
    )
    lines = display.stream.getvalue().splitlines()  # type: ignore[attr-defined]
    assert len(lines) == 3  # the phase, training started, offline evaluation started
    assert "train step 1/3" in lines[1] and "offline eval" in lines[2]


def test_plain_and_json_modes_print_each_step_of_a_phase_note(tmp_path: Path) -> None:
    done = RunProgress("r", "completed", 400.0, 6, 6, None, None, None)
    for mode in ("plain", "json"):
        display = ProgressDisplay(tmp_path, mode, stream=io.StringIO())
        for note in ("", "held-out evaluation 0/6", "held-out evaluation 0/6", "held-out evaluation 1/6", ""):
            display._emit_changes(RunProgress(**{**done.__dict__, "note": note}))
        lines = display.stream.getvalue().splitlines()  # type: ignore[attr-defined]
        assert len(lines) == 4, lines  # the phase, 0/6, 1/6, then the note cleared
        if mode == "plain":
            assert lines[1].endswith("held-out evaluation 0/6") and lines[2].endswith("held-out evaluation 1/6")
        else:
            assert [json.loads(line).get("note") for line in lines] == [
                None,
                "held-out evaluation 0/6",
                "held-out evaluation 1/6",
                None,
            ]


def test_rich_table_has_a_row_per_trial() -> None:
    from rich.console import Console

    progress = RunProgress(
        "r",
        "search",
        65.0,
        1,
        3,
        130.0,
        {"average_at_k": 40.0},
        ("C1/P1", {"average_at_k": 45.0}),
        [
            TrialProgress("P000/T1", "P000", "completed", "completed", "", {"average_at_k": 41.0}),
            TrialProgress("C1/P1/T1", "C1/P1", "running", "train", "step 3/52"),
        ],
    )
    console = Console(file=io.StringIO(), width=160)
    console.print(rich_table(progress))
    text = console.file.getvalue()  # type: ignore[attr-defined]
    assert "1/3 Trials" in text and "left ~2:10" in text and "step 3/52" in text and "41.0" in text


def test_unknown_progress_mode_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown progress mode 'fancy'"):
        ProgressDisplay(tmp_path, "fancy")
    proc = ade("run", "--dry-run", "--progress", "fancy")
    assert proc.returncode == 2 and "fancy" in proc.stderr
