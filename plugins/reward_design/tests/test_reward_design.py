"""Reward Design: conformance, the paper's row and group contracts, typed rejections."""

from __future__ import annotations

from pathlib import Path

import pytest

from ade_core.harness.static_policy import check_strategy_source
from ade_core.plugins import load_plugins
from ade_core.testing import TaskConformance, run_strategy_calls

STRATEGIES = Path(__file__).parent / "strategies"


class TestConformance(TaskConformance):
    task = "reward_design"


@pytest.fixture
def task():
    return load_plugins().task("reward_design")


@pytest.mark.parametrize("name", ["paper_reward.py", "judged_reward.py"])
def test_a_reward_written_from_the_paper_contract_runs_on_the_development_inputs(task, name):
    source = (STRATEGIES / name).read_text()
    interface = task.interface()
    assert check_strategy_source(source, interface) == []
    inputs = task.builder_dev_inputs(None)
    results = run_strategy_calls(source, interface, inputs)
    for call, result in zip(inputs.calls, results, strict=True):
        assert result["ok"], (call.entry_point, result)
        if result.get("skipped"):
            assert call.entry_point == "assign_group_credit" and name == "judged_reward.py"
            continue
        verdict = task.validate_output(call.entry_point, result["value"], call.arguments)
        assert verdict.ok, (call.entry_point, verdict.errors)


def test_the_entry_points_have_the_paper_signatures(task):
    interface = task.interface()
    row = (
        "question_prompt",
        "response_content",
        "extracted_answer",
        "outcome_score",
        "response_length_tokens",
        "max_response_length_tokens",
    )
    score, fallback, credit = (
        interface.entry_point(n) for n in ("compute_score", "compute_fallback_score", "assign_group_credit")
    )
    assert score.is_async and not fallback.is_async and not credit.is_async and not credit.required
    assert tuple(p.name for p in score.parameters) == row == tuple(p.name for p in fallback.parameters)
    assert [p.name for p in credit.parameters] == ["group_input"]
    assert interface.signature("llm_judge") == ("question_prompt", "response_content")  # a global, not a parameter
    sync_score = (STRATEGIES / "paper_reward.py").read_text().replace("async def compute_score", "def compute_score")
    assert [v.code for v in check_strategy_source(sync_score, interface)] == ["entry_point_kind"]


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
        "rule_evidence": {"status": "not_configured", "value": None},
    }
    return {**base, **changes}


def errors(task, entry, output, arguments):
    verdict = task.validate_output(entry, output, arguments)
    assert not verdict.ok
    return " | ".join(verdict.errors)


def test_row_rejections_name_the_field(task):
    assert task.validate_output("compute_score", result(), row()).ok
    assert "score: 1.5 is greater than the maximum of 1" in errors(task, "compute_score", result(score=1.5), row())
    assert "score: True is not of type 'number'" in errors(task, "compute_score", result(score=True), row())
    assert "score: must be a finite number" in errors(task, "compute_score", result(score=float("nan")), row())
    assert "outcome_score must be returned unchanged (1.0), got 0.0" in errors(
        task, "compute_score", result(outcome_score=0.0), row()
    )
    assert "schema_version: 'ade.reward_result.v2' was expected" in errors(
        task, "compute_score", result(schema_version="v1"), row()
    )
    assert "'bonus' was unexpected" in errors(task, "compute_score", {**result(), "bonus": 1}, row())
    assert "rule_evidence" in errors(task, "compute_score", result(rule_evidence=[]), row())
    assert task.validate_output("compute_score", result(artifact_projection=0.5, score=0.9), row()).ok
    assert task.validate_output("compute_score", result(rule_evidence={"status": "available", "value": 0.25}), row()).ok
    # the fallback pays the outcome, with no projection
    assert "compute_fallback_score must return artifact_projection = null and score = outcome_score" in errors(
        task, "compute_fallback_score", result(score=0.9), row()
    )
    assert task.validate_output("compute_fallback_score", result(), row()).ok


def group(kind="mixed", outcomes=(1.0, 0.0)):
    from ade_core import group_input

    rows = [
        {"outcome_score": o, "pre_group_reward": o, "process": None, "rule_evidence": None, "response_length_tokens": 5}
        for o in outcomes
    ]
    built = group_input(rows, 8)
    assert built["group_type"] == kind
    return {"group_input": built}


def credit(mode="shaped", rewards=((1, 0.25), (0, 0.75)), sources=("outcome",), dims=(), reason="centred"):
    return {
        "schema_version": "ade.group_credit_output.v2",
        "decision": {
            "mode": mode,
            "evidence_sources": list(sources),
            "process_dimensions": list(dims),
            "reason_code": reason,
        },
        "assignments": [{"record_id": r, "training_reward": v} for r, v in rewards],
    }


def test_group_credit_rejections_name_the_rule(task):
    verdict = task.validate_output("assign_group_credit", credit(), group())
    assert verdict.ok and [a["record_id"] for a in verdict.canonical["assignments"]] == [0, 1]  # any order in
    assert "cover record_id [0, 1] exactly once, got [0]" in errors(
        task, "assign_group_credit", credit(rewards=((0, 1.0),)), group()
    )
    assert "'maybe' is not one of" in errors(task, "assign_group_credit", credit(mode="maybe"), group())
    assert "must assign each record its outcome_score; records [0, 1] differ" in errors(
        task, "assign_group_credit", credit(mode="identity"), group()
    )
    assert task.validate_output(
        "assign_group_credit", credit(mode="abstained", rewards=((0, 1.0), (1, 0.0))), group()
    ).ok
    assert "evidence_sources must be sorted" in errors(
        task, "assign_group_credit", credit(sources=("process", "outcome"), dims=("derivation_soundness",)), group()
    )
    assert "non-empty exactly when 'process'" in errors(
        task, "assign_group_credit", credit(sources=("outcome", "process")), group()
    )
    assert "reason_code" in errors(task, "assign_group_credit", credit(reason="Not Snake"), group())
    assert "record_id: '0' is not of type 'integer'" in errors(
        task, "assign_group_credit", credit(rewards=(("0", 1.0), (1, 0.0))), group()
    )
    assert "training_reward: True is not of type 'number'" in errors(
        task, "assign_group_credit", credit(rewards=((0, True), (1, 0.0))), group()
    )


def test_bind_carries_the_module_source(task):
    reference = task.reference_strategy().source
    intervention = task.bind([], reference, None)
    assert intervention.kind == "reward_module" and intervention.payload["source"] == reference


def _config(*overrides):
    from ade_core import load_config

    return load_config(STRATEGIES.parents[3] / "examples" / "tiny-reward-design.toml", overrides).experiment


def test_llm_judge_is_the_judge_core_with_the_process_rubric(task):
    import random

    from ade_core.tiny.candidates import math_trajectory
    from ade_core.tiny.problems import generate_problems

    (service,) = task.services(_config("judge.enabled=true", "judge.error_rate=0"))
    assert service.name == "llm_judge" and service.signature == ("question_prompt", "response_content")
    assert service.essential and service.max_calls >= 4096
    problem = generate_problems(1, seed=3)[0]
    clean, corrupted = (math_trajectory(problem, d, random.Random(0), cap_chars=400) for d in (None, "wrong_step"))
    good = service.handler({"question_prompt": problem.problem, "response_content": clean})
    bad = service.handler({"question_prompt": problem.problem, "response_content": corrupted})
    assert good == {
        "status": "available",
        "schema_version": "ade.process_evidence.v1",
        "dimensions": {"conclusion_support": 1.0, "derivation_soundness": 1.0, "substantive_relevance": 1.0},
    }
    assert bad["status"] == "available" and bad["dimensions"]["derivation_soundness"] < 1.0
    assert service.handler.judge.calls[-1].provider == "offline"  # the one judge core, its call record
    unreadable = service.handler({"question_prompt": "Name a colour.", "response_content": "blue"})
    assert unreadable["status"] == "unavailable" and unreadable["dimensions"] is None and unreadable["reason"]
    (off,) = task.services(_config("judge.enabled=false"))
    assert off.handler({"question_prompt": "q", "response_content": "r"})["reason"].startswith("judge enrichment is")


def test_a_reward_that_misuses_llm_judge_fails_admission_even_when_it_catches_the_error(task):
    from ade_core.harness.admission import admit

    source = (STRATEGIES / "judged_reward.py").read_text()
    admitted = admit(source, task, _config("judge.enabled=true"))
    assert admitted.admitted, [(c.name, c.reason) for c in admitted.checks if c.status == "failed"]
    misuse = source.replace(
        "    evidence = await llm_judge(question_prompt, response_content)\n",
        "    try:\n        await llm_judge(question_prompt)\n    except ServiceError:\n        pass\n"
        "    evidence = {'status': 'unavailable'}\n",
    )
    assert misuse != source
    refused = admit(misuse, task, _config("judge.enabled=true"))
    failed = {c.name: c.reason for c in refused.checks if c.status == "failed"}
    assert list(failed) == ["sandbox_run"]
    assert (
        "invalid_service_request: arguments: 'llm_judge' takes exactly (question_prompt, response_content)"
        in (failed["sandbox_run"])
    )
