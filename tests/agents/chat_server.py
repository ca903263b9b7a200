"""A real OpenAI-compatible chat-completions server for the agent tests, answering as ADE's roles.

It listens on 127.0.0.1 (a free port) and speaks ``GET /v1/models`` and ``POST
/v1/chat/completions``. For each request it reads the role's view back out of the prompt, lets
the scripted research policy compute that role's delivery, and returns it in the reply envelope
— unless a fault applies: malformed JSON, a long rambling reply, schema violations, wrong role,
stale basis, HTTP 429 or 500, slow answers, a garbled body. It can also refuse ``response_format`` (a server without
structured outputs) and leave out ``usage``. It counts the tokens it reports. Given ``reply``, it
answers every request with that function's text instead (the judge tests script a model so).
"""

from __future__ import annotations

import json
import re
import select
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from ade_core.harness.roles import delivery_model
from ade_core.harness.scripted import ScriptedBackend
from ade_core.schemas.views import VIEW_MODELS

_VIEW = re.compile(r"## Your view\n\n```json\n(.*?)\n```\n\n## Reply schema", re.DOTALL)
FAULTS = (
    "malformed", "schema", "wrong_role", "stale", "http_429", "http_500", "slow", "garbled", "extra_text",
    "context_overflow", "rambling",
)  # fmt: skip
# How llama-cpp-python's server (0.3.16, FastAPI) answers a JSON-schema response_format: 500, not 400, its
# validation error and a traceback excerpt in the message. It serves {"type": "json_object", "schema": ...}.
LLAMA_CPP_PYTHON_500 = (
    500,
    {
        "error": {
            "message": "1 validation error:\n  {'type': 'literal_error', 'loc': ('body', 'response_format', 'type'), "
            "'msg': \"Input should be 'text' or 'json_object'\", 'input': 'json_schema', 'ctx': {'expected': "
            "\"'text' or 'json_object'\"}}\n\n  File \"/srv/llama_cpp/server/app.py\", line 376, in "
            "create_chat_completion\n    POST /v1/chat/completions",
            "type": "internal_server_error",
            "param": None,
            "code": None,
        }
    },
)
# An OpenAI-style context overflow: a 400 that has nothing to do with structured output.
CONTEXT_OVERFLOW_400 = (
    400,
    {
        "error": {
            "message": "This model's maximum context length is 2048 tokens. However, you requested 9000 tokens "
            "(8900 in the messages, 100 in the completion). Please reduce the length of the messages.",
            "type": "invalid_request_error",
            "param": "messages",
            "code": "context_length_exceeded",
        }
    },
)


@dataclass
class Fault:
    """Apply ``kind`` to the next ``times`` requests of ``role`` (any role: None) whose subject starts so."""

    kind: str
    role: str | None = None
    times: int = 1
    subject: str = ""

    def matches(self, role: str, subject: str) -> bool:
        return self.times > 0 and self.role in (None, role) and subject.startswith(self.subject)


@dataclass
class Received:
    """One request as the server saw it."""

    path: str
    body: dict[str, Any]
    role: str | None = None
    subject: str | None = None
    fault: str | None = None
    status: int = 200
    tokens: int = 0
    at: float = field(default_factory=time.monotonic)  # when the request was read
    cancelled_at: float | None = None  # a slow answer: when the client closed the connection, if it did

    @property
    def text(self) -> str:
        """Everything the client sent, as one string (for leak scans)."""
        return json.dumps(self.body, ensure_ascii=False)


@dataclass
class ServerState:
    """What the handlers share; tests read ``received`` and the ``*tokens_reported`` counts."""

    model: str = "ade-test-model"
    response_format: bool = True
    structured_refusal: tuple[int, dict[str, Any]] | None = None  # answer a json_schema request (only) with this
    usage: bool = True
    slow_s: float = 1.5
    delay_s: float = 0.0  # every chat request takes at least this long
    faults: list[Fault] = field(default_factory=list)
    edit: Callable[[str, dict[str, Any]], dict[str, Any]] | None = None
    reply: Callable[[dict[str, Any]], str] | None = None  # set: the model's text for any request (judge tests)
    received: list[Received] = field(default_factory=list)
    tokens_reported: int = 0
    prompt_tokens_reported: int = 0
    completion_tokens_reported: int = 0
    in_flight: int = 0
    max_in_flight: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def requests(self, role: str) -> list[Received]:
        return [r for r in self.received if r.role == role]


def _delivery(view_data: dict[str, Any]) -> dict[str, Any]:
    """The scripted policy's delivery for the view (the server's 'model')."""
    view = VIEW_MODELS[view_data["role"]].model_validate(view_data)
    return getattr(ScriptedBackend(), view.role)(view).model_dump(mode="json")


def _break_schema(role: str, view_data: dict[str, Any], delivery: dict[str, Any]) -> dict[str, Any]:
    model = delivery_model(VIEW_MODELS[role].model_validate(view_data))
    required = [name for name, f in model.model_fields.items() if f.is_required()]
    broken = {k: v for k, v in delivery.items() if k != required[0]}
    broken["unexpected_field"] = True
    return broken


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        """Keep test output clean."""

    def _send(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (a timeout test)
            pass

    def _stream(self, record: Received, reply: dict[str, Any], slow: bool) -> None:
        """``reply`` as server-sent events: the content in pieces, then usage when asked for; a slow one spreads
        them over ``slow_s`` and stops at the moment the client hangs up."""
        state = self.server.state
        content, usage = reply["choices"][0]["message"]["content"], reply.get("usage")
        pieces = [
            content[i : i + max(1, len(content) // 20)] for i in range(0, len(content), max(1, len(content) // 20))
        ]
        base = {key: reply[key] for key in ("id", "model", "created")} | {"object": "chat.completion.chunk"}
        events = [
            {**base, "choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}]} for piece in pieces
        ]
        events.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
        if usage is not None and record.body.get("stream_options", {}).get("include_usage"):
            events.append({**base, "choices": [], "usage": usage})
        try:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            for event in events:
                self.wfile.write(f"data: {json.dumps(event)}\n\n".encode())
                self.wfile.flush()
                if slow and (hung_up := self._hung_up_within(state.slow_s / len(events))) is not None:
                    record.cancelled_at = hung_up
                    break
            else:
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            record.cancelled_at = time.monotonic()
        self.close_connection = True
        if record.cancelled_at is not None and usage is not None:  # its usage chunk was never sent
            with state.lock:
                state.tokens_reported -= usage["total_tokens"]
                state.prompt_tokens_reported -= usage["prompt_tokens"]
                state.completion_tokens_reported -= usage["completion_tokens"]
            record.tokens = 0

    def _hung_up_within(self, seconds: float) -> float | None:
        """Wait up to ``seconds``; the moment the client closes the connection, if it does (else None)."""
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            readable, _, _ = select.select([self.connection], [], [], min(left, 0.05))
            if readable:
                try:
                    if self.connection.recv(1, socket.MSG_PEEK) == b"":
                        return time.monotonic()
                except (ConnectionResetError, OSError):
                    return time.monotonic()
        return None

    def _error(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        self._send(status, json.dumps({"error": {"message": message, "type": "test"}}).encode(), headers)

    def do_GET(self) -> None:
        state = self.server.state
        if self.path.rstrip("/") == "/v1/models":
            self._send(200, json.dumps({"object": "list", "data": [{"id": state.model, "object": "model"}]}).encode())
        else:
            self._error(404, f"no route {self.path}")

    def do_POST(self) -> None:
        state = self.server.state
        with state.lock:
            state.in_flight += 1
            state.max_in_flight = max(state.max_in_flight, state.in_flight)
        try:
            time.sleep(state.delay_s)
            self._answer()
        finally:
            with state.lock:
                state.in_flight -= 1

    def _answer(self) -> None:
        state = self.server.state
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
        record = Received(path=self.path, body=body)
        with state.lock:
            state.received.append(record)
        if self.path != "/v1/chat/completions":
            record.status = 404
            return self._error(404, f"no route {self.path}")
        if "response_format" in body and not state.response_format:
            record.status = 400
            return self._error(400, "response_format is not supported by this server")
        if body.get("response_format", {}).get("type") == "json_schema" and state.structured_refusal is not None:
            record.status, error = state.structured_refusal
            return self._send(record.status, json.dumps(error).encode())
        if state.reply is not None:  # one reply per asked-for choice (n), each its own call
            choices = [
                {"index": i, "message": {"role": "assistant", "content": state.reply(body)}, "finish_reason": "stop"}
                for i in range(int(body.get("n") or 1))
            ]
            return self._send(
                200,
                json.dumps(
                    {
                        "id": "chatcmpl-judge",
                        "object": "chat.completion",
                        "created": 0,
                        "model": body.get("model", state.model),
                        "choices": choices,
                    }
                ).encode(),
            )
        found = _VIEW.search(body["messages"][1]["content"])
        if not found:
            record.status = 400
            return self._error(400, "the test server found no view in the prompt")
        view_data = json.loads(found.group(1))
        role, subject = view_data["role"], view_data["subject"]
        record.role, record.subject = role, subject
        with state.lock:
            fault = next((f for f in state.faults if f.matches(role, subject)), None)
            if fault is not None:
                fault.times -= 1
                record.fault = fault.kind
        kind = fault.kind if fault else None
        if kind in ("http_429", "http_500"):
            record.status = int(kind[-3:])
            return self._error(record.status, "injected failure", {"Retry-After": "0"})
        if kind == "context_overflow":
            record.status, error = CONTEXT_OVERFLOW_400
            return self._send(record.status, json.dumps(error).encode())
        if kind == "slow" and not body.get("stream"):  # like a generating server: stop when the client hangs up
            record.cancelled_at = self._hung_up_within(state.slow_s)
            if record.cancelled_at is not None:
                return
        delivery = _delivery(view_data)
        if state.edit is not None:
            delivery = state.edit(role, delivery)
        envelope: dict[str, Any] = {
            "role": role,
            "subject": subject,
            "basis_revision": view_data["basis_revision"],
            "delivery": delivery,
        }
        if kind == "schema":
            envelope["delivery"] = _break_schema(role, view_data, delivery)
        elif kind == "wrong_role":
            envelope["role"] = "builder" if role != "builder" else "analyzer"
        elif kind == "stale":
            envelope["basis_revision"] = view_data["basis_revision"] - 1
        content = json.dumps(envelope)
        if kind == "malformed":
            content = "Here is my delivery: " + content[: len(content) // 2]
        elif kind == "rambling":  # a small model's long invalid reply, cut off by its max_tokens
            content = "Let me think about the delivery. " * 2000
        elif kind == "extra_text":
            content = f"<think>plan the answer</think>\n```json\n{content}\n```\nDone."
        reply: dict[str, Any] = {
            "id": f"chatcmpl-{len(state.received)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", state.model),
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
        }
        if state.usage:
            prompt = sum(len(m.get("content") or "") for m in body["messages"]) // 4
            completion = len(content) // 4 + 1
            reply["usage"] = {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
            }
            record.tokens = prompt + completion
            with state.lock:
                state.tokens_reported += record.tokens
                state.prompt_tokens_reported += prompt
                state.completion_tokens_reported += completion
        if body.get("stream"):
            return self._stream(record, reply, slow=kind == "slow")
        data = json.dumps(reply).encode()
        if kind == "garbled":
            data = data[: len(data) // 2]
            self._send(200, data)
            return
        self._send(200, data)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    state: ServerState


class ChatServer:
    """Start on enter, stop on exit; ``url`` is the API root to give as agents.base_url."""

    def __init__(self, **options: Any):
        self.state = ServerState(**options)
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.state = self.state
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def __enter__(self) -> ChatServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
