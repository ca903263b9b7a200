"""A curriculum written only from the task contract, admitted on the paper-scale pool, realized at
100 x 256, and trained unchanged: at the paper's step shape (2 steps of 256 prompts) and through
`ade trial` next to Base and the random reference. GRPO consumes exactly the schedule, step by step."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from ade_core.config import load_config
from ade_core.engine.package import open_package
from ade_core.harness.standalone import run_trial
from ade_core.testing import run_command

REPO = Path(__file__).resolve().parents[3]
ADE = str(Path(sys.executable).with_name("ade"))
FULL = REPO / "examples" / "tiny-full-curriculum.toml"
CI = REPO / "examples" / "tiny-curriculum-ci.toml"
NOTE_WRITTEN = Path(__file__).parent / "strategies" / "band_cycling.py"
PAPER_REWARD = REPO / "plugins" / "reward_design" / "tests" / "strategies" / "paper_reward.py"


def _consumed_is_scheduled(package: Path) -> list[dict]:
    opened = open_package(package)
    steps = opened.records("consumed_problems")
    assert steps and all(step["matches_schedule"] for step in steps), steps[:1]
    (executed,) = opened.records("executed_strategy")
    realized = executed["realization"]["calls"][0]["canonical"]
    assert [step["problem_ids"] for step in steps] == realized[: len(steps)]  # consumed == scheduled
    return steps


def test_admit_shows_the_100_by_256_schedule_with_its_coverage():
    done = run_command([ADE, "admit", str(FULL), str(NOTE_WRITTEN)], idle_s=10)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    out = done.stdout
    assert "admitted: curriculum strategy" in out and "100 steps of 256" in out
    assert "inputs                 source_rows 3072, eligible_rows 3069, overlength_rows 3" in out
    assert "distinct_problems        3069" in out and "coverage                 1.00" in out


@pytest.mark.trial
def test_two_paper_shaped_steps_train_in_schedule_order(tmp_path):
    overrides = [
        "training.grpo.total_steps=2",
        "training.grpo.rollouts_per_prompt=2",
        "training.grpo.per_device_batch_size=64",
        "training.grpo.max_response_tokens=8",
        "checkpoint.every_steps=2",
        "evaluation.in_loop.limit=8",
        "evaluation.in_loop.k_offline=1",
        "evaluation.decoding.max_new_tokens=8",
    ]
    loaded = load_config(FULL, overrides)
    summary = run_trial(loaded, NOTE_WRITTEN.read_text(), tmp_path / "trial")
    assert summary["status"] == "completed", summary
    steps = _consumed_is_scheduled(Path(summary["package"]))
    assert len(steps) == 2 and all(len(step["problem_ids"]) == 256 for step in steps)
    assert sum(steps[0]["levels"].values()) == 256 and steps[1]["unique_so_far"] == 512
    rollouts = open_package(Path(summary["package"])).records("training_rollouts")
    assert len(rollouts) == 2 * 256 * 2


@pytest.mark.trial
def test_ade_trial_trains_it_unchanged_next_to_base_and_the_reference(tmp_path):
    env = {**os.environ, "ADE_CACHE_DIR": str(tmp_path / "cache")}
    done = run_command(
        [ADE, "trial", str(CI), str(NOTE_WRITTEN), "--json", "--out", str(tmp_path / "trial")], idle_s=75, env=env
    )
    assert done.returncode == 0, done.stderr[-3000:]
    payload = json.loads(done.stdout)
    mine, base, reference = payload["trial"], payload["base"], payload["reference"]
    assert mine["status"] == "completed" and mine["metric_order"] == ["average_at_k", "pass_at_k"]
    for summary in (mine, base, reference):
        assert set(summary["in_loop_scores"]) >= {"average_at_k", "pass_at_k"}
    steps = _consumed_is_scheduled(Path(mine["package"]))
    assert len(steps) == 4
    _consumed_is_scheduled(Path(reference["package"]))
    records = open_package(Path(mine["package"]))
    assert records.records("reuse_distribution")[0]["uses"] == 0 and records.records("cohort_outcomes")
    _reward_design_shares_the_reference(tmp_path, env, reference)


def _reward_design_shares_the_reference(tmp_path: Path, env: dict[str, str], reference: dict) -> None:
    """Paper Sec 4: Reward Design on the same base, pool and recipe (its Engine shuffling the pool) replays the
    reference the Curriculum Trial just trained, without training one of its own."""
    config = tmp_path / "reward-design.toml"
    config.write_text(
        f'extends = "{CI}"\ntask = "reward_design"\nname = "rd-on-the-curriculum-pool"\n'
        "[training.grpo]\nshuffle_data = true\nshuffle_actor = true\n[replay]\nprompt_groups = 4\n"
    )
    done = run_command([ADE, "admit", str(config), str(PAPER_REWARD)], idle_s=15, env=env)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "training the reference" not in done.stderr  # nothing trained
    assert "reference: the shared Trial curriculum trained under a matching config" in done.stdout
    assert "replayed 4 groups (16 rollouts, step 3 of the reference)" in done.stdout
    assert reference["reference_task"] == "curriculum" and Path(reference["package"]).is_dir()
