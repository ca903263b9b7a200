"""Agents against servers that fail the way real ones do: llama-cpp-python's 500 for a JSON-schema
``response_format``, a 400 for a prompt over the context, a server that never answers."""

from __future__ import annotations

import sys
from pathlib import Path

from chat_server import LLAMA_CPP_PYTHON_500, Fault

from ade_core.harness.status import format_status
from ade_core.store import RunStore
from ade_core.testing import run_command

from conftest import CONFIG, dry_run, openai_config

ADE = str(Path(sys.executable).with_name("ade"))


def test_llama_cpp_python_s_500_for_json_schema_moves_that_endpoint_to_a_schema_constrained_json_object(
    chat_server, tmp_path
):
    server = chat_server(structured_refusal=LLAMA_CPP_PYTHON_500)
    run_dir = tmp_path / "run"
    status = dry_run(run_dir, openai_config(server.url, "agents.max_retries=0"))
    assert status["phase"] == "completed"
    refused = [r for r in server.state.received if r.status == 500]
    assert len(refused) == 1 and refused[0].body["response_format"]["type"] == "json_schema"  # asked once
    answered = [r.body["response_format"] for r in server.state.received if r.status == 200]
    assert all(f["type"] == "json_object" and f["schema"]["type"] == "object" for f in answered)
    assert status["agent_failures"]["per_role"] == {}  # no call failed: the switch happened within one
    (switch,) = status["agent_failures"]["output_downgrades"]
    assert switch["endpoint"] == server.url and switch["status"] == 500 and switch["mode"] == "json_object"
    assert "Input should be 'text' or 'json_object'" in switch["reason"] and "\n" not in switch["reason"]
    assert "app.py" not in switch["reason"]
    assert f"output mode of {server.url} now json_object" in format_status(status)
    with RunStore.open(run_dir) as store:
        modes = {e.payload["details"].get("output_mode") for e in store.events() if e.kind == "delivery_accepted"}
    assert modes == {"json_object"}


def test_a_context_overflow_400_fails_that_call_only_and_keeps_structured_output(chat_server, tmp_path):
    server = chat_server(faults=[Fault("context_overflow", role="builder", times=1)])
    run_dir = tmp_path / "run"
    status = dry_run(run_dir, openai_config(server.url))
    assert status["phase"] == "completed"
    builder = server.state.requests("builder")
    assert builder[0].status == 400 and all(r.body["response_format"]["type"] == "json_schema" for r in builder)
    assert all("response_format" in r.body for r in server.state.received)  # no role was downgraded
    assert status["agent_failures"]["output_downgrades"] == []
    failed = status["agent_failures"]["per_role"]["builder"]
    assert failed["calls"] == 1 and "maximum context length" in failed["last_error"]


def test_server_error_details_never_reach_a_prompt(chat_server, tmp_path):
    server = chat_server(faults=[Fault("http_500", role="builder", times=2)])
    run_dir = tmp_path / "run"
    status = dry_run(run_dir, openai_config(server.url, "agents.max_retries=1"))
    assert status["phase"] == "completed"
    asked_again = [r for r in server.state.requests("builder") if r.status == 200]
    assert asked_again
    for request in server.state.received:  # nothing of the failure: no URL, no error text, no operator advice
        text = request.text
        assert "injected failure" not in text and "127.0.0.1" not in text and "max_retries" not in text
    assert "answer the same request again" in asked_again[0].text
    with RunStore.open(run_dir) as store:
        details = [e.payload["operator_detail"] for e in store.events() if "operator_detail" in e.payload]
    assert details and all("injected failure" in d for d in details)  # the operator's record keeps it
    assert status["agent_failures"]["per_role"]["builder"]["calls"] == 1
    assert status["seconds_per_stage"]["build"] > 0


def test_a_run_where_no_research_was_delivered_exits_non_zero_and_says_why(chat_server, tmp_path):
    server = chat_server(faults=[Fault("http_500", times=10_000)])
    run_dir = tmp_path / "run"
    done = run_command(
        [
            ADE, "run", str(CONFIG), "--dry-run", "--run-dir", str(run_dir), "--progress", "none",
            "--set", "budget.coordinators=1", "--set", "budget.plans_per_coordinator=1",
            "--set", "agents.backend='openai'", "--set", f"agents.base_url='{server.url}'",
            "--set", "agents.backoff_s=0.01", "--set", "agents.max_retries=0",
        ],
        idle_s=30,
    )  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    assert "no research was delivered: every Coordinator and Builder call failed" in done.stderr
    assert "agent failures: coordinator 3 call(s) without an answer" in done.stdout
    shown = run_command([ADE, "status", str(run_dir)], idle_s=10)
    assert shown.returncode == 0, shown.stderr
    status = shown.stdout
    assert "coordinator: 3 call(s) got no answer" in status and "injected failure" in status
    report = (run_dir / "report.html").read_text(encoding="utf-8")
    assert '<table id="agent-failures">' in report and "<td>coordinator</td><td class='num'>3</td>" in report


def test_an_empty_review_design_is_refused_while_records_wait_for_review(chat_server, tmp_path):
    emptied: list[str] = []

    def empty_first_design(role: str, delivery: dict) -> dict:
        if role == "analyzer" and "requests" in delivery and not emptied:
            emptied.append(role)
            return {**delivery, "requests": []}
        return delivery

    server = chat_server(edit=empty_first_design)
    run_dir = tmp_path / "run"
    status = dry_run(run_dir, openai_config(server.url))
    assert status["phase"] == "completed" and emptied
    with RunStore.open(run_dir) as store:
        refused = [e for e in store.events() if e.kind == "analyzer_called" and e.payload.get("refused")]
        designs = [e for e in store.events() if e.kind == "delivery_accepted" and e.subject.endswith("#review-design")]
    assert len(refused) == 1 and "the design requests no review, but pools" in refused[0].payload["feedback"][0]
    assert len(designs) == len(trials_of(status))  # asked again, every Trial's design was accepted


def trials_of(status: dict) -> list[dict]:
    return [t for p in status["plans"] for t in p["trials"]]


def test_every_role_sends_a_bounded_completion_limit(chat_server, tmp_path):
    server = chat_server()
    dry_run(tmp_path / "run", openai_config(server.url))
    limits = {r.role: r.body["max_tokens"] for r in server.state.received if r.role}
    assert limits == {
        "coordinator": 4096,
        "builder": 16384,
        "analyzer": 8192,
        "review_worker": 4096,  # [review].max_tokens (paper: 4,096)
        "plan_summarizer": 4096,
        "run_summarizer": 4096,
    }


def test_a_prompt_over_the_context_is_refused_before_it_is_sent(chat_server, tmp_path):
    server = chat_server()
    run_dir = tmp_path / "run"
    status = dry_run(run_dir, openai_config(server.url, "agents.context_tokens=12000", "agents.max_retries=0"))
    assert status["phase"] == "completed"
    assert server.state.requests("builder") == []  # ~15k tokens of prompt: never sent
    failed = status["agent_failures"]["per_role"]["builder"]
    assert "agents.context_tokens" in failed["last_error"] and "builder's prompt is" in failed["last_error"]
    for request in server.state.received:  # the others were sent with the room their prompt leaves
        estimate = int(sum(len(m["content"]) + 8 for m in request.body["messages"]) / 3) + 1
        assert request.body["max_tokens"] <= 12000 - estimate


def test_a_local_tokenizer_measures_the_prompt_exactly(chat_server, tmp_path):
    from transformers import AutoTokenizer

    from ade_core.engine import bundled

    tokenizer_dir = bundled.materialize("smollm2")
    server = chat_server()
    dry_run(
        tmp_path / "run",
        openai_config(server.url, "agents.context_tokens=20000", f"agents.tokenizer='{tokenizer_dir}'"),
    )
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    (first,) = server.state.requests("builder")[:1]
    text = tokenizer.apply_chat_template(first.body["messages"], tokenize=False, add_generation_prompt=True)
    prompt = len(tokenizer(text, add_special_tokens=False)["input_ids"])
    assert 10_000 < prompt < 20_000 and first.body["max_tokens"] == min(16384, 20000 - prompt)
