"""A real OpenAI-compatible HTTP server for the generation tests, serving a model through HFGenerator.

It speaks ``POST /v1/chat/completions`` and ``POST /v1/completions`` on 127.0.0.1 (a free
port), so the client under test exercises real sockets, JSON and status codes. It serves one
model under a name, or (``load_models=True``) loads whichever model directory a request names,
as servers that load models by path do. It can be told to fail its first requests, to check the
client's retries; those answers carry ``Retry-After-Ms``, so retries wait milliseconds, not seconds.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any

from ade_core.engine.generation import SamplingParams
from ade_core.engine.generation.hf import HFGenerator


class _Server(ThreadingHTTPServer):
    """The listening socket plus what the handlers share."""

    daemon_threads = True
    generator: HFGenerator | None
    model_name: str
    load_models: bool
    loaded: dict[str, HFGenerator]
    failures_left: int
    fail_status: int
    received: list[dict[str, Any]]
    lock: threading.Lock


class _Handler(BaseHTTPRequestHandler):
    """One request: optional injected failure, then sampling through the server's generator."""

    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        """Keep test output clean."""

    def _reply(self, status: int, body: dict[str, Any], headers: dict[str, str] | None = None) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self) -> None:
        payload = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
        with self.server.lock:
            self.server.received.append({"path": self.path, "body": payload})
            fail = self.server.failures_left > 0
            self.server.failures_left -= 1 if fail else 0
        if fail:
            self._reply(self.server.fail_status, {"error": {"message": "injected failure"}}, {"Retry-After-Ms": "10"})
            return
        if self.path not in ("/v1/chat/completions", "/v1/completions"):
            self._reply(404, {"error": {"message": f"no route {self.path}"}})
            return
        generator = self._generator(str(payload.get("model")))
        if generator is None:
            self._reply(400, {"error": {"message": f"unknown model {payload.get('model')!r}"}})
            return
        try:
            params = SamplingParams(
                temperature=float(payload.get("temperature", 1.0)),
                top_p=float(payload.get("top_p", 1.0)),
                max_new_tokens=int(payload.get("max_tokens", 16)),
                k=int(payload.get("n", 1)),
                seed=int(payload.get("seed", 0)),
            )
        except ValueError as error:
            self._reply(400, {"error": {"message": str(error)}})
            return
        self._reply(200, self._complete(generator, payload, params))

    def _generator(self, model: str) -> HFGenerator | None:
        """The generator serving ``model``: the one model by its name, or a model directory loaded once."""
        server = self.server
        if not server.load_models:
            return server.generator if model == server.model_name else None
        with server.lock:
            if model not in server.loaded:
                if not (Path(model) / "config.json").is_file():
                    return None
                server.loaded[model] = HFGenerator(model)
            return server.loaded[model]

    def _complete(self, generator: HFGenerator, payload: dict[str, Any], params: SamplingParams) -> dict[str, Any]:
        chat = self.path == "/v1/chat/completions"
        prompt = generator.render(payload["messages"]) if chat else payload["prompt"]
        samples = generator.generate_texts([prompt], params)[0]
        choices = []
        for index, sample in enumerate(samples):
            content = {"message": {"role": "assistant", "content": sample.text}} if chat else {"text": sample.text}
            choices.append({"index": index, "finish_reason": sample.finish_reason, **content})
        prompt_tokens = len(generator.tokenizer(prompt, add_special_tokens=False)["input_ids"])
        completion_tokens = sum(sample.num_tokens for sample in samples)
        return {
            "id": f"cmpl-{len(self.server.received)}",
            "object": "chat.completion" if chat else "text_completion",
            "created": int(time.time()),
            "model": self.server.model_name,
            "choices": choices,
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        }


class OpenAIServer:
    """Context manager running the server in a background thread; ``base_url`` ends with ``/v1``."""

    def __init__(
        self,
        generator: HFGenerator | None = None,
        model_name: str = "tiny",
        *,
        load_models: bool = False,
        fail_first: int = 0,
        fail_status: int = 500,
    ) -> None:
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.generator = generator
        self._server.model_name = model_name
        self._server.load_models = load_models
        self._server.loaded = {}
        self._server.failures_left = fail_first
        self._server.fail_status = fail_status
        self._server.received = []
        self._server.lock = threading.Lock()
        self._thread = threading.Thread(target=self._server.serve_forever, name="openai-test-server", daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    @property
    def received(self) -> list[dict[str, Any]]:
        """Every request body the server got, injected failures included, in arrival order."""
        return self._server.received

    def __enter__(self) -> OpenAIServer:
        self._thread.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
        for generator in self._server.loaded.values():
            generator.close()
