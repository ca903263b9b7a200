"""The session's end-to-end fixtures: the local Run of the CI preset (killed and resumed), which its own tests
read and the Ray Run compares its scores with; and a third party's strategy through `ade trial` with a cold
cache, which `ade eval` then finds cached.

The two are independent, so pytest-xdist runs them on different workers (conftest.py at the root groups the
tests by the session fixtures they use)."""

from __future__ import annotations

import os

import pytest
from tiny_run_steps import (
    CONFIG,
    KILL_IN,
    RESUME_S,
    ade,
    engine_pid,
    start_and_kill_mid_training,
    status,
    still_running,
)

# The third party's Trial checks the plumbing of `ade admit`, `ade trial` and `ade eval` (announcements, order,
# tables, the cache), not what training achieves: the CI preset at a tenth of its work (40 examples, one
# epoch, 30 in-loop problems at K = 2) exercises every step of it.
QUICK_TOML = """extends = "{config}"
name = "tiny-data-selection-ci-quick"

[data]
select_size = 40

[training.sft]
epochs = 1
per_device_batch_size = 8

[checkpoint]
every_steps = 5

[evaluation.in_loop]
limit = 30
k_online = 1
k_offline = 2
"""
TRIAL_S = 60  # admit, Base, the reference Trial and the strategy's, with a cold cache, on an idle machine


@pytest.fixture(scope="session")
def killed_and_resumed(tmp_path_factory: pytest.TempPathFactory) -> dict:
    root = tmp_path_factory.mktemp("tiny-run")
    run_dir = root / "run"
    events = start_and_kill_mid_training(run_dir)
    killed = status(run_dir)
    orphan = engine_pid(run_dir, f"{KILL_IN.replace('/', '_')}_a1")  # the killed controller's Engine
    resumed = ade("resume", str(run_dir), "--progress", "plain", idle_s=RESUME_S)
    return {
        "root": root,
        "run_dir": run_dir,
        "events": events,
        "killed": killed,
        "orphan_alive_after_resume": still_running(orphan, run_dir),
        "resumed": resumed,
        "final": status(run_dir),
    }


@pytest.fixture(scope="session")
def third_party_trial(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """A third party's strategy, admitted and tried with `ade trial` on a cold cache: the first Trial under its
    config also evaluates Base and trains the reference."""
    root = tmp_path_factory.mktemp("third-party")
    config = root / "quick.toml"
    config.write_text(QUICK_TOML.format(config=CONFIG), encoding="utf-8")
    strategy = root / "third_party.py"
    catalog = ade("catalog", "data_selection", "question_dedup")
    assert catalog.returncode == 0, catalog.stderr
    strategy.write_text(catalog.stdout, encoding="utf-8")
    cache = {**os.environ, "ADE_CACHE_DIR": str(root / "cache")}
    admit_before = ade("admit", str(config), str(strategy), env=cache)
    trial = ade("trial", str(config), str(strategy), "--out", str(root / "trial"), env=cache, idle_s=TRIAL_S)
    admit_after = ade("admit", str(config), str(strategy), env=cache)
    summary = root / "trial" / "summary.json"
    return {
        "root": root,
        "config": config,
        "cache": root / "cache",
        "trial": (trial.returncode, summary.read_text() if summary.is_file() else "", trial.stderr, trial.stdout),
        "admits": (admit_before, admit_after),
    }
