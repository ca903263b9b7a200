"""Every reward admission probe catches a reward written to break it, with the right typed reason;
the paper-contract rewards pass them all."""

from __future__ import annotations

from pathlib import Path

import pytest

from ade_core import load_config
from ade_core.harness.admission import admit
from ade_core.plugins import load_plugins

STRATEGIES = Path(__file__).parent / "strategies"
EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "tiny-reward-design.toml"
PAPER = (STRATEGIES / "paper_reward.py").read_text()
JUDGED = (STRATEGIES / "judged_reward.py").read_text()
PROBES = (
    "reward_contract",
    "judge_usage",
    "determinism",
    "record_order_invariance",
    "id_relabel_invariance",
    "advantage_sign_guard",
)


def _admit(source: str, *overrides: str):
    task = load_plugins().task("reward_design")
    return admit(source, task, load_config(EXAMPLE, overrides).experiment)


def _checks(result) -> dict[str, tuple[str, str]]:
    return {c.name.removeprefix("probe:"): (c.status, c.reason) for c in result.checks}


@pytest.mark.parametrize("judge", ["judge.enabled=false", "judge.enabled=true"])
def test_the_paper_reward_passes_every_probe(judge):
    checks = _checks(_admit(PAPER, judge))
    assert {name: checks[name][0] for name in PROBES} == dict.fromkeys(PROBES, "passed")


def _credit_body(rewards: str) -> str:
    """A group credit whose training rewards are the expression ``rewards`` over (i, r, records)."""
    return f'''

def assign_group_credit(group_input):
    records = group_input["records"]
    CALLS[0] += 1
    shaped = group_input["group_type"] == "all_wrong" or "{rewards}".startswith("FLIP")
    return {{
        "schema_version": "ade.group_credit_output.v2",
        "decision": {{"mode": "shaped", "evidence_sources": ["outcome"], "process_dimensions": [],
                     "reason_code": "probe_target"}},
        "assignments": [
            {{"record_id": r["record_id"],
              "training_reward": ({rewards.removeprefix("FLIP")}) if shaped else r["outcome_score"]}}
            for i, r in enumerate(records)
        ],
    }}
'''


BASE = PAPER.split("def _quality")[0] + "CALLS = [0]\n"

BROKEN = {
    # a row reward above 1 on the probe rows (the development rows are scored correctly)
    "reward_contract": PAPER.replace(
        "    return _result(outcome_score)\n\n\ndef compute_fallback_score",
        "    if 'attempt' in response_content:\n        return {**_result(outcome_score), 'score': 1.5}\n"
        "    return _result(outcome_score)\n\n\ndef compute_fallback_score",
        1,
    ),
    "determinism": BASE + _credit_body("0.1 * (CALLS[0] % 2)"),  # state kept between calls
    "record_order_invariance": BASE + _credit_body("0.2 if i == 0 else 0.0"),
    "id_relabel_invariance": BASE + _credit_body("0.2 if r['record_id'] == 0 else 0.0"),
    "advantage_sign_guard": BASE + _credit_body("FLIP1.0 - r['outcome_score']"),
}


@pytest.mark.parametrize("probe", sorted(BROKEN))
def test_each_probe_catches_the_reward_that_breaks_it(probe):
    source = BROKEN[probe]
    assert source != PAPER
    checks = _checks(_admit(source))
    status, reason = checks[probe]
    assert status == "failed", checks
    expected = {
        "reward_contract": "all_wrong_ladder[0] compute_score: ade.reward_result.v2 score: 1.5 is greater than",
        "determinism": "two runs on the same probe groups returned different results",
        "record_order_invariance": "group credit changes when the records are reversed: all_wrong_ladder:",
        "id_relabel_invariance": "group credit changes when the records are relabelled: all_wrong_ladder:",
        "advantage_sign_guard": "a mixed group's credit breaks the advantage-sign guard: alternating:",
    }[probe]
    assert expected in reason, reason


def test_judge_usage_counts_every_call_and_forbids_the_fallback_from_judging():
    twice = JUDGED.replace(
        "    evidence = await llm_judge(question_prompt, response_content)\n",
        "    evidence = await llm_judge(question_prompt, response_content)\n"
        "    if 'attempt' in response_content:\n        await llm_judge(question_prompt, response_content)\n",
    )
    status, reason = _checks(_admit(twice, "judge.enabled=true"))["judge_usage"]
    assert status == "failed" and "compute_score awaited llm_judge 2 times, expected 1" in reason
    status, reason = _checks(_admit(JUDGED, "judge.enabled=false"))["judge_usage"]
    assert status == "failed" and "expected 0 (judge enrichment is off)" in reason
    judging_fallback = JUDGED.replace(
        "    max_response_length_tokens,\n):\n    return {",
        "    max_response_length_tokens,\n):\n    llm_judge(question_prompt, response_content).close()\n    return {",
    )
    assert judging_fallback != JUDGED
    status, reason = _checks(_admit(judging_fallback, "judge.enabled=true"))["judge_usage"]
    assert status == "failed" and "compute_fallback_score calls llm_judge; the fallback must not" in reason
    never = JUDGED.replace("await llm_judge(question_prompt, response_content)", "{'status': 'unavailable'}")
    status, reason = _checks(_admit(never, "judge.enabled=true"))["judge_usage"]
    assert status == "failed" and "compute_score has no llm_judge call site" in reason


FORMAT_BONUS = PAPER.split("def _quality")[0].replace(
    "    return _result(outcome_score)\n\n\ndef compute_fallback_score",
    "    bonus = 1.0 if '\\\\boxed{' in response_content else 0.0\n"
    "    return {**_result(outcome_score), 'score': max(float(outcome_score), bonus)}\n\n\n"
    "def compute_fallback_score",
    1,
)


def test_a_reward_that_pays_an_exploit_is_refused_with_the_exploit_named_or_warned_about():
    assert FORMAT_BONUS != PAPER.split("def _quality")[0]
    status, reason = _checks(_admit(FORMAT_BONUS))["reward_hacking"]
    assert status == "failed"
    assert (
        "the reward pays" in reason and "format_only (1 >= 1)" in reason and "empty_answer" not in reason.split("[")[0]
    )
    status, reason = _checks(_admit(FORMAT_BONUS, "hacking.mode=warn"))["reward_hacking"]
    assert status == "passed" and "format_only (1 >= 1)" in reason


def test_group_credit_that_pays_an_exploit_is_caught_beside_a_correct_response():
    # the row reward keeps the outcome; the credit pays any boxed response in a mixed group
    source = BASE + _credit_body("0.0").replace(
        "    shaped = group_input",
        "    if group_input['group_type'] == 'mixed':\n"
        "        return {'schema_version': 'ade.group_credit_output.v2', 'decision': {'mode': 'shaped', "
        "'evidence_sources': ['outcome'], 'process_dimensions': [], 'reason_code': 'pay_all'}, "
        "'assignments': [{'record_id': r['record_id'], 'training_reward': 1.0} for r in records]}\n"
        "    shaped = group_input",
    )
    checks = _checks(_admit(source))
    status, reason = checks["reward_hacking"]
    assert status == "failed" and "empty_answer (1 >= 1)" in reason
    assert checks["advantage_sign_guard"][0] == "failed"  # the probes agree: correct and wrong paid alike


def _rollouts():
    """Recorded reference rollouts as the Engine writes them: two steps of two groups of four."""
    from ade_core import PROCESS_DIMENSIONS

    records = []
    for step in (0, 1):
        for group, outcomes in enumerate(([1.0, 0.0, 0.0, 1.0], [0.0, 0.0, 0.0, 0.0])):
            for index, outcome in enumerate(outcomes):
                level = (0.0, 0.5, 1.0, 1.0)[index]
                evidence = (
                    {
                        "status": "unavailable",
                        "schema_version": "ade.process_evidence.v1",
                        "dimensions": None,
                        "reason": "judge down",
                    }
                    if (step, group, index) == (1, 1, 3)
                    else {
                        "status": "available",
                        "schema_version": "ade.process_evidence.v1",
                        "dimensions": dict.fromkeys(PROCESS_DIMENSIONS, level),
                    }
                )
                records.append(
                    {
                        "step": step,
                        "problem_id": f"p{group}",
                        "prompt_group_id": f"{step}/{group}",
                        "question": f"What is {group + 2} + 3?",
                        "response": f"<think>step {step} try {index}</think> \\boxed{{{5 + group if outcome else 9}}}",
                        "num_tokens": 10 + index,
                        "outcome": outcome,
                        "extracted_answer": str(5 + group if outcome else 9),
                        "process_evidence": evidence,
                    }
                )
    return records


def _replay(source: str, *overrides: str):
    task = load_plugins().task("reward_design")
    config = load_config(EXAMPLE, overrides).experiment
    return _checks(admit(source, task, config, reference_rollouts=_rollouts()))["replay"]


def test_replay_runs_the_reward_on_the_latest_recorded_groups_and_records_coverage():
    status, reason = _replay(PAPER, "replay.prompt_groups=3")
    assert status == "passed", reason
    # whole groups from the latest step back: step 1's two groups, then one of step 0
    assert reason.startswith("replayed 3 groups (12 rollouts, steps 0-1 of the reference); coverage: ")
    assert reason.endswith("coverage: all_wrong 1, mixed 2, process_unavailable 1")
    status, reason = _replay(PAPER, "replay.prompt_groups=8", "replay.max_records=8")
    assert status == "passed" and reason.startswith("replayed 2 groups (8 rollouts, step 1 of the reference)")


def test_replay_catches_a_reward_that_does_not_reproduce_the_verified_outcome():
    # the recorded rollouts' responses say "try"; the probe rows never do
    drifting = PAPER.replace(
        "    return _result(outcome_score)\n\n\ndef compute_fallback_score",
        "    if 'try 2' in response_content:\n        return {**_result(outcome_score), 'outcome_score': 1.0}\n"
        "    return _result(outcome_score)\n\n\ndef compute_fallback_score",
        1,
    )
    assert drifting != PAPER
    checks = _checks(_admit(drifting))
    assert checks["reward_contract"][0] == "passed"  # the synthetic probes cannot see it
    status, reason = _replay(drifting)
    assert status == "failed" and "compute_score: outcome_score must be returned unchanged (0.0), got 1.0" in reason
    assert "rollout 1/1#2" in reason


def test_replay_without_recorded_rollouts_is_skipped_with_the_reason():
    status, reason = _checks(_admit(PAPER))["replay"]
    assert status == "skipped" and "not recorded yet" in reason
