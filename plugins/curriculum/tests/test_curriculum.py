"""Curriculum: conformance, the documented interface, typed rejections."""

from __future__ import annotations

import pytest

from ade_core import TrainingTrace
from ade_core.harness.static_policy import check_strategy_source
from ade_core.plugins import load_plugins
from ade_core.testing import TaskConformance, run_strategy_calls


class TestConformance(TaskConformance):
    task = "curriculum"

    # The kit fails a task lacking a required hook; this one has no frozen inputs yet, so no Run of it
    # can start (`ade run` refuses it with a MissingHookError). Strict: the mark must go once it has them.
    @pytest.mark.xfail(strict=True, reason="curriculum does not implement ade_task_inputs yet")
    def test_required_hooks_implemented(self, handle):
        super().test_required_hooks_implemented(handle)


@pytest.fixture
def task():
    return load_plugins().task("curriculum")


@pytest.fixture
def dev(task):
    return task.builder_dev_inputs(None).calls[0].arguments


EASY_FIRST = """
import math


async def build_curriculum(candidate_inventory, total_steps, prompts_per_step, judge_batch):
    estimates = await judge_batch([{"problem_id": p["problem_id"]} for p in candidate_inventory])
    ordered = [p["problem_id"] for p in sorted(candidate_inventory, key=lambda p: (p["level"], p["source_order"]))]
    schedule = []
    for step in range(total_steps):
        start = (step * prompts_per_step) % len(ordered)
        window = (ordered + ordered)[start:start + prompts_per_step]
        schedule.append(window)
    assert math.isfinite(len(estimates))
    return schedule
"""


def test_documented_strategy_is_admissible_and_valid(task, dev):
    interface = task.interface()
    assert check_strategy_source(EASY_FIRST, interface) == []
    (result,) = run_strategy_calls(EASY_FIRST, interface, task.builder_dev_inputs(None))
    verdict = task.validate_output("build_curriculum", result["value"], dev)
    assert verdict.ok, verdict.errors
    assert verdict.statistics["coverage"] == 1.0 and verdict.statistics["max_reuse"] == 2


def test_reference_covers_the_pool_before_repeating(task, dev):
    (result,) = run_strategy_calls(task.reference_strategy().source, task.interface(), task.builder_dev_inputs(None))
    verdict = task.validate_output("build_curriculum", result["value"], dev)
    assert verdict.ok and verdict.statistics["distinct_problems"] == 24  # 6 x 8 = 48 slots over 24 problems
    assert all(batch == sorted(batch) for batch in verdict.canonical)


def test_rejections(task, dev):
    ids = [p["problem_id"] for p in dev["candidate_inventory"]]
    assert task.validate_output("build_curriculum", [ids[:8]] * 5, dev).errors == ("expected 6 batches, got 5",)
    dup = [ids[:8]] * 5 + [[ids[0]] * 8]
    assert task.validate_output("build_curriculum", dup, dev).errors == (
        "batch 5: expected 8 distinct ids, got 1 of 8",
    )
    unknown = [ids[:8]] * 5 + [ids[:7] + ["nope"]]
    assert task.validate_output("build_curriculum", unknown, dev).errors == (
        "batch 5: ids not in the inventory: ['nope']",
    )


def test_bind_schedule(task, dev):
    ids = [p["problem_id"] for p in dev["candidate_inventory"]]
    verdict = task.validate_output("build_curriculum", [list(reversed(ids[:8]))] * 6, dev)
    intervention = task.bind([verdict.canonical], "", None)
    assert intervention.kind == "schedule" and intervention.payload["batches"][0] == sorted(ids[:8])


def test_judge_batch_is_the_judge_core_under_the_configs_judge():
    from pathlib import Path

    from ade_core import InvalidServiceRequest
    from ade_core.config import load_config

    examples = Path(__file__).resolve().parents[3] / "examples"
    config = load_config(examples / "tiny-curriculum.toml", ["judge.enabled=true"]).experiment
    (service,) = load_plugins().task("curriculum").services(config)
    assert service.name == "judge_batch" and service.essential
    rubric = (
        '{"criteria": [{"name": "correctness", "description": "the boxed answer is right", '
        '"levels": [0, 1], "weight": 1}]}'
    )
    (answer,) = service.handler([{"question": "What is 2 + 3?", "response": "\\\\boxed{5}", "rubric": rubric}])
    assert answer["status"] == "completed" and answer["scores_by_dimension"] == {"correctness": 1.0}
    with pytest.raises(InvalidServiceRequest, match="response"):
        service.handler([{"question": "What is 2 + 3?", "rubric": rubric}])


def test_consumed_problems_join_subject_and_level():
    kind = load_plugins().task("curriculum").intervention_kind("schedule")
    assert kind.prompt_schedule({"batches": [["a", "b"], ["b", "c"]]}) == [["a", "b"], ["b", "c"]]
    pool = {
        pid: {"problem_id": pid, "subject": subject, "level": level}
        for pid, subject, level in (("a", "Algebra", 1), ("b", "Geometry", 3), ("c", "Algebra", 5))
    }
    trace = TrainingTrace(payload={}, pool=pool, consumed=(("a", "b"), ("b", "c")))
    (records,) = kind.records(trace).values()
    assert records[1] == {
        "step": 1,
        "problem_ids": ["b", "c"],
        "problems": [
            {"problem_id": "b", "subject": "Geometry", "level": 3},
            {"problem_id": "c", "subject": "Algebra", "level": 5},
        ],
    }
