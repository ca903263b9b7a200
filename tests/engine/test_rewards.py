"""The Engine's reward pipeline against real sandboxed reward modules: typed row statuses, the
fallback, process evidence from llm_judge, group credit and the advantage-sign guard."""

from __future__ import annotations

import textwrap

import pytest

from ade_core.engine.training.advantages import grpo_advantages
from ade_core.engine.training.rewards import RewardPipeline, Rollout, sign_guard_holds
from ade_core.harness.admission import sandbox_services
from ade_core.judging.process import process_judge, process_judge_service
from ade_core.plugins import load_plugins
from ade_core.schemas.config import JudgeConfig

QUESTION = "What is 2 + 3?"
RIGHT, WRONG = "<think>2 + 3 = 5</think> \\boxed{5}", "<think>2 + 3 = 6</think> \\boxed{6}"

ROW = """
def _result(outcome_score, score=None, projection=None):
    return {"schema_version": "ade.reward_result.v2", "score": outcome_score if score is None else score,
            "outcome_score": outcome_score, "artifact_projection": projection,
            "rule_evidence": {"status": "not_configured", "value": None}}


def compute_fallback_score(question_prompt, response_content, extracted_answer, outcome_score,
                           response_length_tokens, max_response_length_tokens):
    if "fallback breaks" in response_content:
        raise RuntimeError("no fallback today")
    return _result(outcome_score)
"""


def pipeline(body: str, **options) -> RewardPipeline:
    grader = load_plugins().graders()["boxed_exact"]
    interface = load_plugins().task("reward_design").interface()
    source = textwrap.dedent(ROW) + textwrap.dedent(body)
    return RewardPipeline(grader, 4, source, max_tokens=64, interface=interface, **options)


def score(pipe: RewardPipeline, responses: list[str]) -> list[Rollout]:
    prompts = [[{"role": "user", "content": QUESTION}] for _ in responses]
    pipe(prompts, responses, [[1] * 7 for _ in responses], answer=["5"] * len(responses), problem_id=["p"] * 4)
    return pipe.last_batch


def test_every_row_failure_is_a_typed_status_scored_by_the_fallback():
    body = """
    async def compute_score(question_prompt, response_content, extracted_answer, outcome_score,
                            response_length_tokens, max_response_length_tokens):
        if "raise" in response_content:
            raise ValueError("boom")
        if "invalid" in response_content:
            return _result(outcome_score, score=1.5)
        return _result(outcome_score, score=0.5 * outcome_score + 0.25)
    """
    pipe = pipeline(body)
    try:
        rows = score(pipe, [RIGHT, WRONG + " raise", RIGHT + " invalid", WRONG + " raise fallback breaks"])
        assert [r.reward_status for r in rows] == ["ok", "reward_exception", "reward_invalid", "fallback_failed"]
        assert [r.score for r in rows] == [0.75, 0.0, 1.0, 0.0]  # the reward, then outcomes (fallback or not)
        assert pipe.statuses == {"reward_exception": 2, "reward_invalid": 1, "fallback_failed": 1}
    finally:
        pipe.close()


def test_process_evidence_comes_from_llm_judge_and_unavailable_evidence_uses_the_fallback():
    body = """
    async def compute_score(question_prompt, response_content, extracted_answer, outcome_score,
                            response_length_tokens, max_response_length_tokens):
        evidence = await llm_judge(question_prompt, response_content)
        quality = 0.5 if evidence["status"] != "available" else sum(evidence["dimensions"].values()) / 3
        return _result(outcome_score, score=0.8 * outcome_score + 0.2 * quality, projection=quality)
    """
    answers = iter(
        [
            {
                "status": "available",
                "schema_version": "ade.process_evidence.v1",
                "dimensions": {"conclusion_support": 1.0, "derivation_soundness": 1.0, "substantive_relevance": 0.5},
            },
            {
                "status": "unavailable",
                "schema_version": "ade.process_evidence.v1",
                "dimensions": None,
                "reason": "judge down",
            },
        ]
        * 2
    )
    service = process_judge_service(JudgeConfig(enabled=True), max_calls=16, handler=lambda request: next(answers))
    pipe = pipeline(body, services=sandbox_services([service]))
    try:
        rows = score(pipe, [RIGHT, RIGHT, WRONG, WRONG])
        assert [r.reward_status for r in rows] == ["ok", "process_unavailable", "ok", "process_unavailable"]
        assert rows[0].score == pytest.approx(0.8 + 0.2 * 2.5 / 3) and rows[0].projection == pytest.approx(2.5 / 3)
        assert rows[1].score == 1.0 and rows[1].projection is None  # the fallback: the outcome
        assert rows[0].process["dimensions"]["substantive_relevance"] == 0.5
        assert rows[1].process == {
            "status": "unavailable",
            "schema_version": "ade.process_evidence.v1",
            "dimensions": None,
            "reason": "judge down",
        }
    finally:
        pipe.close()


GROUP = """
async def compute_score(question_prompt, response_content, extracted_answer, outcome_score,
                        response_length_tokens, max_response_length_tokens):
    return _result(outcome_score)


def assign_group_credit(group_input):
    records = group_input["records"]
    flip = group_input["group_type"] == "mixed" and "{flip}" == "yes"
    seen = sorted({{r["evidence"]["process"]["status"] for r in records}})
    return {{"schema_version": "ade.group_credit_output.v2",
            "decision": {{"mode": "shaped", "evidence_sources": ["outcome"], "process_dimensions": [],
                         "reason_code": "seen_" + "_".join(seen)}},
            "assignments": [{{"record_id": r["record_id"],
                             "training_reward": (1 - r["outcome_score"]) if flip else 0.5 * r["outcome_score"] + 0.1}}
                            for r in records]}}
"""


def test_group_credit_that_breaks_the_sign_guard_trains_on_outcomes_and_is_counted():
    pipe = pipeline(GROUP.format(flip="yes"))
    try:
        score(pipe, [RIGHT, WRONG, WRONG, RIGHT])
        assert pipe.training_rewards() == [1.0, 0.0, 0.0, 1.0]
        assert pipe.guard_violations == 1 and {r.credit_mode for r in pipe.last_batch} == {"sign_guard_outcome"}
    finally:
        pipe.close()
    pipe = pipeline(GROUP.format(flip="no"))
    try:
        score(pipe, [RIGHT, WRONG, WRONG, RIGHT])
        assert pipe.training_rewards() == [0.6, 0.1, 0.1, 0.6] and pipe.guard_violations == 0
    finally:
        pipe.close()


def test_with_group_credit_the_engine_gathers_process_evidence_for_every_rollout():
    judge = process_judge(JudgeConfig(enabled=True, error_rate=0))
    pipe = pipeline(GROUP.format(flip="no"), process_judge=judge)
    try:
        rows = score(pipe, [RIGHT, WRONG, WRONG, RIGHT])
        assert all(r.process["schema_version"] == "ade.process_evidence.v1" for r in rows)
        assert all(r.process["status"] in ("available", "unavailable") for r in rows)
        assert len(judge.judge.calls) == 1 and judge.judge.calls[0].requests == 4  # one batch
        pipe.training_rewards()
    finally:
        pipe.close()


def test_a_row_reward_that_shapes_under_group_credit_is_invalid():
    body = GROUP.format(flip="no").replace("return _result(outcome_score)", "return _result(outcome_score, 0.5)", 1)
    pipe = pipeline(body)
    try:
        rows = score(pipe, [RIGHT, WRONG, WRONG, RIGHT])
        assert {r.reward_status for r in rows} == {"reward_invalid"} and [r.score for r in rows] == [1, 0, 0, 1]
    finally:
        pipe.close()


def test_the_sign_guard():
    group = [Rollout(0, "p", 0, "", 1, o, o) for o in (1.0, 0.0, 0.0)]
    assert sign_guard_holds(group, grpo_advantages([1.0, 0.0, 0.0], 3))
    assert not sign_guard_holds(group, grpo_advantages([0.0, 1.0, 0.0], 3))
    assert not sign_guard_holds(group, [0.0, 0.0, 0.0])  # a correct response needs a positive advantage
    assert sign_guard_holds(group[1:], [1.0, -1.0])  # all wrong: no guard


def test_step_diagnostics_and_the_reward_outcome_divergence_flag():
    from ade_core.engine.training.diagnostics import divergence, step_diagnostics

    rollouts = []
    for step in range(4):
        # the reward rises step by step while the verified outcome falls: a gamed reward
        for index in range(4):
            outcome = 1.0 if index < 3 - step else 0.0
            rollout = Rollout(step, "p", 0, "r", 10 + step, outcome, outcome)
            rollout.reward = min(1.0, 0.25 * step + (0.5 if index % 2 else 0.0))
            rollout.advantage = 1.0 if index % 2 else -1.0
            rollouts.append(rollout)
    log = [{"step": s + 1, "kl": 0.01 * s, "entropy": 0.5, "clip_ratio/region_mean": 0.0} for s in range(4)]
    rows = step_diagnostics(rollouts, 4, log)
    assert [r["outcome_mean"] for r in rows] == [0.75, 0.5, 0.25, 0.0]
    assert rows[0]["zero_variance_share"] == 0.0 and rows[0]["advantage_std"] == 1.0
    assert rows[3]["kl"] == pytest.approx(0.03) and rows[0]["response_length_mean"] == 10
    flag = divergence(rows)
    assert flag["assessed"] and flag["flagged"] and flag["reward_change"] > 0 > flag["outcome_change"]
    honest = [{**r, "reward_mean": r["outcome_mean"]} for r in rows]
    assert not divergence(honest)["flagged"] and not divergence(rows[:3])["assessed"]
