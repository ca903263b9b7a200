"""The offline judge's process dimensions (Reward Design's evidence): worked steps re-derived from
the question on the tiny world's own trajectories, unavailable for a question it cannot re-derive,
emulated errors that move one level deterministically, and verdicts no label or answer can change."""

from __future__ import annotations

import json
import random
import sys
from collections import Counter

import pytest

from ade_core.judging import Judge, OfflineProvider, detector_for, parse_rubric
from ade_core.judging.steps import worked_steps
from ade_core.tiny.candidates import math_trajectory
from ade_core.tiny.problems import generate_problems

PROCESS = ("conclusion_support", "derivation_soundness", "substantive_relevance")
RUBRIC = {
    "dimensions": [
        {
            "name": "conclusion_support",
            "criterion": "the boxed answer follows from the last worked step",
            "levels": [0, 0.5, 1],
            "weight": 0.4,
        },
        {
            "name": "derivation_soundness",
            "criterion": "every worked step is right when re-derived from the question",
            "levels": [0, 0.5, 1],
            "weight": 0.3,
        },
        {
            "name": "substantive_relevance",
            "criterion": "the working uses the question's numbers",
            "levels": [0, 0.5, 1],
            "weight": 0.3,
        },
    ]
}


@pytest.fixture(scope="module")
def problems():
    return generate_problems(120, seed=21) + generate_problems(40, seed=22, reworded=True)


def _requests(problems, defect, seed=0):
    rng = random.Random(seed)
    return [
        {"question": p.problem, "response": math_trajectory(p, defect, rng, cap_chars=200), "rubric": RUBRIC}
        for p in problems
    ]


def _dimensions(answers):
    assert all(answer["status"] == "completed" for answer in answers), answers
    return [answer["scores_by_dimension"] for answer in answers]


def test_the_process_dimensions_route_to_the_process_detectors_by_name():
    rubric = parse_rubric(RUBRIC)
    assert [detector_for(d)[0] for d in rubric.dimensions] == list(PROCESS)
    # criteria that name a box or a step do not pull a process dimension to format or repetition
    boxed = parse_rubric(
        {"dimensions": [{"name": "conclusion_support", "criterion": "boxed format", "levels": [0, 1], "weight": 1}]}
    )
    assert detector_for(boxed.dimensions[0])[0] == "conclusion_support"


def test_the_tiny_worlds_solutions_are_sound_step_by_step(problems):
    for problem in problems:
        steps = worked_steps(problem.solution)
        assert steps and all(step.holds for step in steps), problem.solution
        assert str(steps[-1].value) == problem.answer


def test_a_corrupted_step_scores_lower_than_the_correct_working(problems):
    judge = Judge(OfflineProvider(error_rate=0, seed=0))
    clean = _dimensions(judge(_requests(problems, None)))
    corrupted = _dimensions(judge(_requests(problems, "wrong_step")))
    assert all(scores == dict.fromkeys(PROCESS, 1.0) for scores in clean)
    for good, bad in zip(clean, corrupted, strict=True):
        assert bad["derivation_soundness"] < good["derivation_soundness"]
        # the error carries into the boxed answer, which still follows from the (wrong) last step
        assert bad["conclusion_support"] == 1.0 and bad["substantive_relevance"] == 1.0


def test_an_answer_that_does_not_follow_from_the_working_loses_conclusion_support(problems):
    judge = Judge(OfflineProvider(error_rate=0, seed=0))
    scores = _dimensions(judge(_requests(problems, "wrong_answer")))
    assert all(s == {**dict.fromkeys(PROCESS, 1.0), "conclusion_support": 0.0} for s in scores)
    unboxed = _dimensions(judge(_requests(problems, "missing_box")))
    assert all(s["conclusion_support"] == 0.5 for s in unboxed)


def test_working_for_another_question_is_neither_sound_nor_relevant(problems):
    judge = Judge(OfflineProvider(error_rate=0, seed=0))
    rng = random.Random(0)
    swapped = [
        {"question": p.problem, "response": math_trajectory(other, None, rng, cap_chars=200), "rubric": RUBRIC}
        for p, other in zip(problems, problems[1:] + problems[:1], strict=True)
        if set(p.problem.split()) != set(other.problem.split())
    ]
    scores = _dimensions(judge(swapped))
    assert sum(s["substantive_relevance"] < 1 for s in scores) >= 0.9 * len(scores)
    assert sum(s["derivation_soundness"] < 1 for s in scores) >= 0.9 * len(scores)


def test_a_response_without_working_scores_zero_not_unavailable():
    (answer,) = Judge(OfflineProvider(error_rate=0, seed=0))(
        [{"question": "What is 12 + 30?", "response": "<think>easy</think>\\boxed{42}", "rubric": RUBRIC}]
    )
    assert answer["scores_by_dimension"] == dict.fromkeys(PROCESS, 0.0)


@pytest.mark.parametrize(
    "response",
    [
        "<think>" + "+".join(["1"] * 5000) + "=5000</think>\\boxed{5000}",
        "<think>" + "(" * 3000 + "42" + ")" * 3000 + "=42</think>\\boxed{42}",
        "<think>" + "9" * 5000 + "*2=1; 12+30=42</think>\\boxed{42}",
        "<think>12+30=[2+0=2, 1+3=4]=42; =; 12==; [; ]=]; x=x</think>\\boxed{42}",
        "<think>12+30=4",
    ],
    ids=["long_sum", "deep_brackets", "huge_number", "stray_signs", "cut_off"],
)
def test_any_response_gets_levels_never_an_error(response):
    (answer,) = Judge(OfflineProvider(error_rate=0, seed=0))(
        [{"question": "What is 12 + 30?", "response": response, "rubric": RUBRIC}]
    )
    assert answer["status"] == "completed"
    assert set(answer["scores_by_dimension"].values()) <= {0.0, 0.5, 1.0}


@pytest.mark.parametrize(
    "question",
    ["Spell the word apple backwards.", "What is 12 + 30? Also, what is 5?", "Solve for x: 2x + 1 = 4."],
    ids=["chat", "template_inside_text", "no_integer_answer"],
)
def test_a_question_it_cannot_parse_is_unavailable_never_a_middle_score(question):
    request = {"question": question, "response": "<think>12+30=42</think>\\boxed{42}", "rubric": RUBRIC}
    (answer,) = Judge(OfflineProvider(error_rate=0, seed=0))([request])
    assert answer["status"] == "unavailable" and answer["fallback"] is True
    assert "scores_by_dimension" not in answer and "projected_score" not in answer
    assert "cannot re-derive" in answer["reason"] and "'conclusion_support'" in answer["reason"]


def test_emulated_errors_move_one_level_deterministically(problems):
    requests = _requests(problems, None) + _requests(problems, "wrong_step") + _requests(problems, "wrong_answer")
    exact = _dimensions(Judge(OfflineProvider(error_rate=0, seed=0))(requests))
    first = Judge(OfflineProvider(error_rate=0.3, seed=7))(requests)
    assert Judge(OfflineProvider(error_rate=0.3, seed=7))(requests) == first
    # a verdict depends on the request, not on its position in the call
    assert Judge(OfflineProvider(error_rate=0.3, seed=7))(requests[::-1]) == first[::-1]
    assert Judge(OfflineProvider(error_rate=0.3, seed=8))(requests) != first
    moved = Counter()
    for truth, judged in zip(exact, _dimensions(first), strict=True):
        for name in PROCESS:
            assert abs(judged[name] - truth[name]) in (0, 0.5), (name, truth, judged)
            moved[name] += judged[name] != truth[name]
    for name in PROCESS:  # each dimension errs on its own, at about the error rate
        assert 0.2 <= moved[name] / len(requests) <= 0.4, moved


# ---- no label and no answer reaches a verdict ----------------------------------------------------

CANARY = "CANARY-5b81c2d4-process-label"
_AUDIT = {"recording": False, "events": []}


def _audit(event: str, args: tuple) -> None:
    if _AUDIT["recording"] and event in ("open", "os.listdir", "os.scandir"):
        _AUDIT["events"].append((event, args[0] if args else None))


def test_poisoned_labels_and_answers_change_no_verdict(tmp_path, monkeypatch, problems):
    requests = _requests(problems[:40], None) + _requests(problems[40:80], "wrong_step")
    before = Judge(OfflineProvider(error_rate=0.1, seed=3))(requests)
    # a world on disk, where a judge that peeked would look, whose labels are inverted and whose
    # answers and solutions are all the canary
    world = tmp_path / "world"
    (world / "ground_truth").mkdir(parents=True)
    (world / "data").mkdir()
    labels = [
        {"candidate_id": f"m{i:05d}", "defect": "wrong_step" if i < 40 else None, "answer": CANARY} for i in range(80)
    ]
    (world / "ground_truth" / "defects.jsonl").write_text("\n".join(json.dumps(row) for row in labels))
    poisoned = [{**p.to_json(), "answer": CANARY, "solution": CANARY} for p in problems[:80]]
    for name in ("candidates", "in_loop", "rft_pool", "held_out_harder"):
        (world / "data" / f"{name}.jsonl").write_text("\n".join(json.dumps(row) for row in poisoned))
    monkeypatch.chdir(world)
    monkeypatch.setenv("ADE_CACHE_DIR", str(world))
    if not _AUDIT.get("installed"):  # audit hooks cannot be removed: install once, gate by the flag
        sys.addaudithook(_audit)
        _AUDIT["installed"] = True
    _AUDIT["events"].clear()
    _AUDIT["recording"] = True
    try:
        after = Judge(OfflineProvider(error_rate=0.1, seed=3))(requests)
        exact = _dimensions(Judge(OfflineProvider(error_rate=0, seed=3))(requests))
    finally:
        _AUDIT["recording"] = False
    assert _AUDIT["events"] == []
    assert after == before
    assert CANARY not in json.dumps(after)
    # the verdicts follow the working, not the (inverted) labels
    assert [s["derivation_soundness"] == 1 for s in exact] == [True] * 40 + [False] * 40


def test_a_response_without_a_think_span_is_judged_on_its_text_before_the_box():
    """A target that answers in one turn (the RFT base writes its working, then the box) has working too."""
    from ade_core.judging.offline import (
        detect_conclusion_support,
        detect_derivation_soundness,
        detect_substantive_relevance,
    )

    question = "What is the dot product of (6, 3) and (4, 6)?"
    sound = "6*4=24; 3*6=18; 24+18=42\\boxed{42}"
    wrong_step = "6*4=24; 3*6=18; 24+18=41\\boxed{41}"
    unrelated = "7*4=28 \\boxed{28}"
    assert [f(question, sound) for f in (detect_derivation_soundness, detect_conclusion_support)] == [1.0, 1.0]
    assert detect_substantive_relevance(question, sound) == 1.0
    assert detect_derivation_soundness(question, wrong_step) == 0.5
    assert detect_derivation_soundness(question, unrelated) == 0.0
    assert detect_substantive_relevance(question, unrelated) < 1.0
    assert detect_conclusion_support(question, "6*4=24; 3*6=18; 24+18=42") == 0.0  # no answer
