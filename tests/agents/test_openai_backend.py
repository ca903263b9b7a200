"""The `openai` backend against a real OpenAI-compatible server: full dry runs, faults, repairs, tokens."""

from __future__ import annotations

import json

import pytest
from chat_server import Fault

from ade_core.store import RunStore

from conftest import dry_run, openai_config


def trials(status: dict) -> dict[str, dict]:
    return {t["trial_id"]: t for p in status["plans"] for t in p["trials"]}


def test_a_dry_run_against_the_server_completes_and_its_tokens_add_up(chat_server, tmp_path):
    server = chat_server()
    status = dry_run(tmp_path / "run", openai_config(server.url, coordinators=2))
    assert status["phase"] == "completed"
    assert {t["status"] for t in trials(status).values()} == {"completed"}
    assert set(status["agents"]["calls"]) == {
        "coordinator",
        "builder",
        "analyzer",
        "review_worker",
        "plan_summarizer",
        "run_summarizer",
    }
    assert status["agents"]["tokens_total"] == server.state.tokens_reported > 0
    assert_tokens_add_up(status, server)
    chat = [r for r in server.state.received if r.path == "/v1/chat/completions"]
    assert all(r.body["response_format"]["type"] == "json_schema" for r in chat)
    assert all(r.body["model"] == "ade-test-model" for r in chat)  # the server's only model, from /v1/models


def assert_tokens_add_up(status: dict, server) -> None:  # type: ignore[no-untyped-def]
    """Per-Trial and outside-Trial usage add up to the per-role and run totals, which match the server's."""
    agents = status["agents"]
    for field in ("calls", "prompt_tokens", "completion_tokens", "tokens"):
        for role, used in agents["per_role"].items():
            parts = [by_role.get(role, {}).get(field, 0) for by_role in agents["per_trial"].values()]
            assert sum(parts) + agents["outside_trials"].get(role, {}).get(field, 0) == used[field]
    assert agents["prompt_tokens_total"] == server.state.prompt_tokens_reported > 0
    assert agents["completion_tokens_total"] == server.state.completion_tokens_reported > 0
    assert sum(u["tokens"] for u in agents["per_role"].values()) == agents["tokens_total"]
    assert set(agents["outside_trials"]) == {"coordinator"}
    for trial in trials(status).values():
        assert trial["agent_usage"] == agents["per_trial"].get(trial["trial_id"], {})


def test_the_builder_requests_a_dev_check_through_the_server(chat_server, tmp_path):
    server = chat_server()
    status = dry_run(tmp_path / "run", openai_config(server.url))
    assert status["phase"] == "completed"
    builder = server.state.requests("builder")
    assert [r.subject.rsplit("#", 1)[1] for r in builder] == ["build-0", "build-1"]
    second = builder[1].body["messages"][1]["content"]
    assert '"dev_check": {' in second and '"source_lines"' in second  # the diagnostics reached the next prompt
    (checked,) = [t for t in trials(status).values() if t["dev_checks"]]
    assert checked["build_rounds"] == 2 and checked["dev_checks"][0]["round"] == 0
    for role in ("analyzer", "review_worker", "plan_summarizer", "run_summarizer", "coordinator"):
        assert all("source_lines" not in r.body["messages"][1]["content"] for r in server.state.requests(role))


def test_status_shows_tokens_per_trial_and_role(chat_server, tmp_path):
    from ade_core.harness.status import format_status

    server = chat_server()
    status = dry_run(tmp_path / "run", openai_config(server.url))
    text = format_status(status)
    usage = status["agents"]["per_trial"]["C1/P1/T1"]
    total = sum(u["tokens"] for u in usage.values())
    assert f"      tokens {total} (prompt " in text and f"builder {usage['builder']['prompt_tokens']}/" in text
    assert f"agent tokens {server.state.tokens_reported} (prompt {server.state.prompt_tokens_reported}" in text
    assert "tokens outside Trials (Plan proposals)" in text


def test_a_server_without_response_format_gets_json_in_text(chat_server, tmp_path):
    server = chat_server(response_format=False)
    status = dry_run(tmp_path / "run", openai_config(server.url))
    assert status["phase"] == "completed"
    refused = [r.body["response_format"]["type"] for r in server.state.received if r.status == 400]
    assert refused == ["json_schema", "json_object"]  # each mode tried once, then remembered
    assert all("response_format" not in r.body for r in server.state.received if r.status == 200)
    assert [s["mode"] for s in status["agent_failures"]["output_downgrades"]] == ["json_object", "text"]
    assert status["agents"]["tokens_total"] == server.state.tokens_reported


def test_a_server_without_usage_reporting_records_no_tokens(chat_server, tmp_path):
    server = chat_server(usage=False)
    status = dry_run(tmp_path / "run", openai_config(server.url))
    assert status["phase"] == "completed"
    assert status["agents"]["tokens_total"] == 0 and status["agents"]["calls"]["builder"] == 2  # draft + check


REPAIRS = {
    # fault -> what the repair request must say (None: a transport retry, no repair turn)
    "malformed": "the reply is not one JSON object",
    "schema": "delivery.source: required field is missing",
    "wrong_role": "role: this call is for 'builder' (got 'analyzer')",
    "stale": "basis_revision: this call is for",
    "extra_text": None,  # JSON inside a fence after a <think> block is read as is
    "http_429": None,
    "http_500": None,
    "garbled": None,
}


@pytest.mark.parametrize("fault", sorted(REPAIRS))
def test_each_fault_ends_in_a_repaired_delivery(chat_server, tmp_path, fault):
    server = chat_server(faults=[Fault(fault, role="builder")])
    status = dry_run(tmp_path / "run", openai_config(server.url))
    assert status["phase"] == "completed"
    assert trials(status)["C1/P1/T1"]["status"] == "completed"
    builder = server.state.requests("builder")
    assert builder[0].fault == fault
    assert builder[-1].subject.endswith("#build-1")  # after the draft's development check, the final round
    builder = [r for r in builder if r.subject.endswith("#build-0")]
    expected = REPAIRS[fault]
    if fault == "extra_text":
        assert len(builder) == 1
    elif expected is None:  # the same request again
        assert len(builder) == 2 and builder[1].body["messages"] == builder[0].body["messages"]
    else:
        assert len(builder) == 2
        first, repair = builder[0].body["messages"], builder[1].body["messages"]
        assert repair[:2] == first and repair[2]["role"] == "assistant"  # the prior delivery goes back ...
        assert expected in repair[3]["content"]  # ... with feedback on what is wrong
        if fault == "schema":  # ... and only what is wrong
            problems = [line for line in repair[3]["content"].splitlines() if line.startswith("- ")]
            assert len(problems) == 2 and "unexpected_field" in problems[1]
    if fault != "garbled":  # a body cut off in transit never reached the client
        assert status["agents"]["tokens_total"] == server.state.tokens_reported


def test_a_builder_that_never_delivers_valid_json_ends_build_failed(chat_server, tmp_path):
    server = chat_server(faults=[Fault("malformed", role="builder", times=100)])
    run_dir = tmp_path / "run"
    status = dry_run(run_dir, openai_config(server.url))
    assert status["phase"] == "completed"
    trial = trials(status)["C1/P1/T1"]
    assert trial["status"] == "build_failed"
    assert len(server.state.requests("builder")) == 9  # 3 Harness calls x 3 deliveries each
    with RunStore.open(run_dir) as store:
        failed = [e for e in store.events() if e.kind == "builder_failed"]
        record = store.get_model("trial", "C1/P1/T1")
    assert len(failed) == 1 and "not one JSON object" in failed[0].payload["feedback"][0]
    assert "builder gave no admissible delivery" in record.failure
    assert status["agents"]["tokens_total"] == server.state.tokens_reported  # failed calls count too


def test_a_coordinator_endpoint_that_keeps_failing_leaves_its_slot_unfilled(chat_server, tmp_path):
    server = chat_server(faults=[Fault("http_500", role="coordinator", times=100)])
    run_dir = tmp_path / "run"
    status = dry_run(run_dir, openai_config(server.url, "agents.max_retries=1"))
    assert status["phase"] == "completed" and set(trials(status)) == {"P000/T1"}
    assert len(server.state.requests("coordinator")) == 6  # 3 calls x (1 request + 1 retry)
    with RunStore.open(run_dir) as store:
        (unfilled,) = [op for op in store.operations() if op.action == "plan_slot_unfilled"]
    assert unfilled.subject == "C1/P1" and "answered 500" not in unfilled.details["why"]
    assert "InternalServerError" in unfilled.details["why"]


def test_a_slow_answer_times_out_and_is_asked_again(chat_server, tmp_path):
    server = chat_server(faults=[Fault("slow", role="plan_summarizer")], slow_s=2.0)
    status = dry_run(tmp_path / "run", openai_config(server.url, "agents.timeout_s=0.5"))
    assert status["phase"] == "completed"
    assert {t["status"] for t in trials(status).values()} == {"completed"}
    summarizer = server.state.requests("plan_summarizer")
    assert summarizer[0].fault == "slow" and summarizer[1].fault is None
    # The timed-out request is cancelled (its connection closed, so a server stops generating) before the
    # retry is sent, not left running beside it.
    assert summarizer[0].cancelled_at is not None and summarizer[0].cancelled_at <= summarizer[1].at


def test_roles_can_use_different_backends_and_models(chat_server, tmp_path):
    research, review = chat_server(), chat_server(model="review-model")
    loaded = openai_config(
        research.url,
        "agents.model='research-model'",
        "agents.roles.plan_summarizer.backend='offline'",
        f"review.endpoint='{review.url}'",
        "review.concurrency=2",
    )
    status = dry_run(tmp_path / "run", loaded)
    assert status["phase"] == "completed"
    assert not research.state.requests("plan_summarizer") and not research.state.requests("review_worker")
    assert {r.body["model"] for r in research.state.received} == {"research-model"}
    reviews = review.state.requests("review_worker")
    assert reviews and all(r.body["model"] == "review-model" and r.body["temperature"] == 0 for r in reviews)
    assert {r.role for r in review.state.received} == {"review_worker"}


def test_every_request_carries_only_its_roles_view(chat_server, tmp_path):
    """Sec 3.3: the Analyzer never sees the hypothesis, mechanism or Builder account, in any request."""
    plan_canary, account_canary = "CANARY-PSI-7f3a", "CANARY-ACCOUNT-19bd"

    def plant(role: str, delivery: dict) -> dict:
        if role == "coordinator":
            delivery["hypothesis"] += f" {plan_canary}"
            delivery["mechanism"] += f" {plan_canary}"
            delivery["expected_observations"] = [*delivery["expected_observations"], plan_canary]
        if role == "builder":
            delivery["account"]["implementation"] += f" {account_canary}"
        return delivery

    server = chat_server(edit=plant)
    status = dry_run(tmp_path / "run", openai_config(server.url, coordinators=2))
    assert status["phase"] == "completed"
    analyzer = server.state.requests("analyzer")
    assert len(analyzer) == 6  # design + interpretation for P000 and two Plans
    for request in analyzer:
        assert plan_canary not in request.text and account_canary not in request.text
        assert "hypothesis" not in json.loads(_view_of(request))
    # the canaries did travel: the roles entitled to them saw them
    assert any(plan_canary in r.text for r in server.state.requests("plan_summarizer"))
    assert any(plan_canary in r.text for r in server.state.requests("builder"))
    assert not any(plan_canary in r.text for r in server.state.requests("review_worker"))


def _view_of(request) -> str:
    from chat_server import _VIEW

    return _VIEW.search(request.body["messages"][1]["content"]).group(1)


def test_streamed_replies_count_their_tokens_and_a_slow_stream_is_closed_before_its_retry(chat_server, tmp_path):
    server = chat_server(faults=[Fault("slow", role="plan_summarizer")], slow_s=3.0)
    status = dry_run(tmp_path / "run", openai_config(server.url, "agents.stream=true", "agents.timeout_s=0.5"))
    assert status["phase"] == "completed" and status["agent_failures"]["per_role"] == {}
    assert all(r.body["stream"] and r.body["stream_options"] == {"include_usage": True} for r in server.state.received)
    assert status["agents"]["tokens_total"] == server.state.tokens_reported > 0  # from the streams' usage chunks
    summarizer = server.state.requests("plan_summarizer")
    # The stream was closed mid-reply when timeout_s passed (the server saw the hang-up), then asked again.
    assert summarizer[0].fault == "slow" and summarizer[0].cancelled_at is not None
    assert summarizer[0].cancelled_at <= summarizer[1].at and summarizer[1].fault is None
