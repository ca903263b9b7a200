"""Data Selection: conformance, the documented interface, and exact typed rejections."""

from __future__ import annotations

import copy

import pytest

from ade_core.harness.static_policy import check_strategy_source
from ade_core.plugins import load_plugins
from ade_core.testing import TaskConformance, run_strategy_calls


class TestConformance(TaskConformance):
    task = "data_selection"


@pytest.fixture
def task():
    return load_plugins().task("data_selection")


@pytest.fixture
def dev(task):
    return task.builder_dev_inputs(None).calls[0].arguments


# A strategy written only against the documented signature, inputs and imports.
JUDGE_STRATEGY = """
import json

LIMIT = 60


async def select_trajectories(candidate_inventory, select_size, judge):
    answers = await judge([{"candidate_id": r["candidate_id"]} for r in candidate_inventory])
    scores = {r["candidate_id"]: a.get("score", 0.0) if a.get("status") == "ok" else 0.0
              for r, a in zip(candidate_inventory, answers)}
    ranked = sorted(candidate_inventory, key=lambda r: (
        -scores[r["candidate_id"]], r["token_count"] > LIMIT, r["token_count"], r["candidate_id"]))
    chosen = []
    for record in ranked:
        ids = record["trajectory_ids"]
        if len(chosen) + len(ids) <= select_size:
            chosen += ids
    return json.loads(json.dumps(chosen))
"""


def test_documented_strategy_is_admissible_and_valid(task, dev):
    interface = task.interface()
    assert check_strategy_source(JUDGE_STRATEGY, interface) == []
    (result,) = run_strategy_calls(JUDGE_STRATEGY, interface, task.builder_dev_inputs(None))
    verdict = task.validate_output("select_trajectories", result["value"], dev)
    assert verdict.ok, verdict.errors
    assert verdict.statistics["selected"] == 5 and verdict.canonical == sorted(result["value"])


def test_reference_is_a_fixed_random_draw(task, dev):
    interface, inputs = task.interface(), task.builder_dev_inputs(None)
    first = run_strategy_calls(task.reference_strategy().source, interface, inputs)[0]["value"]
    second = run_strategy_calls(task.reference_strategy().source, interface, inputs)[0]["value"]
    assert first == second and len(first) == 5


def test_wrong_cardinality(task, dev):
    verdict = task.validate_output("select_trajectories", ["c000"], dev)
    assert verdict.errors == ("expected exactly 5 distinct ids, got 1",)


def test_duplicates_and_unknown_ids(task, dev):
    verdict = task.validate_output("select_trajectories", ["c000", "c000", "c001", "x", "c003"], dev)
    assert "duplicate trajectory ids: ['c000']" in verdict.errors
    assert "ids not in the inventory: ['x']" in verdict.errors


def test_the_inventory_is_flat_rows_one_trajectory_per_candidate(dev):
    fields = {"candidate_id", "problem_id", "trajectory_ids", "token_count", "uncapped_token_count", "over_cap"}
    fields |= {"length_bin", "domain", "difficulty", "quality_score", "messages"}
    for row in dev["candidate_inventory"]:
        assert set(row) == fields and row["trajectory_ids"] == [row["candidate_id"]]
        assert row["length_bin"] in ("le_4096", "4097_8192", "8193_16384") and isinstance(row["over_cap"], bool)
        assert row["token_count"] == min(row["uncapped_token_count"], 13)  # capped at the dev cutoff
        assert [m["role"] for m in row["messages"]] == ["user", "assistant"]
    assert any(row["over_cap"] for row in dev["candidate_inventory"])
    assert {row["length_bin"] for row in dev["candidate_inventory"]} == {"4097_8192", "8193_16384"}


def test_splitting_a_group_is_rejected(task, dev):
    # A row may carry several trajectory ids (a group): taking only one splits it.
    grouped = dict(
        dev,
        candidate_inventory=[
            *dev["candidate_inventory"],
            {**dev["candidate_inventory"][0], "candidate_id": "g", "trajectory_ids": ["g-0", "g-1"]},
        ],
    )
    verdict = task.validate_output("select_trajectories", ["g-0", "c000", "c001", "c003", "c004"], grouped)
    assert verdict.errors == ("candidate groups split (take all of their trajectories or none): ['g']",)
    whole = task.validate_output("select_trajectories", ["g-0", "g-1", "c000", "c001", "c003"], grouped)
    assert whole.ok and whole.statistics["groups"] == 4


def test_not_a_list(task, dev):
    verdict = task.validate_output("select_trajectories", {"ids": []}, dev)
    assert not verdict.ok and "expected a list of trajectory id strings" in verdict.errors[0]


def test_static_policy_rejections(task):
    interface = task.interface()
    codes = lambda src: [v.code for v in check_strategy_source(src, interface)]  # noqa: E731
    assert codes(
        "import os\nasync def select_trajectories(candidate_inventory, select_size, judge):\n    return []\n"
    ) == ["import"]
    assert codes("def select_trajectories(candidate_inventory, select_size, judge):\n    return []\n") == [
        "entry_point_kind"
    ]
    assert codes("async def select_trajectories(inventory, select_size, judge):\n    return []\n") == [
        "entry_point_signature"
    ]
    assert codes(
        "print('hi')\nasync def select_trajectories(candidate_inventory, select_size, judge):\n    return []\n"
    ) == ["top_level_statement"]
    assert codes("x = 1\n") == ["missing_entry_point"]
    assert codes("def f(:\n") == ["syntax"]


def test_bind_and_realization(task, dev):
    verdict = task.validate_output("select_trajectories", ["c002", "c002b", "c000", "c001", "c003"], dev)
    intervention = task.bind([verdict.canonical], "", None)
    assert intervention.kind == "sft_selection" and intervention.payload["selected_ids"] == verdict.canonical
    claim = {"statistic": "max_tokens", "comparator": "<=", "value": 1}
    assert task.realization_check(verdict.statistics, [claim], []).status == "deviated"
    assert task.realization_check(verdict.statistics, [], ["unavailable", "unavailable"]).status == "unverified"
    assert task.realization_check(verdict.statistics, [], ["ok", "unavailable"]).status == "verified"


def test_inventory_is_not_mutated_by_validation(task, dev):
    before = copy.deepcopy(dev)
    task.validate_output("select_trajectories", ["c000"], dev)
    assert dev == before


def test_sample_rows_keep_every_field_and_cut_long_texts():
    from ade_task_data_selection.task import SAMPLE_TEXT_CHARS, inventory_statistics, sample_rows

    rows = [
        {"candidate_id": f"c{i}", "domain": "math" if i % 3 else "code", "token_count": 10, "over_cap": i == 4}
        | {"uncapped_token_count": 10 + i, "length_bin": "le_4096", "trajectory_ids": [f"c{i}"]}
        | {"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "x" * 5000}]}
        for i in range(12)
    ]
    sample = sample_rows(rows, 5)
    assert [r["candidate_id"] for r in sample] == ["c0", "c1", "c3", "c2", "c6"]  # round-robin over domains
    content = sample[0]["messages"][1]["content"]
    assert (
        len(content) < SAMPLE_TEXT_CHARS + 40
        and "chars cut" in content
        and rows[0]["messages"][1]["content"] == "x" * 5000
    )
    stats = inventory_statistics(rows, 3)
    assert stats["total_tokens"] == 120 and stats["tokens_domain_code"] == 40 and stats["over_cap"] == 1
    assert stats["bin_le_4096"] == 12 and stats["domain_math"] == 8
