"""The admission pipeline on Data Selection: every inadmissible strategy ends as a typed result."""

from __future__ import annotations

from pathlib import Path

import pytest

from ade_core.config import load_config
from ade_core.harness.admission import admit
from ade_core.plugins import load_plugins
from ade_core.schemas.config import StrategyLimits

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


@pytest.fixture(scope="module")
def task():
    return load_plugins().task("data_selection")


@pytest.fixture(scope="module")
def judged():
    return load_config(EXAMPLES / "tiny-data-selection.toml", ["judge.enabled=true"]).experiment


def strategy(body: str, header: str = "") -> str:
    return f"{header}\nasync def select_trajectories(candidate_inventory, select_size, judge):\n{body}\n"


FIRST_GROUPS = """
    ids = []
    for record in sorted(candidate_inventory, key=lambda r: r["candidate_id"]):
        tids = record["trajectory_ids"]
        if len(ids) + len(tids) <= select_size:
            ids += tids
    return ids
"""


def checks(result):
    return {c.name: (c.status, c.reason) for c in result.checks}


def test_a_valid_strategy_is_admitted_with_every_check_listed(task):
    result = admit(strategy(FIRST_GROUPS), task)
    assert result.admitted and result.isolation
    assert [c.name for c in result.checks] == ["static_check", "sandbox_run", "output_validation", "probe:judge_called"]
    assert checks(result)["probe:judge_called"][0] == "skipped"
    assert result.calls[0].statistics["selected"] == 5 and result.calls[0].canonical == sorted(
        result.calls[0].canonical
    )


@pytest.mark.parametrize(
    ("name", "source", "failed", "reason"),
    [
        (
            "wrong count",
            strategy("    return [candidate_inventory[0]['candidate_id']]"),
            "output_validation",
            "expected exactly 5 distinct ids, got 1",
        ),
        (
            "unknown ids",
            strategy("    return [f'nope-{i}' for i in range(select_size)]"),
            "output_validation",
            "ids not in the inventory: ['nope-0'",
        ),
        (
            "duplicate ids",
            strategy("    t = candidate_inventory[0]['candidate_id']\n    return [t] * select_size"),
            "output_validation",
            "duplicate trajectory ids",
        ),
        ("forbidden import", strategy(FIRST_GROUPS, "import os"), "static_check", "import of 'os' is not allowed"),
        ("exception", strategy("    raise RuntimeError('boom')"), "sandbox_run", "exception: RuntimeError: boom"),
        ("timeout", strategy("    while True:\n        pass"), "sandbox_run", "timeout"),
        ("output too large", strategy("    print('x' * (4 << 20))\n    return []"), "sandbox_run", "output_limit"),
        (
            "not a list",
            strategy("    return {'ids': []}"),
            "output_validation",
            "expected a list of trajectory id strings",
        ),
    ],
)
def test_inadmissible_strategies_end_as_typed_results(task, name, source, failed, reason):
    result = admit(source, task, limits=StrategyLimits(admission_wall_s=5 if name == "timeout" else 60))
    assert not result.admitted, name
    status, why = checks(result)[failed]
    assert status == "failed" and reason in why, (name, why)
    later = [c for c in result.checks if c.name != failed and c.status != "passed"]
    assert all(c.status == "skipped" and c.reason for c in later), later


def test_judge_enrichment_requires_the_selector_to_call_the_judge(task, judged):
    ignores = admit(strategy(FIRST_GROUPS), task, judged)
    assert not ignores.admitted
    assert "never awaited judge" in checks(ignores)["probe:judge_called"][1]
    calls_it = strategy(
        "    groups = sorted(candidate_inventory, key=lambda g: g['candidate_id'])\n"
        "    rubric = {'dimensions': [{'name': 'format', 'criterion': 'one closed think span, then an answer',"
        " 'levels': [0, 1], 'weight': 1.0}]}\n"
        "    answers = await judge([{'question': g['messages'][0]['content'],"
        " 'response': g['messages'][-1]['content'], 'rubric': rubric} for g in groups])\n" + FIRST_GROUPS
    )
    result = admit(calls_it, task, judged)
    assert result.admitted, result.checks
    (judge_call,) = result.calls[0].service_calls
    assert judge_call["name"] == "judge" and len(judge_call["value"]) == 14
    assert all(answer["status"] == "completed" for answer in judge_call["value"])
