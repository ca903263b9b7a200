"""Paper Sec 4: the Curriculum shares the Reward Design reference. The two tasks' configs map to one cached
reference (and Base) exactly when base, pool, recipe and evaluation match; a Reward Design config that trains
its pool in order, or any recipe difference, keeps its own."""

from __future__ import annotations

from pathlib import Path

import pytest

from ade_core.config import load_config
from ade_core.harness.standalone import comparison_dir, shared_digest

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
SHUFFLED = ["training.grpo.shuffle_data=true", "training.grpo.shuffle_actor=true"]


def _as_reward_design(tmp_path: Path, *overrides: str):
    path = tmp_path / "reward-design.toml"
    path.write_text(
        f'extends = "{EXAMPLES / "tiny-curriculum-ci.toml"}"\n'
        'task = "reward_design"\nname = "rd-on-the-curriculum-pool"\n'
        "[replay]\nprompt_groups = 4\n[judge]\nenabled = true\n"
    )
    return load_config(path, [*SHUFFLED, *overrides])


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ADE_CACHE_DIR", str(tmp_path / "cache"))


def test_matching_configs_of_the_two_tasks_share_one_reference_directory(tmp_path):
    curriculum = load_config(EXAMPLES / "tiny-curriculum-ci.toml")
    reward_design = _as_reward_design(tmp_path)
    assert curriculum.digest != reward_design.digest  # different 𝓑s ...
    assert shared_digest(curriculum.experiment) == shared_digest(reward_design.experiment)  # ... one reference
    shared = comparison_dir(curriculum)
    assert shared == comparison_dir(reward_design) and shared.name.startswith("rft_outcome-")


@pytest.mark.parametrize(
    "override",
    [
        "training.grpo.shuffle_data=false",  # the Engine then trains the pool in order: not a random order
        "training.grpo.learning_rate=0.0002",
        "data.source=tiny:rft_pool_hard",
        "evaluation.in_loop.k_offline=2",
        "seeds.training=1",
    ],
)
def test_a_recipe_pool_evaluation_or_order_difference_keeps_a_separate_reference(tmp_path, override):
    curriculum = comparison_dir(load_config(EXAMPLES / "tiny-curriculum-ci.toml"))
    assert comparison_dir(_as_reward_design(tmp_path, override)) != curriculum


def test_a_task_without_a_shared_reference_keeps_its_own_key(tmp_path):
    selection = comparison_dir(load_config(EXAMPLES / "tiny-data-selection-ci.toml"))
    assert not selection.name.startswith("rft_outcome-") and selection.parent.name == "comparisons"
