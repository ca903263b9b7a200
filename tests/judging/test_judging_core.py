"""The judge core: one rubric model from three written shapes, answers that are never a zero,
malformed requests refused with the field named, the content-addressed cache, call records."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from ade_core import InvalidServiceRequest
from ade_core.judging import (
    AnswerCache,
    Judge,
    JudgeRequest,
    OfflineProvider,
    judge_service,
    parse_rubric,
)
from ade_core.schemas.config import JudgeConfig

QUESTION = "What is 12 + 30?"
RESPONSE = "<think>12 + 30 = 42</think>\nThe answer is \\boxed{42}."

CRITERIA = {
    "criteria": [
        {
            "name": "correctness",
            "description": "the boxed answer solves the question",
            "levels": [0, 1],
            "weight": 0.75,
        },
        {
            "name": "format",
            "description": "one closed think span, then a boxed answer",
            "levels": [0, 0.5, 1],
            "weight": 0.25,
        },
    ]
}
DIMENSIONS = {
    "dimensions": [
        {"name": "correctness", "criterion": "the boxed answer solves the question", "levels": [0, 1], "weight": 0.75},
        {
            "name": "format",
            "criterion": "one closed think span, then a boxed answer",
            "levels": [0, 0.5, 1],
            "weight": 0.25,
        },
    ]
}
PROJECTION = {
    "projection": {
        "dimensions": [
            {
                "id": "correctness",
                "criterion": "the boxed answer solves the question",
                "weight": 0.75,
                "score_levels": [{"value": 1, "standard": "right"}, {"value": 0, "standard": "wrong"}],
            },
            {
                "id": "format",
                "criterion": "one closed think span, then a boxed answer",
                "weight": 0.25,
                "score_levels": [
                    {"value": 0, "standard": "no closed span"},
                    {"value": 0.5, "standard": "no box"},
                    {"value": 1, "standard": "closed span and a box"},
                ],
            },
        ]
    }
}


def _request(rubric=DIMENSIONS, **changes):
    return {"question": QUESTION, "response": RESPONSE, "rubric": rubric, **changes}


def _dimension(**changes):
    entry = {"name": "correctness", "criterion": "the boxed answer is right", "levels": [0, 1], "weight": 1.0}
    return {"dimensions": [{**entry, **changes}]}


# ---- one rubric model -------------------------------------------------------------------------


@pytest.mark.parametrize("written", [CRITERIA, DIMENSIONS, PROJECTION], ids=["criteria", "dimensions", "projection"])
def test_every_rubric_shape_normalises_to_the_same_model(written):
    expected = parse_rubric(DIMENSIONS)
    for form in (written, json.dumps(written)):
        rubric = parse_rubric(form)
        assert [(d.name, d.criterion, d.levels, d.weight) for d in rubric.dimensions] == [
            (d.name, d.criterion, d.levels, d.weight) for d in expected.dimensions
        ]
    assert parse_rubric(PROJECTION).dimensions[0].standards == ("wrong", "right")  # sorted with their levels


@pytest.mark.parametrize("written", [CRITERIA, DIMENSIONS, PROJECTION], ids=["criteria", "dimensions", "projection"])
def test_every_rubric_shape_gets_the_same_answer(written):
    judge = Judge(OfflineProvider(error_rate=0, seed=0))
    (answer,) = judge([_request(written)])
    assert answer == {
        "status": "completed",
        "scores_by_dimension": {"correctness": 1.0, "format": 1.0},
        "projected_score": 1.0,
        "fallback": False,
    }
    (as_string,) = judge([_request(json.dumps(written))])
    assert as_string == answer


def test_an_unassessable_request_is_unavailable_never_a_score():
    judge = Judge(OfflineProvider(error_rate=0, seed=0))
    politeness = _dimension(name="politeness", criterion="the tone is courteous")
    unknown, unsolvable = judge(
        [_request(politeness), {"question": "Spell apple backwards.", "response": RESPONSE, "rubric": DIMENSIONS}]
    )
    for answer in (unknown, unsolvable):
        assert answer["status"] == "unavailable" and answer["fallback"] is True
        assert "projected_score" not in answer and "scores_by_dimension" not in answer
        assert answer["reason"] == answer["fallback_reason"]
    assert "'politeness'" in unknown["reason"] and "re-derive" in unsolvable["reason"]


# ---- malformed requests: the strategy's error, with the field named ------------------------------

MALFORMED = [
    ("not_a_list", {"question": QUESTION}, "requests", "takes one list"),
    ("not_an_object", ["What is 1 + 2?"], "requests[0]", "(got str)"),
    ("missing_response", [{"question": QUESTION, "rubric": DIMENSIONS}], "requests[0].response", "got missing"),
    ("unknown_field", [_request(score=1)], "requests[0].score", "unknown field"),
    ("missing_rubric", [{"question": QUESTION, "response": RESPONSE}], "requests[0].rubric", "missing"),
    ("rubric_not_json", [_request("{criteria: [")], "requests[0].rubric", "must be JSON"),
    ("no_shape", [_request({"scales": []})], "requests[0].rubric", "exactly one of criteria"),
    ("empty", [_request({"criteria": []})], "requests[0].rubric.criteria", "non-empty list"),
    ("level_outside", [_request(_dimension(levels=[0, 2]))], "requests[0].rubric.dimensions[0].levels", "[0, 1]"),
    ("one_level", [_request(_dimension(levels=[1]))], "requests[0].rubric.dimensions[0].levels", "two distinct"),
    ("bad_weight", [_request(_dimension(weight=-1))], "requests[0].rubric.dimensions[0].weight", "> 0"),
    (
        "weights_off",
        [_request({"dimensions": [_dimension(weight=0.5)["dimensions"][0]]})],
        "requests[0].rubric.dimensions[*].weight",
        "sum to 1 (got 0.5",
    ),
    ("no_criterion", [_request(_dimension(criterion=" "))], "requests[0].rubric.dimensions[0].criterion", "non-empty"),
    (
        "no_score_levels",
        [_request({"projection": {"dimensions": [{"id": "c", "criterion": "x", "weight": 1}]}})],
        "requests[0].rubric.projection.dimensions[0].score_levels",
        "value, standard",
    ),
    (
        "repeated_names",
        [_request({"dimensions": [_dimension(weight=0.5)["dimensions"][0]] * 2})],
        "requests[0].rubric.dimensions",
        "repeat",
    ),
    ("second_request", [_request(), _request(question=3)], "requests[1].question", "must be a string"),
]


@pytest.mark.parametrize(("requests", "field", "fix"), [m[1:] for m in MALFORMED], ids=[m[0] for m in MALFORMED])
def test_a_malformed_request_is_refused_naming_its_field(requests, field, fix):
    judge = Judge(OfflineProvider(error_rate=0, seed=0))
    with pytest.raises(InvalidServiceRequest) as caught:
        judge(requests)
    assert caught.value.field == field and fix in caught.value.fix
    assert str(caught.value) == f"invalid_service_request: {field}: {caught.value.fix}"
    assert judge.calls == []  # a refused call asked no provider


# ---- cache, batching, records ------------------------------------------------------------------


class Counting:
    """A provider that counts what it is asked (to see what the cache saves)."""

    name = "counting"

    def __init__(self, settings=None):
        self.asked: list[JudgeRequest] = []
        self._settings = settings or {"provider": "counting", "model": "m"}

    def settings(self):
        return self._settings

    def answer(self, requests):
        self.asked += requests
        offline = OfflineProvider(error_rate=0, seed=0)
        return offline.answer(requests)


def test_the_cache_answers_again_without_a_second_call(tmp_path):
    provider = Counting()
    judge = Judge(provider, AnswerCache(tmp_path / "cache"))
    first = judge([_request(), _request(), _request(CRITERIA)])
    assert len(provider.asked) == 1  # three requests, one content: asked once (the shapes normalise alike)
    again = judge([_request(json.dumps(DIMENSIONS))])  # the same content, written as a JSON string
    assert len(provider.asked) == 1 and again == first[:1]
    judge([_request(PROJECTION)])  # its level standards reach an LLM's prompt: another request
    assert len(provider.asked) == 2
    assert [(c.requests, c.unique, c.cached, c.asked, c.completed) for c in judge.calls] == [
        (3, 1, 0, 1, 3),
        (1, 1, 1, 0, 1),
        (1, 1, 0, 1, 1),
    ]
    # on disk, by content: a new judge over the same settings reads it; other settings do not
    fresh = Counting()
    assert Judge(fresh, AnswerCache(tmp_path / "cache"))([_request()]) == first[:1] and fresh.asked == []
    other = Counting({"provider": "counting", "model": "another"})
    Judge(other, AnswerCache(tmp_path / "cache"))([_request()])
    assert len(other.asked) == 1


def test_unavailable_answers_are_not_cached():
    provider = Counting()
    judge = Judge(provider)
    politeness = _request(_dimension(name="politeness", criterion="the tone is courteous"))
    judge([politeness])
    judge([politeness])
    assert len(provider.asked) == 2 and len(judge.cache) == 0


def test_a_cached_answer_cannot_be_changed_by_the_caller():
    judge = Judge(OfflineProvider(error_rate=0, seed=0))
    (answer,) = judge([_request()])
    answer["scores_by_dimension"]["correctness"] = 0.0
    assert judge([_request()])[0]["scores_by_dimension"]["correctness"] == 1.0


# ---- configuration -------------------------------------------------------------------------------


def test_the_service_carries_the_quotas_and_a_disabled_judge_is_unavailable():
    service = judge_service(JudgeConfig(max_calls=3, max_items_per_call=9), description="d")
    assert (service.name, service.essential, service.max_calls, service.max_items_per_call) == ("judge", False, 3, 9)
    (answer,) = service.handler([_request()])
    assert answer["status"] == "unavailable" and "[judge].enabled = false" in answer["reason"]


def test_an_openai_judge_needs_its_model_in_the_config():
    with pytest.raises(ValidationError, match=r"judge\.provider = 'openai' needs judge\.model"):
        JudgeConfig(enabled=True, provider="openai")
    settings = JudgeConfig(enabled=True, provider="openai", model="judge-model")
    assert (settings.temperature, settings.max_tokens, settings.attempts, settings.enable_thinking) == (
        0.0,
        4096,
        3,
        False,
    )


def test_the_judge_serves_other_tasks_under_their_names():
    # Curriculum's judge_batch takes the same requests: one core, another service name
    service = judge_service(JudgeConfig(enabled=True, error_rate=0), name="judge_batch", description="d")
    assert service.name == "judge_batch" and service.handler([_request()])[0]["status"] == "completed"


def test_building_the_judge_service_does_not_import_the_openai_client():
    import sys

    from ade_core.testing import run_command

    code = (
        "import sys\n"
        "from ade_core.judging import judge_service\n"
        "from ade_core.schemas.config import JudgeConfig\n"
        "judge_service(JudgeConfig(enabled=True, provider='openai', model='m'), description='d')\n"
        "assert 'openai' not in sys.modules, 'the openai client was imported while loading'\n"
    )
    done = run_command([sys.executable, "-c", code], idle_s=10)
    assert done.returncode == 0, done.stderr
