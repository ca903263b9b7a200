"""Curriculum: conformance, 𝓑's inventory (exact rows, prompt limit, no held-out row), the schedule
contract's typed violations, canonicalization, the reference's epochs, judge_batch, package records."""

from __future__ import annotations

from pathlib import Path

import pytest

from ade_core import TrainingTrace
from ade_core.config import load_config
from ade_core.harness.static_policy import check_strategy_source
from ade_core.plugins import load_plugins
from ade_core.testing import TaskConformance, run_strategy_calls
from ade_task_curriculum.task import INVENTORY_FIELDS

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


class TestConformance(TaskConformance):
    task = "curriculum"


@pytest.fixture(scope="module")
def task():
    return load_plugins().task("curriculum")


@pytest.fixture(scope="module")
def full(task):
    """The paper-scale inputs: 𝓑's 3,072-problem pool, 100 steps of 256."""
    loaded = load_config(EXAMPLES / "tiny-full-curriculum.toml")
    return task.task_inputs(loaded.experiment, loaded.base_dir)


@pytest.fixture
def dev(task):
    return task.builder_dev_inputs(None).calls[0].arguments


def _validate(task, output, arguments):
    return task.validate_output("build_curriculum", output, arguments)


def test_the_inventory_is_the_rft_pool_under_the_prompt_limit_with_exactly_the_papers_fields(full):
    assert full.statistics["source_rows"] == 3072
    assert full.statistics["eligible_rows"] == 3069 and full.statistics["overlength_rows"] == 3
    (call,) = full.calls
    rows = call.arguments["candidate_inventory"]
    assert call.arguments["total_steps"] == 100 and call.arguments["prompts_per_step"] == 256
    assert len(rows) == 3069 and all(tuple(row) == INVENTORY_FIELDS for row in rows)
    assert all(isinstance(row["level"], int) and 1 <= row["level"] <= 5 for row in rows)
    assert all(row["prompt_tokens"] <= 160 for row in rows)
    assert [row["source_order"] for row in rows] == sorted(row["source_order"] for row in rows)
    # MATH's subject x level shares: every band cell of the four weakest subjects holds >= 60 problems
    band = {1: "foundation", 2: "foundation", 3: "bridge", 4: "challenge", 5: "challenge"}
    for subject in ("Counting & Probability", "Geometry", "Intermediate Algebra", "Precalculus"):
        for name in ("foundation", "bridge", "challenge"):
            cell = [r for r in rows if r["subject"] == subject and band[r["level"]] == name]
            assert len(cell) >= 60, (subject, name, len(cell))


def test_no_evaluation_problem_enters_the_inventory(full):
    """Canary: none of the world's in-loop or held-out problems is schedulable."""
    from ade_core.engine import data
    from ade_core.tiny.problems import problem_key
    from ade_core.tiny.world import HELD_OUT

    inventory = {problem_key(row["question"]) for row in full.calls[0].arguments["candidate_inventory"]}
    for split in ("in_loop", *HELD_OUT):
        rows = data.read_jsonl(data.resolve_path(EXAMPLES, f"tiny:{split}"))
        assert not inventory & {problem_key(r["problem"]) for r in rows}, split


def test_with_a_config_admission_runs_on_the_frozen_inventory(task):
    loaded = load_config(EXAMPLES / "tiny-curriculum-ci.toml")
    dev = task.builder_dev_inputs(loaded.experiment, loaded.base_dir)
    frozen = task.task_inputs(loaded.experiment, loaded.base_dir)
    assert dev.calls == frozen.calls and frozen.statistics["eligible_rows"] == 1000


def test_a_shuffled_recipe_is_refused_before_anything_runs(task):
    loaded = load_config(EXAMPLES / "tiny-curriculum-ci.toml", ["training.grpo.shuffle_actor=true"])
    with pytest.raises(Exception, match="shuffle_actor = false"):
        task.task_inputs(loaded.experiment, loaded.base_dir)


def test_each_violation_is_typed_and_names_the_first_step_and_id(task, full):
    arguments = full.calls[0].arguments
    ids = [row["problem_id"] for row in arguments["candidate_inventory"]]
    good = [ids[i * 256 : (i + 1) * 256] if (i + 1) * 256 <= len(ids) else ids[:256] for i in range(100)]
    assert _validate(task, good, arguments).ok

    def first_error(schedule):
        verdict = _validate(task, schedule, arguments)
        assert not verdict.ok
        return verdict.errors[0]

    assert first_error(good[:99]) == "expected 100 steps, got 99: return one list per step"
    assert first_error(good[:6] + [good[6][:255]] + good[7:]) == "step 7 of 100: expected 256 distinct ids, got 255"
    twice = good[:3] + [[*good[3][:255], good[3][0]]] + good[4:]
    assert first_error(twice) == f"step 4 of 100: id {good[3][0]!r} appears twice; a step holds distinct problems"
    unknown = good[:9] + [["nope", *good[9][1:]]] + good[10:]
    assert first_error(unknown).startswith("step 10 of 100: id 'nope' is not in the candidate inventory")
    from ade_core.engine import data

    source = data.read_jsonl(data.resolve_path(EXAMPLES, "tiny:rft_pool_math"))
    long_id = next(data.row_id(r) for r in source if data.row_id(r) not in set(ids))  # excluded by the limit
    overlength = good[:1] + [[long_id, *good[1][1:]]] + good[2:]
    assert "excluded by the prompt limit" in first_error(overlength) and first_error(overlength).startswith("step 2")
    assert first_error(good[:4] + [[7, *good[4][1:]]] + good[5:]).startswith("step 5 of 100: id 7 is a int")
    assert first_error("not a schedule").startswith("expected a list of 100 steps")


def test_each_step_is_canonicalized_by_source_order(task, dev):
    ids = [p["problem_id"] for p in dev["candidate_inventory"]]
    order = {p["problem_id"]: p["source_order"] for p in dev["candidate_inventory"]}
    schedule = [list(reversed(ids[i : i + 32])) for i in range(0, 192, 32)]
    verdict = _validate(task, schedule, dev)
    assert verdict.ok and all(step == sorted(step, key=order.get) for step in verdict.canonical)
    assert verdict.statistics["coverage"] == 192 / 210 and verdict.statistics["max_reuse"] == 1
    intervention = task.bind([verdict.canonical], "", None)
    assert intervention.kind == "schedule" and intervention.payload["batches"] == verdict.canonical


def test_the_reference_shuffles_epochs_and_drops_each_remainder(task, dev):
    (result,) = run_strategy_calls(task.reference_strategy().source, task.interface(), task.builder_dev_inputs(None))
    verdict = _validate(task, result["value"], dev)
    assert verdict.ok
    steps = [set(step) for step in result["value"]]
    epoch = set().union(*steps[:6])  # 210 // 32 = 6 steps per epoch: 192 distinct problems, 18 left out
    assert len(epoch) == 192 and all(not a & b for i, a in enumerate(steps) for b in steps[i + 1 :])
    again = run_strategy_calls(task.reference_strategy().source, task.interface(), task.builder_dev_inputs(None))
    assert again[0]["value"] == result["value"]  # drawn once: the same schedule every time


def test_the_paper_scale_reference_covers_each_epoch_before_repeating(task, full):
    (result,) = run_strategy_calls(task.reference_strategy().source, task.interface(), full)
    schedule = result["value"]
    per_epoch = 3069 // 256  # 11 steps, 253 problems dropped per epoch
    first = [pid for step in schedule[:per_epoch] for pid in step]
    assert len(first) == len(set(first)) == per_epoch * 256
    assert _validate(task, schedule, full.calls[0].arguments).ok


def test_judge_batch_scores_a_correct_and_a_wrong_response_differently():
    config = load_config(EXAMPLES / "tiny-curriculum-ci.toml", ["judge.enabled=true"]).experiment
    (service,) = load_plugins().task("curriculum").services(config)
    assert service.name == "judge_batch" and service.essential
    rubric = {
        "criteria": [{"name": "correctness", "description": "the boxed answer is right", "levels": [0, 1], "weight": 1}]
    }
    question = "A rectangle is 5 by 23. What is its perimeter?"
    right, wrong = service.handler(
        [
            {"question": question, "response": "<think>2*(5+23)=56</think>\\boxed{56}", "rubric": rubric},
            {"question": question, "response": "<think>5+23=28</think>\\boxed{28}", "rubric": rubric},
        ]
    )
    assert right["status"] == wrong["status"] == "completed"
    assert right["projected_score"] == 1.0 and wrong["projected_score"] == 0.0


def test_a_strategy_that_awaits_judge_batch_is_admissible(task, dev):
    source = """
async def build_curriculum(candidate_inventory, total_steps, prompts_per_step, judge_batch):
    rubric = {"criteria": [{"name": "correctness", "description": "right", "levels": [0, 1], "weight": 1}]}
    answers = await judge_batch([{"question": row["question"], "response": row["reference_answer"], "rubric": rubric}
                                 for row in candidate_inventory[:4]])
    assert len(answers) == 4
    ids = [row["problem_id"] for row in candidate_inventory]
    return [ids[(step * prompts_per_step) % len(ids):][:prompts_per_step] or ids[:prompts_per_step]
            for step in range(total_steps)]
"""
    assert check_strategy_source(source, task.interface()) == []
    (result,) = run_strategy_calls(source, task.interface(), task.builder_dev_inputs(None))
    assert _validate(task, result["value"], dev).ok


def test_records_join_scheduled_and_consumed_with_subject_level_reuse_and_cohorts():
    kind = load_plugins().task("curriculum").intervention_kind("schedule")
    assert kind.prompt_schedule({"batches": [["a", "b"], ["b", "c"]]}) == [["a", "b"], ["b", "c"]]
    pool = {
        pid: {"problem_id": pid, "subject": subject, "level": level}
        for pid, subject, level in (("a", "Algebra", 1), ("b", "Geometry", 3), ("c", "Algebra", 5), ("d", "Algebra", 2))
    }
    rollouts = [
        {"step": 0, "problem_id": "a", "reward": 1.0, "outcome": 1.0},
        {"step": 0, "problem_id": "a", "reward": 0.0, "outcome": 0.0},
        {"step": 0, "problem_id": "b", "reward": 0.0, "outcome": 0.0},
        {"step": 1, "problem_id": "c", "reward": 1.0, "outcome": 1.0},
    ]
    trace = TrainingTrace(
        payload={"batches": [["a", "b"], ["b", "c"]]}, pool=pool, consumed=(("a", "b"), ("c", "b")), rollouts=rollouts
    )
    records = kind.records(trace)
    first, second = records["consumed_problems"]
    assert first["matches_schedule"] and not second["matches_schedule"]  # consumed out of order is visible
    assert second["subjects"] == {"Algebra": 1, "Geometry": 1} and second["levels"] == {"3": 1, "5": 1}
    assert (first["new_problems"], second["new_problems"], second["unique_so_far"]) == (2, 1, 3)
    assert records["reuse_distribution"] == [
        {"uses": 0, "problems": 1},
        {"uses": 1, "problems": 2},
        {"uses": 2, "problems": 1},
    ]
    algebra_1 = next(
        c for c in records["cohort_outcomes"] if (c["step"], c["subject"], c["level"]) == (0, "Algebra", 1)
    )
    assert algebra_1 == {
        "step": 0,
        "subject": "Algebra",
        "level": 1,
        "rollouts": 2,
        "problems": 1,
        "mean_reward": 0.5,
        "pass_rate": 0.5,
    }
