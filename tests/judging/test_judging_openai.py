"""The ``openai`` judge provider against the local OpenAI-compatible test server: good answers with
the review-provider settings, garbage and timeouts (``unavailable`` after the attempts), bounded
concurrency, and the cache sparing a second request."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "agents"))
from chat_server import ChatServer  # noqa: E402 - the agents' test server

from ade_core.judging import Judge, JudgeEndpoint, OpenAIProvider, judge_service  # noqa: E402
from ade_core.schemas.config import JudgeConfig  # noqa: E402

RUBRIC = {
    "dimensions": [
        {"name": "correctness", "criterion": "the boxed answer solves the question", "levels": [0, 1], "weight": 0.75},
        {"name": "format", "criterion": "a closed think span, then a box", "levels": [0, 0.5, 1], "weight": 0.25},
    ]
}
GOOD = json.dumps({"scores": {"correctness": 1, "format": 0.5}})


def _request(question="What is 12 + 30?"):
    return {"question": question, "response": "<think>12+30=42</think>\\boxed{42}", "rubric": RUBRIC}


def _provider(server, **options):
    endpoint = JudgeEndpoint(
        base_url=server.url,
        timeout_s=options.pop("timeout_s", 10),
        concurrency=options.pop("concurrency", 4),
        backoff_s=0,
    )
    return OpenAIProvider("judge-model", endpoint=endpoint, **options)


def test_good_answers_with_the_review_provider_settings():
    with ChatServer(reply=lambda body: f"<think>checking</think>\n```json\n{GOOD}\n```") as server:
        (answer,) = Judge(_provider(server))([_request()])
    assert answer == {
        "status": "completed",
        "scores_by_dimension": {"correctness": 1.0, "format": 0.5},
        "projected_score": pytest.approx(0.875),
        "fallback": False,
    }
    (sent,) = server.state.received
    body = sent.body
    assert (body["model"], body["temperature"], body["max_tokens"]) == ("judge-model", 0.0, 4096)
    assert body["chat_template_kwargs"] == {"enable_thinking": False}
    prompt = body["messages"][1]["content"]
    assert "correctness (weight 0.75)" in prompt and "Levels: 0, 0.5, 1" in prompt and "What is 12 + 30?" in prompt


def test_concurrency_is_bounded():
    with ChatServer(reply=lambda body: GOOD, delay_s=0.2) as server:
        answers = Judge(_provider(server, concurrency=2))([_request(f"What is {i} + 1?") for i in range(6)])
    assert [a["status"] for a in answers] == ["completed"] * 6
    assert server.state.max_in_flight == 2


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        ("The response looks fine to me.", "no JSON object"),
        ('{"scores": {"correctness": 1, "format": }}', "not valid JSON"),
        ('{"scores": {"correctness": 0.7, "format": 1}}', "correctness = 0.7 is not one of its levels"),
        ('{"scores": {"correctness": 1}}', "missing ['format']"),
    ],
    ids=["prose", "broken_json", "off_level", "missing_dimension"],
)
def test_garbage_is_unavailable_after_three_attempts(reply, reason):
    with ChatServer(reply=lambda body: reply) as server:
        (answer,) = Judge(_provider(server))([_request()])
    assert answer["status"] == "unavailable" and answer["fallback"] is True
    assert "no valid answer in 3 attempt(s)" in answer["reason"] and reason in answer["reason"]
    assert "projected_score" not in answer and len(server.state.received) == 3


def test_a_bad_reply_is_retried_and_a_good_one_then_counts():
    replies = iter(["not json", GOOD])
    with ChatServer(reply=lambda body: next(replies)) as server:
        (answer,) = Judge(_provider(server))([_request()])
    assert answer["status"] == "completed" and len(server.state.received) == 2


def test_timeouts_are_unavailable_within_the_attempts():
    with ChatServer(reply=lambda body: GOOD, delay_s=1.0) as server:
        started = time.monotonic()
        (answer,) = Judge(_provider(server, timeout_s=0.2, attempts=2))([_request()])
        elapsed = time.monotonic() - started
    assert answer["status"] == "unavailable" and "2 attempt(s)" in answer["reason"]
    assert "Timeout" in answer["reason"] and elapsed < 1.5


def test_the_cache_spares_a_second_request():
    with ChatServer(reply=lambda body: GOOD) as server:
        judge = Judge(_provider(server))
        first = judge([_request()])
        assert judge([_request()]) == first
    assert len(server.state.received) == 1
    assert [(c.cached, c.asked) for c in judge.calls] == [(0, 1), (1, 0)]


def test_the_service_from_config_reaches_the_endpoint_named_in_the_environment(monkeypatch):
    with ChatServer(reply=lambda body: GOOD) as server:
        monkeypatch.setenv("ADE_JUDGE_BASE_URL", server.url)
        settings = JudgeConfig(enabled=True, provider="openai", model="judge-model", enable_thinking=None)
        service = judge_service(settings, description="rubric judge")
        (answer,) = service.handler([_request()])
    assert answer["status"] == "completed" and service.essential
    assert "chat_template_kwargs" not in server.state.received[0].body  # None: not sent
