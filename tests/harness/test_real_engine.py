"""One non-dry Run on the tiny world with the real Engine: one Plan, one Trial (issue 7, Tests).

The real path: sandboxed admission and realization (PipelineGate) -> Bind -> LocalExecutor
running `ade engine run` -> package -> blinded analysis -> memory; bootstrap scores the base
model with `ade engine base-eval`; then `ade heldout` evaluates the frozen checkpoint. The
settings are the smallest that still train, select a checkpoint and evaluate (~1 min on 2 cores).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from harness_world import CONFIG

from ade_core.config import load_config
from ade_core.engine.job import EngineJob
from ade_core.engine.package import open_package
from ade_core.harness.run import drive_run, init_run
from ade_core.store import RunStore, check_store
from ade_core.testing import run_command

ADE = str(Path(sys.executable).with_name("ade"))
SMALLEST = [
    "budget.coordinators=1",
    "budget.plans_per_coordinator=1",
    "budget.trials_per_plan=1",
    "data.select_size=16",
    "training.sft.epochs=1",
    "checkpoint.every_steps=1",
    "evaluation.in_loop.k_online=1",
    "evaluation.in_loop.k_offline=1",
    "evaluation.in_loop.limit=4",
    "evaluation.decoding.max_new_tokens=24",
]


@pytest.mark.trial
def test_one_plan_one_trial_with_the_real_engine(tmp_path):
    derived = tmp_path / "real.toml"
    derived.write_text(
        f'extends = "{CONFIG}"\n'
        '[[evaluation.held_out]]\nname = "tiny_harder"\nsource = "tiny:held_out_harder"\nk = 1\nlimit = 3\n'
    )
    run_dir = tmp_path / "run"
    init_run(run_dir, load_config(derived, SMALLEST), dry_run=False)
    assert drive_run(run_dir) == "completed"

    with RunStore.open(run_dir) as store:
        assert check_store(store) == []
        record = store.get_model("run", "run")
        trials = {d.key: d.model() for d in store.list("trial")}
        attempts = [d.model() for d in store.list("attempt")]
    assert set(trials) == {"P000/T1", "C1/P1/T1"}
    for trial in trials.values():
        assert trial.status == "completed", (trial.trial_id, trial.failure)
        assert set(trial.scores) == {"pass_at_k", "average_at_k"}
        assert trial.plan_memory is not None and trial.conclusions.realization in ("verified", "deviated")
    assert all(a.status == "succeeded" and a.resources["executor"] == "local" for a in attempts)
    for trial in trials.values():  # the grant the attempt ran with is recorded in its package, threads and all
        resources = open_package(Path(trial.package.path)).manifest.resources
        assert resources["threads"] == resources["torch_threads"] and resources["cpus"]
    assert isinstance(record.base_model, dict) and set(record.base_model) == {"pass_at_k", "average_at_k"}
    assert record.selection.trial_id in trials and Path(record.selection.checkpoint_path).is_dir()

    for job_file in (run_dir / "attempts").glob("*/job.json"):  # Sec 3.4: no held-out suite in a Trial's job
        text = job_file.read_text()
        assert "tiny_harder" not in text and "held_out_harder" not in text
        if job_file.parent.name != "base-model":
            EngineJob.model_validate(json.loads(text)).check()

    proc = run_command([ADE, "heldout", str(run_dir), "--json"], idle_s=15)
    assert proc.returncode == 0, proc.stderr[-2000:]
    evaluation = json.loads(proc.stdout)
    assert evaluation["engine"] == "engine" and evaluation["fresh"] is True
    assert evaluation["checkpoint"] == record.selection.checkpoint_path
    assert [b["name"] for b in evaluation["benchmarks"]] == ["tiny_harder"]
    assert evaluation["benchmarks"][0]["problems"] == 3 and evaluation["benchmarks"][0]["scores"] is not None
