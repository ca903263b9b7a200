"""A reward written only from the paper's contract, admitted, replayed and trained unchanged through
`ade trial` and `ade admit` on the tiny CI config, next to Base and the outcome-only reference."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from ade_core.testing import run_command

REPO = Path(__file__).resolve().parents[3]
ADE = str(Path(sys.executable).with_name("ade"))
CONFIG = str(REPO / "examples" / "tiny-reward-design-ci.toml")
PAPER = Path(__file__).parent / "strategies" / "paper_reward.py"
PROBES = (
    "reward_contract",
    "judge_usage",
    "determinism",
    "record_order_invariance",
    "id_relabel_invariance",
    "advantage_sign_guard",
    "replay",
    "reward_hacking",
)


@pytest.mark.trial
def test_the_paper_reward_is_admitted_replayed_and_trained_next_to_base_and_the_reference(tmp_path):
    env = {**os.environ, "ADE_CACHE_DIR": str(tmp_path / "cache")}
    trial = run_command(
        [ADE, "trial", CONFIG, str(PAPER), "--json", "--out", str(tmp_path / "trial")], idle_s=75, env=env
    )
    assert trial.returncode == 0, trial.stderr[-3000:]
    assert "replay admission needs the generic reference's rollouts" in trial.stderr  # trained first, said so
    payload = json.loads(trial.stdout)
    mine, base, reference = payload["trial"], payload["base"], payload["reference"]
    assert mine["status"] == "completed" and mine["metric_order"] == ["average_at_k", "pass_at_k"]
    for summary in (mine, base, reference):
        assert set(summary["in_loop_scores"]) >= {"average_at_k", "pass_at_k"}
    checks = {c["name"].removeprefix("probe:"): c for c in mine["admission"]["checks"]}
    assert all(checks[name]["status"] == "passed" for name in PROBES), checks
    assert checks["replay"]["reason"].startswith("replayed 4 groups (16 rollouts, step 3 of the reference)")

    from ade_core.engine.package import open_package

    package = open_package(Path(mine["package"]))
    rollouts = package.records("training_rollouts")
    assert len(rollouts) == 4 * 4 * 4
    assert {r["credit_mode"] for r in rollouts} <= {"shaped", "identity", "abstained"}
    assert all(r["process_evidence"]["status"] in ("available", "unavailable") for r in rollouts)  # judge on
    assert {r["reward_status"] for r in rollouts} == {"ok"}
    (health,) = package.records("reward_health")
    assert health["sign_guard_violations"] == 0 and health["reward_outcome_divergence"]["assessed"]
    assert len(package.records("step_diagnostics")) == 4

    # `ade admit` now uses the cached reference: every probe, the replay and the hacking bank are printed
    admitted = run_command([ADE, "admit", CONFIG, str(PAPER)], idle_s=15, env=env)
    assert admitted.returncode == 0, admitted.stderr[-3000:]
    assert "training the reference first" not in admitted.stderr
    for name in PROBES:
        assert f"  passed  probe:{name}" in admitted.stdout
    assert "probe:replay: replayed 4 groups" in admitted.stdout
    assert "probe:reward_hacking: 10 exploits vs a correct response's 1.00: empty_answer 0.00" in admitted.stdout
    assert "cached for this config (in-loop):" in admitted.stdout
