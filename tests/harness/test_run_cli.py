"""`ade run --dry-run`, `ade status`, the operator commands and `ade fork`, as a user runs them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from harness_world import CONFIG

from ade_core.testing import run_command

ADE = [str(Path(sys.executable).with_name("ade"))]
BUDGET = ["--set", "budget.coordinators=3", "--set", "budget.plans_per_coordinator=1"]


def ade(*args: str) -> subprocess.CompletedProcess[str]:
    return run_command([*ADE, *args], idle_s=15)


def test_dry_run_status_fork_and_operator_commands(tmp_path):
    run_dir = tmp_path / "run"
    proc = ade("run", str(CONFIG), "--dry-run", *BUDGET, "--run-dir", str(run_dir))
    assert proc.returncode == 0, proc.stderr
    assert "phase completed" in proc.stdout and "state_digest sha256:" in proc.stdout

    status = json.loads(ade("status", str(run_dir), "--json").stdout)
    assert status["phase"] == "completed" and status["operator"] == "running"
    assert status["budget"]["plans_used"] == {"C1": 1, "C2": 1, "C3": 1}
    assert [p["plan_id"] for p in status["plans"]][0] == "P000"
    assert {t["status"] for p in status["plans"] for t in p["trials"]} == {"completed"}
    assert {"proposal", "build", "execution", "analysis", "memory_update"} <= set(status["seconds_per_stage"])
    assert status["agents"]["tokens_total"] > 0
    assert status["state_digest"] in proc.stdout
    text = ade("status", str(run_dir)).stdout
    assert "phase completed" in text and status["state_digest"] in text

    again = ade("run", str(CONFIG), "--dry-run", *BUDGET, "--run-dir", str(run_dir))
    assert again.returncode == 2 and "ade resume" in again.stderr and "Traceback" not in again.stderr

    forked = ade("fork", f"{run_dir}@30", "--run-dir", str(tmp_path / "fork"))
    assert forked.returncode == 0, forked.stderr
    # the operator steers a run that is not done: pause the fork, and resume lifts the pause
    assert ade("pause", str(tmp_path / "fork"), "--reason", "maintenance").returncode == 0
    assert json.loads(ade("status", str(tmp_path / "fork"), "--json").stdout)["operator"] == "paused"
    resumed = ade("resume", str(tmp_path / "fork"))
    assert resumed.returncode == 0, resumed.stderr
    fork_status = json.loads(ade("status", str(tmp_path / "fork"), "--json").stdout)
    assert fork_status["phase"] == "completed" and fork_status["forked_from"] == "run@30"
    # the same selection; its checkpoint lives under the fork when the fork re-ran that attempt
    physical = ("checkpoint_path",)
    assert {k: v for k, v in fork_status["selection"].items() if k not in physical} == {
        k: v for k, v in status["selection"].items() if k not in physical
    }
    assert Path(fork_status["selection"]["checkpoint_path"]).parts[-3] == "attempts"

    # a completed run is not steered any more: cancelling it is refused and changes nothing
    refused = ade("cancel", str(run_dir))
    assert refused.returncode == 2 and "already completed" in refused.stderr
    after = json.loads(ade("status", str(run_dir), "--json").stdout)
    assert after["phase"] == "completed" and after["operator"] == "running"
    assert after["state_digest"] == status["state_digest"]

    bad = ade("fork", f"{run_dir}@nope")
    assert bad.returncode == 2 and "RUN@REV" in bad.stderr
