"""The inventory's optional base_pass_rate column: K real samples of the base per RFT problem, graded by
𝓑's in-loop grader, cached per model digest (a second read samples nothing)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ade_core.config import load_config
from ade_core.engine import base_pass_rate, data
from ade_core.plugins import load_plugins

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def test_base_pass_rate_is_sampled_once_and_cached_per_model_digest(tmp_path, monkeypatch):
    monkeypatch.setattr(base_pass_rate, "cache_dir", lambda: tmp_path / "cache")
    pool = tmp_path / "pool.jsonl"
    rows = data.read_jsonl(data.resolve_path(EXAMPLES, "tiny:rft_pool"))[:6]
    pool.write_text("".join(json.dumps(r) + "\n" for r in rows))
    overrides = [f"data.source={pool}", "data.base_pass_rate_samples=3", "evaluation.decoding.max_new_tokens=64"]
    loaded = load_config(EXAMPLES / "tiny-curriculum-ci.toml", overrides)
    task = load_plugins().task("curriculum")
    inventory = task.task_inputs(loaded.experiment, loaded.base_dir).calls[0].arguments["candidate_inventory"]
    rates = [row["base_pass_rate"] for row in inventory]
    assert len(rates) == 6 and all(rate in (0.0, 1 / 3, 2 / 3, 1.0) for rate in rates)
    assert list(inventory[0])[-1] == "base_pass_rate"  # an extra column after the paper's seven
    (cached,) = (tmp_path / "cache").glob("*.json")
    assert json.loads(cached.read_text())["samples"] == 3

    def no_sampling(*args, **kwargs):
        raise AssertionError("the cached column was sampled again")

    monkeypatch.setattr("ade_core.engine.evaluation.evaluate", no_sampling)
    again = task.task_inputs(loaded.experiment, loaded.base_dir).calls[0].arguments["candidate_inventory"]
    assert [row["base_pass_rate"] for row in again] == rates
    model = data.resolve_model(EXAMPLES, "tiny")
    other = tmp_path / "other-model"
    other.mkdir()
    (other / "config.json").write_text("{}")
    problems = [{"problem_id": r["problem_id"], "question": r["question"], "reference_answer": "1"} for r in inventory]
    config = loaded.experiment
    assert base_pass_rate.cache_key(config, model, problems) != base_pass_rate.cache_key(config, other, problems)


def test_no_samples_means_no_column():
    loaded = load_config(EXAMPLES / "tiny-curriculum-ci.toml")
    task = load_plugins().task("curriculum")
    inventory = task.task_inputs(loaded.experiment, loaded.base_dir).calls[0].arguments["candidate_inventory"]
    assert "base_pass_rate" not in inventory[0]
    with pytest.raises(Exception, match="base_pass_rate_samples is 0"):
        base_pass_rate.base_pass_rates(loaded.experiment, Path(loaded.base_dir), inventory[:2])


def test_a_row_without_an_integer_level_is_refused_by_name_while_the_rft_pool_still_reads(tmp_path):
    from ade_core import rft_inventory

    rows = data.read_jsonl(data.resolve_path(EXAMPLES, "tiny:rft_pool"))[:6]
    rows[2] = {**rows[2], "level": "hard"}
    rows[3] = {**rows[3], "level": "Level 4"}
    pool = tmp_path / "pool.jsonl"
    pool.write_text("".join(json.dumps(r) + "\n" for r in rows))
    loaded = load_config(EXAMPLES / "tiny-curriculum-ci.toml", [f"data.source={pool}"])
    inventory = rft_inventory(loaded.experiment, Path(loaded.base_dir))  # what the Engine trains on
    assert [r["level"] for r in inventory.rows][2:4] == ["hard", 4]
    task = load_plugins().task("curriculum")
    with pytest.raises(Exception, match=f"problem '{rows[2]['unique_id']}' has level 'hard'"):
        task.task_inputs(loaded.experiment, loaded.base_dir)
