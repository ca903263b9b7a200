"""``ade eval --rl``: MaxRL from a checkpoint on the tiny world, its checkpoint picked by validation pass@k.

The RL run is a real ``sampling`` request on the local executor: TRL's GRPO trainer with the MaxRL
advantage, a checkpoint every two steps, each scored on validation problems the test set does not hold.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ade_core.testing import run_command

REPO = Path(__file__).resolve().parents[2]
CONFIG = REPO / "examples" / "tiny-data-selection-ci.toml"
RL_CONFIG = REPO / "examples" / "tiny-reward-design-ci.toml"  # 4 GRPO steps of 4 prompts, a checkpoint every 2
ADE = str(Path(sys.executable).with_name("ade"))


def ade(*args: str) -> subprocess.CompletedProcess[str]:
    return run_command([ADE, *args], idle_s=45, cwd=REPO)


@pytest.mark.trial
def test_maxrl_from_a_checkpoint_is_scored_at_its_best_validation_checkpoint(tmp_path):
    import torch
    from safetensors.torch import load_file

    from ade_core.engine.data import resolve_model

    checkpoint = tmp_path / "checkpoint"
    shutil.copytree(resolve_model(REPO, "tiny"), checkpoint)
    out = tmp_path / "e"
    args = ("eval", str(checkpoint), "--config", str(CONFIG), "--samples", "8", "--passk", "1,8", "--limit", "2")
    args += ("--rl", "maxrl", "--rl-config", str(RL_CONFIG), "--rl-problems", "tiny:rft_pool")
    args += ("--rl-validation", "tiny:rft_pool_mid", "--rl-validation-limit", "3", "--out", str(out), "--no-reference")
    done = ade(*args, "--json")
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)
    assert set(result["scores"]) == {"checkpoint", "checkpoint+RL", "Base"}
    assert all(set(s) == {"pass@1", "pass@8"} for s in result["scores"].values())
    rl = result["rl"]
    assert rl["estimator"] == "maxrl" and rl["select"] == "pass@8"
    assert [point["step"] for point in rl["curve"]] == [2, 4] and rl["initial"]["step"] == 0
    best = max(rl["curve"], key=lambda p: (p["validation"]["pass@8"], p["validation"]["pass@1"], -p["step"]))
    assert rl["selected"] == best
    recorded = json.loads((out / "rl" / "rl.json").read_text())
    assert recorded["selected"] == best and len(recorded["mean_reward_by_step"]) == 4
    assert json.loads((out / "rl" / "job.json").read_text())["rl"]["estimator"] == "maxrl"
    # every group trained on MaxRL's advantage: (r - mean) / mean, 0 where no rollout was correct
    groups: dict[tuple[int, str], list[dict]] = {}
    for rollout in recorded["rollouts"]:
        groups.setdefault((rollout["step"], rollout["problem_id"]), []).append(rollout)
    assert len(groups) == 4 * 4 and all(len(group) == 4 for group in groups.values())
    for group in groups.values():
        mean = sum(r["reward"] for r in group) / 4
        expected = [0.0 if mean == 0 else (r["reward"] - mean) / mean for r in group]
        assert [r["advantage"] for r in group] == expected
    assert any(0 < sum(r["reward"] for r in group) < 4 for group in groups.values())  # some groups had signal
    # RL moved the weights away from the checkpoint it started from
    chosen = Path(best["checkpoint"])
    assert chosen.parent == out / "rl" / "train"
    start, trained = load_file(checkpoint / "model.safetensors"), load_file(chosen / "model.safetensors")
    assert any(not torch.equal(start[name], trained[name]) for name in start if name in trained)

    again = ade(*args)  # the recorded RL is reused: nothing is trained again
    assert again.returncode == 0, again.stderr[-3000:]
    assert f"RL (maxrl): step {best['step']} chosen by validation pass@8" in again.stdout
    assert json.loads((out / "rl" / "rl.json").read_text()) == recorded


def test_bad_rl_input_is_refused_with_the_fix(tmp_path):
    base = ("eval", str(CONFIG), "--samples", "8", "--passk", "1", "--out", str(tmp_path / "o"), "--rl", "maxrl")
    bare = ade(*base)
    assert bare.returncode != 0 and "--rl needs --rl-config, --rl-problems, --rl-validation" in bare.stderr
    files = ("--rl-problems", "tiny:rft_pool", "--rl-validation", "tiny:rft_pool_mid")
    sft = ade(*base, "--rl-config", str(CONFIG), *files)
    assert sft.returncode != 0 and "paradigm is 'sft'; give a config with a [training.grpo] recipe" in sft.stderr
    few = ade(*base[:3], "4", *base[4:], "--rl-config", str(RL_CONFIG), *files)
    assert few.returncode != 0 and "validation pass@8 needs at least 8 samples per problem, but 4" in few.stderr
    missing = ade(*base, "--rl-config", str(RL_CONFIG), "--rl-problems", str(tmp_path / "none.jsonl"), *files[2:])
    assert missing.returncode != 0 and "none.jsonl does not exist" in missing.stderr
    assert not (tmp_path / "o" / "rl").exists()
