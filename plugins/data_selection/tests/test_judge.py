"""The Judge service: rubric validation, rule-based scores on the tiny world's defects, emulated
judge errors, fallbacks, the disabled and openai settings, and that it reads no file."""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from ade_core import ConfigError
from ade_core.config import load_config
from ade_core.plugins import load_plugins
from ade_core.schemas.config import JudgeConfig
from ade_core.tiny.candidates import math_trajectory
from ade_core.tiny.problems import generate_problems
from ade_task_data_selection.judge import DISABLED_REASON, OfflineJudge, Rubric, judge_service

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
def problems():
    return generate_problems(200, seed=11)


# ---- rubric validation --------------------------------------------------------------------------


def test_weights_must_sum_to_one():
    rubric = {"dimensions": [{**RUBRIC["dimensions"][0], "weight": 0.5}, {**RUBRIC["dimensions"][1], "weight": 0.3}]}
    with pytest.raises(ValidationError, match=r"weights must sum to 1 \(got 0\.8 from .*'repetition': 0\.5.*divide"):
        Rubric.model_validate(rubric)


def test_level_outside_unit_interval():
    with pytest.raises(
        ValidationError, match=r"levels must lie in \[0, 1\] \(got \[2\.0\] in \[0\.0, 2\.0\]\); rescale"
    ):
        Rubric.model_validate(_rubric(levels=[0, 2]))


def test_single_level():
    with pytest.raises(ValidationError, match=r"at least two distinct values .*\(got \[1\.0\]\); add a lower"):
        Rubric.model_validate(_rubric(levels=[1]))


def test_unsorted_levels_and_bad_weight():
    with pytest.raises(ValidationError, match=r"sorted ascending \(got \[1\.0, 0\.0\]\); write them as \[0\.0, 1\.0\]"):
        Rubric.model_validate(_rubric(levels=[1, 0]))
    with pytest.raises(ValidationError, match=r"weight must be > 0 \(got -1\.0\)"):
        Rubric.model_validate(_rubric(weight=-1))


def test_a_malformed_request_is_invalid_not_unavailable_and_not_zero():
    judge = OfflineJudge(error_rate=0, seed=0)
    bad_rubric, missing, not_object = judge(
        [
            {"question": "What is 1 + 2?", "response": "<think>1+2=3</think>\\boxed{3}", "rubric": _rubric(levels=[1])},
            {"question": "What is 1 + 2?", "rubric": RUBRIC},
            "What is 1 + 2?",
        ]
    )
    assert bad_rubric["status"] == "invalid" and "projected_score" not in bad_rubric
    assert "rubric.dimensions.0.levels" in bad_rubric["reason"] and "add a lower" in bad_rubric["reason"]
    assert missing == {
        "status": "invalid",
        "reason": "invalid judge request: response: required field is missing; add it",
    }
    assert not_object["status"] == "invalid" and "(got str)" in not_object["reason"]


# ---- scores on the tiny world's defects ---------------------------------------------------------


def test_clean_trajectory_scores_high(problems):
    results = OfflineJudge(error_rate=0, seed=0)(_requests(problems[:50], None))
    for result in results:
        assert result["status"] == "completed" and not result["fallback"] and result["fallback_reason"] == ""
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


def test_unknown_dimension_falls_back_to_middle_level(problems):
    rubric = {
        "dimensions": [
            {"name": "politeness", "criterion": "the tone is courteous", "levels": LEVELS, "weight": 0.5},
            {"name": "correctness", "criterion": "the boxed answer is right", "levels": (0.0, 1.0), "weight": 0.5},
        ]
    }
    (result,) = OfflineJudge(error_rate=0, seed=0)(_requests(problems[:1], None, rubric))
    assert result["scores_by_dimension"] == {"politeness": 0.5, "correctness": 1.0}
    assert result["projected_score"] == pytest.approx(0.75)
    assert result["fallback"] and "'politeness'" in result["fallback_reason"]
    assert "correctness" not in result["fallback_reason"]


def test_unsolvable_question_falls_back_on_correctness():
    request = {"question": "Spell the word apple backwards.", "response": "<think>x</think>elppa", "rubric": RUBRIC}
    (result,) = OfflineJudge(error_rate=0, seed=0)([request])
    assert result["scores_by_dimension"]["correctness"] == 0.0  # the lower middle of (0, 1)
    assert result["fallback"] and "'correctness' (the question cannot be re-derived" in result["fallback_reason"]
    assert result["scores_by_dimension"]["format"] == 1.0  # not math: no box expected


# ---- the service --------------------------------------------------------------------------------


def test_disabled_judge_answers_unavailable(config, problems):
    service = judge_service(config.model_copy(update={"judge": JudgeConfig(enabled=False)}))
    assert service.name == "judge" and not service.essential
    assert service.handler(_requests(problems[:3], None)) == [{"status": "unavailable", "reason": DISABLED_REASON}] * 3


def test_enabled_offline_service_through_the_plugin(config, problems):
    settings = JudgeConfig(enabled=True, error_rate=0, max_calls=3, max_items_per_call=9)
    enabled = config.model_copy(update={"judge": settings})
    (service,) = load_plugins().task("data_selection").services(enabled)
    assert (service.name, service.essential, service.max_calls, service.max_items_per_call) == ("judge", True, 3, 9)
    (result,) = service.handler(_requests(problems[:1], None))
    assert result["status"] == "completed" and result["projected_score"] == 1.0


def test_openai_provider_is_a_config_error(config):
    openai = config.model_copy(update={"judge": JudgeConfig(enabled=True, provider="openai")})
    with pytest.raises(ConfigError, match=r"judge\.provider = 'openai' needs the agents' OpenAI client.*\"offline\""):
        judge_service(openai)


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
