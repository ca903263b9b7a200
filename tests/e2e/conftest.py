"""The local end-to-end Run, once per session: its own tests read it, and the Ray Run compares its scores with it."""

from __future__ import annotations

import os

import pytest
from tiny_run_steps import CONFIG, KILL_IN, ade, engine_pid, start_and_kill_mid_training, status, still_running


@pytest.fixture(scope="session")
def killed_and_resumed(tmp_path_factory: pytest.TempPathFactory) -> dict:
    root = tmp_path_factory.mktemp("tiny-run")
    run_dir = root / "run"
    events = start_and_kill_mid_training(run_dir)
    killed = status(run_dir)
    orphan = engine_pid(run_dir, f"{KILL_IN.replace('/', '_')}_a1")  # the killed controller's Engine

    resumed = ade("resume", str(run_dir), "--progress", "plain")
    # A third party's strategy, tried with `ade trial` on the same config next to the Run.
    strategy = root / "third_party.py"
    catalog = ade("catalog", "data_selection", "question_dedup")
    assert catalog.returncode == 0, catalog.stderr
    strategy.write_text(catalog.stdout, encoding="utf-8")
    # A fresh cache: the first Trial under this config also evaluates Base and trains the reference.
    cache = {**os.environ, "ADE_CACHE_DIR": str(root / "cache")}
    admit_before = ade("admit", str(CONFIG), str(strategy), env=cache)
    trial = ade("trial", str(CONFIG), str(strategy), "--out", str(root / "trial"), env=cache)
    admit_after = ade("admit", str(CONFIG), str(strategy), env=cache)
    summary = root / "trial" / "summary.json"
    return {
        "root": root,
        "run_dir": run_dir,
        "events": events,
        "killed": killed,
        "orphan_alive_after_resume": still_running(orphan, run_dir),
        "resumed": resumed,
        "final": status(run_dir),
        "trial": (trial.returncode, summary.read_text() if summary.is_file() else "", trial.stderr, trial.stdout),
        "admits": (admit_before, admit_after),
    }
