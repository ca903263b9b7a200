"""Reward Design: conformance, the documented row and group interfaces, typed rejections."""

from __future__ import annotations

import pytest

from ade_core.harness.static_policy import check_strategy_source
from ade_core.plugins import load_plugins
from ade_core.testing import TaskConformance, run_strategy_calls


class TestConformance(TaskConformance):
    task = "reward_design"

    # The kit fails a task lacking a required hook; this one has no frozen inputs yet, so no Run of it
    # can start (`ade run` refuses it with a MissingHookError). Strict: the mark must go once it has them.
    @pytest.mark.xfail(strict=True, reason="reward_design does not implement ade_task_inputs yet")
    def test_required_hooks_implemented(self, handle):
        super().test_required_hooks_implemented(handle)


@pytest.fixture
def task():
    return load_plugins().task("reward_design")


SHAPED = """
import math
import re

_BOX = re.compile(r"\\\\boxed\\{")


def compute_score(question_prompt, response_content, extracted_answer, outcome_score,
                  response_length_tokens, max_response_length_tokens):
    boxed = bool(_BOX.search(response_content))
    length_penalty = 0.1 * min(1.0, response_length_tokens / max_response_length_tokens)
    score = max(0.0, min(1.0, outcome_score - length_penalty + (0.05 if boxed else 0.0)))
    return {
        "schema_version": "ade.reward_result.v2",
        "score": score,
        "outcome_score": outcome_score,
        "artifact_projection": None,
        "rule_evidence": [{"rule": "boxed", "fired": boxed}],
    }
"""


def test_row_level_only_strategy_is_admissible(task):
    interface = task.interface()
    assert check_strategy_source(SHAPED, interface) == []  # assign_group_credit is optional
    inputs = task.builder_dev_inputs(None)
    row_calls = type(inputs)(calls=tuple(c for c in inputs.calls if c.entry_point == "compute_score"))
    for call, result in zip(row_calls.calls, run_strategy_calls(SHAPED, interface, row_calls), strict=True):
        verdict = task.validate_output("compute_score", result["value"], call.arguments)
        assert verdict.ok, verdict.errors


def row(outcome=1.0):
    return {
        "question_prompt": "q",
        "response_content": "r",
        "extracted_answer": "1",
        "outcome_score": outcome,
        "response_length_tokens": 3,
        "max_response_length_tokens": 8,
    }


def result(**changes):
    base = {
        "schema_version": "ade.reward_result.v2",
        "score": 1.0,
        "outcome_score": 1.0,
        "artifact_projection": None,
        "rule_evidence": [],
    }
    return {**base, **changes}


def test_row_rejections(task):
    assert task.validate_output("compute_score", result(score=1.5), row()).errors == (
        "score must be a finite number in [0, 1], got 1.5",
    )
    assert task.validate_output("compute_score", result(score=float("nan")), row()).errors[0].startswith("score must")
    assert task.validate_output("compute_score", result(outcome_score=0.0), row()).errors == (
        "outcome_score must be returned unchanged (1.0), got 0.0",
    )
    assert (
        "schema_version must be 'ade.reward_result.v2'"
        in task.validate_output("compute_score", result(schema_version="v1"), row()).errors[0]
    )
    extra = task.validate_output("compute_score", {**result(), "bonus": 1}, row())
    assert "extra ['bonus']" in extra.errors[0]


def test_group_rejections(task):
    group = {
        "schema_version": "ade.group_credit_input.v3",
        "group_type": "mixed",
        "records": [{"record_id": "a", "outcome_score": 1.0}, {"record_id": "b", "outcome_score": 0.0}],
    }
    ok = {
        "schema_version": "ade.group_credit_output.v2",
        "decision": "shaped",
        "signals": ["outcome"],
        "reason": "",
        "rewards": [{"record_id": "b", "reward": 0.25}, {"record_id": "a", "reward": 0.75}],
    }
    verdict = task.validate_output("assign_group_credit", ok, {"group_input": group})
    assert verdict.ok and [r["record_id"] for r in verdict.canonical["rewards"]] == ["a", "b"]
    missing = {**ok, "rewards": [{"record_id": "a", "reward": 0.75}]}
    assert (
        "cover records ['a', 'b'] exactly once"
        in task.validate_output("assign_group_credit", missing, {"group_input": group}).errors[0]
    )
    assert (
        "decision must be one of"
        in task.validate_output("assign_group_credit", {**ok, "decision": "maybe"}, {"group_input": group}).errors[0]
    )


def test_bind_carries_the_module_source(task):
    reference = task.reference_strategy().source
    intervention = task.bind([], reference, None)
    assert intervention.kind == "reward_module" and intervention.payload["source"] == reference
