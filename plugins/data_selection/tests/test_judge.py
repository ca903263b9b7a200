"""The Judge service of Data Selection over the judge core: malformed requests fail the strategy,
rule-based scores on the tiny world's defects, emulated judge errors, unavailable answers, the
disabled and openai settings, and that it reads no file."""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

import pytest

from ade_core import InvalidServiceRequest
from ade_core.config import load_config
from ade_core.plugins import load_plugins
from ade_core.schemas.config import JudgeConfig
from ade_core.tiny.candidates import math_trajectory
from ade_core.tiny.problems import generate_problems
from ade_task_data_selection.judge import DISABLED_REASON, OfflineJudge, judge_service

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "tiny-data-selection.toml"
LEVELS = (0.0, 0.5, 1.0)
RUBRIC = {
    "dimensions": [
        {
            "name": "repetition",
            "criterion": "no step repeats literally in the think span",
            "levels": LEVELS,
            "weight": 0.25,
        },
        {
            "name": "format",
            "criterion": "one closed think span, then a boxed final answer",
            "levels": LEVELS,
            "weight": 0.25,
        },
        {
            "name": "completeness",
            "criterion": "the think span closes before the answer",
            "levels": LEVELS,
            "weight": 0.25,
        },
        {
            "name": "correctness",
            "criterion": "the boxed answer solves the question",
            "levels": (0.0, 1.0),
            "weight": 0.25,
        },
    ]
}


def _requests(problems, defect, rubric=RUBRIC, seed=0):
    rng = random.Random(seed)
    return [
        {"question": p.problem, "response": math_trajectory(p, defect, rng, cap_chars=200), "rubric": rubric}
        for p in problems
    ]


def _rubric(**changes):
    dimension = {"name": "correctness", "criterion": "the boxed answer is right", "levels": [0, 1], "weight": 1.0}
    return {"dimensions": [{**dimension, **changes}]}


@pytest.fixture(scope="module")
def config():
    return load_config(EXAMPLE).experiment


@pytest.fixture(scope="module")
def judged():
    return load_config(EXAMPLE, ["judge.enabled=true"]).experiment


@pytest.fixture(scope="module")
def problems():
    return generate_problems(200, seed=11)


# ---- malformed requests: the strategy's error ---------------------------------------------------

CAUGHT = """
async def select_trajectories(candidate_inventory, select_size, judge):
    try:
        await judge(REQUESTS)
    except ServiceError:
        pass  # the strategy swallows the refusal; the Harness still sees it in the service ledger
    return []
"""
UNCAUGHT = """
async def select_trajectories(candidate_inventory, select_size, judge):
    await judge(REQUESTS)
    return []
"""
GOOD = {"question": "What is 1 + 2?", "response": "<think>1+2=3</think>\\boxed{3}"}


@pytest.mark.parametrize(
    ("requests", "field"),
    [
        ([{**GOOD, "rubric": _rubric(levels=[1])}], "requests[0].rubric.dimensions[0].levels"),
        ([{"question": "What is 1 + 2?", "rubric": RUBRIC}], "requests[0].response"),
        (["What is 1 + 2?"], "requests[0]"),
        ({**GOOD, "rubric": RUBRIC}, "requests"),
        ([{**GOOD, "rubric": RUBRIC}, {**GOOD, "rubric": "{not json"}], "requests[1].rubric"),
    ],
    ids=["bad_level", "missing_response", "not_an_object", "not_a_list", "rubric_not_json"],
)
@pytest.mark.parametrize("source", [CAUGHT, UNCAUGHT], ids=["caught", "uncaught"])
def test_a_malformed_request_fails_the_strategy_naming_the_field(judged, requests, field, source):
    from ade_core.harness.admission import admit

    strategy = f"REQUESTS = {requests!r}\n" + source
    result = admit(strategy, load_plugins().task("data_selection"), judged)
    assert not result.admitted
    sandbox = next(c for c in result.checks if c.name == "sandbox_run")
    assert sandbox.status == "failed"
    assert sandbox.reason.startswith(f"select_trajectories: judge: invalid_service_request: {field}: "), sandbox.reason
    (call,) = result.calls[0].service_calls
    assert not call["ok"] and call["error"].startswith("invalid_service_request: ")


def test_a_malformed_request_is_refused_not_unavailable_and_not_zero():
    judge = OfflineJudge(error_rate=0, seed=0)
    with pytest.raises(InvalidServiceRequest, match=r"^invalid_service_request: requests\[0\]\.response: "):
        judge([{"question": "What is 1 + 2?", "rubric": RUBRIC}])


# ---- scores on the tiny world's defects ---------------------------------------------------------


def test_clean_trajectory_scores_high(problems):
    results = OfflineJudge(error_rate=0, seed=0)(_requests(problems[:50], None))
    for result in results:
        assert result["status"] == "completed" and result["fallback"] is False
        assert result["projected_score"] >= 0.875, result
        assert result["scores_by_dimension"]["correctness"] == 1.0
        assert result["scores_by_dimension"]["format"] == 1.0
        assert result["scores_by_dimension"]["completeness"] == 1.0


@pytest.mark.parametrize(
    ("defect", "dimension"),
    [("repetition_loop", "repetition"), ("truncated", "completeness"), ("wrong_answer", "correctness")],
)
def test_defect_scores_low_on_its_dimension(problems, defect, dimension):
    judge = OfflineJudge(error_rate=0, seed=0)
    clean = judge(_requests(problems[:50], None))
    flawed = judge(_requests(problems[:50], defect))
    assert all(r["scores_by_dimension"][dimension] == 0.0 for r in flawed)
    assert all(f["projected_score"] < c["projected_score"] for f, c in zip(flawed, clean, strict=True))


def test_truncated_and_unboxed_responses_fail_format(problems):
    judge = OfflineJudge(error_rate=0, seed=0)
    assert all(r["scores_by_dimension"]["format"] == 0.0 for r in judge(_requests(problems[:20], "truncated")))
    assert all(r["scores_by_dimension"]["format"] == 0.5 for r in judge(_requests(problems[:20], "missing_box")))


def _correct_verdicts(results):
    return [r["scores_by_dimension"]["correctness"] == 1.0 for r in results]


def _mixed(problems):
    """Half clean, half wrong-answer trajectories, and the truth of each."""
    requests = _requests(problems[::2], None) + _requests(problems[1::2], "wrong_answer")
    return requests, [True] * len(problems[::2]) + [False] * len(problems[1::2])


def test_error_free_judge_agrees_with_truth(problems):
    requests, truth = _mixed(problems)
    assert _correct_verdicts(OfflineJudge(error_rate=0, seed=0)(requests)) == truth


def test_judge_errors_flip_about_error_rate_deterministically(problems):
    requests, truth = _mixed(problems)
    judge = OfflineJudge(error_rate=0.3, seed=7)
    first = judge(requests)
    flipped = sum(v != t for v, t in zip(_correct_verdicts(first), truth, strict=True)) / len(truth)
    assert 0.2 <= flipped <= 0.4
    assert judge(requests) == first
    # a verdict depends on the request, not on its position in the call
    assert OfflineJudge(error_rate=0.3, seed=7)(requests[::-1]) == first[::-1]
    assert OfflineJudge(error_rate=0.3, seed=8)(requests) != first


# ---- fallbacks ----------------------------------------------------------------------------------


def test_unknown_dimension_is_unavailable_not_a_middle_score(problems):
    rubric = {
        "dimensions": [
            {"name": "politeness", "criterion": "the tone is courteous", "levels": LEVELS, "weight": 0.5},
            {"name": "correctness", "criterion": "the boxed answer is right", "levels": (0.0, 1.0), "weight": 0.5},
        ]
    }
    (result,) = OfflineJudge(error_rate=0, seed=0)(_requests(problems[:1], None, rubric))
    assert result["status"] == "unavailable" and result["fallback"] and "'politeness'" in result["reason"]
    assert "projected_score" not in result


def test_unsolvable_question_is_unavailable():
    request = {"question": "Spell the word apple backwards.", "response": "<think>x</think>elppa", "rubric": RUBRIC}
    (result,) = OfflineJudge(error_rate=0, seed=0)([request])
    assert result["status"] == "unavailable" and "cannot re-derive" in result["fallback_reason"]
    format_only = {**request, "rubric": _rubric(name="format", criterion="one closed think span, then an answer")}
    assert OfflineJudge(error_rate=0, seed=0)([format_only])[0]["scores_by_dimension"] == {"format": 1.0}


# ---- the service --------------------------------------------------------------------------------


def test_disabled_judge_answers_unavailable(config, problems):
    service = judge_service(config.model_copy(update={"judge": JudgeConfig(enabled=False)}))
    assert service.name == "judge" and not service.essential
    unavailable = {
        "status": "unavailable",
        "reason": DISABLED_REASON,
        "fallback": True,
        "fallback_reason": DISABLED_REASON,
    }
    assert service.handler(_requests(problems[:3], None)) == [unavailable] * 3


def test_enabled_offline_service_through_the_plugin(config, problems):
    settings = JudgeConfig(enabled=True, error_rate=0, max_calls=3, max_items_per_call=9)
    enabled = config.model_copy(update={"judge": settings})
    (service,) = load_plugins().task("data_selection").services(enabled)
    assert (service.name, service.essential, service.max_calls, service.max_items_per_call) == ("judge", True, 3, 9)
    (result,) = service.handler(_requests(problems[:1], None))
    assert result["status"] == "completed" and result["projected_score"] == 1.0


def test_openai_provider_is_configurable(config):
    settings = JudgeConfig(enabled=True, provider="openai", model="judge-model", temperature=0.0, attempts=2)
    service = judge_service(config.model_copy(update={"judge": settings}))
    provider = service.handler.provider
    assert (provider.name, provider.model, provider.temperature, provider.attempts) == ("openai", "judge-model", 0, 2)


# ---- the judge reads no file --------------------------------------------------------------------

CANARY = "CANARY-7f3e9a1c-world-label"
_AUDIT = {"recording": False, "events": []}


def _audit(event: str, args: tuple) -> None:
    if _AUDIT["recording"] and event in ("open", "os.listdir", "os.scandir"):
        _AUDIT["events"].append((event, args[0] if args else None))


def test_judge_reads_no_world_file(tmp_path, monkeypatch, problems):
    world = tmp_path / "world"
    (world / "ground_truth").mkdir(parents=True)
    (world / "data").mkdir()
    labels = [
        {"candidate_id": f"m{i:05d}", "defect": None, "answer": p.answer, "canary": CANARY}
        for i, p in enumerate(problems)
    ]
    (world / "ground_truth" / "defects.jsonl").write_text("\n".join(json.dumps(row) for row in labels))
    for name in ("candidates", "in_loop", "held_out"):
        (world / "data" / f"{name}.jsonl").write_text(json.dumps({"problem": CANARY, "answer": CANARY}) + "\n")
    monkeypatch.chdir(world)
    requests = _requests(problems[:25], None) + _requests(problems[25:50], "wrong_answer")
    judge = judge_service(load_config(EXAMPLE, ["judge.enabled=true", "judge.error_rate=0.2"]).experiment).handler
    if not _AUDIT.get("installed"):  # audit hooks cannot be removed: install once, gate by the flag
        sys.addaudithook(_audit)
        _AUDIT["installed"] = True
    _AUDIT["events"].clear()
    _AUDIT["recording"] = True
    try:
        results = judge(requests)
    finally:
        _AUDIT["recording"] = False
    assert _AUDIT["events"] == []
    assert len(results) == 50 and all(r["status"] == "completed" for r in results)
    assert CANARY not in json.dumps(results)


TWO_ARGUMENTS = """
async def select_trajectories(candidate_inventory, select_size, judge):
    try:
        await judge([], "second")
    except ServiceError:
        pass  # swallowed; the Harness still sees the malformed call
    return []
"""


def test_a_judge_call_with_two_arguments_fails_the_strategy_even_when_caught(judged):
    from ade_core.harness.admission import admit

    result = admit(TWO_ARGUMENTS, load_plugins().task("data_selection"), judged)
    sandbox = next(c for c in result.checks if c.name == "sandbox_run")
    assert not result.admitted and sandbox.status == "failed"
    assert "judge: invalid_service_request: arguments: 'judge' takes exactly one positional argument" in sandbox.reason
