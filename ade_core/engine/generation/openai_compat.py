"""Generation through any OpenAI-compatible server (vLLM serve, SGLang, TGI, llama.cpp, OpenAI itself).

The client uses only the standard library, so no SDK is needed. Without a tokenizer it calls
``/chat/completions`` and the server applies its chat template; with ``tokenizer_path`` it
renders the template locally and calls ``/completions``, so evaluation sees exactly the prompt
text the model was trained on.
"""

from __future__ import annotations

import json
import math
import os
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from ade_core.engine.generation.base import (
    Conversation,
    FinishReason,
    GenerationError,
    Sample,
    SamplingParams,
    render_conversation,
    strip_suffix,
)

FINISH_REASONS: dict[str, FinishReason] = {"stop": "stop", "eos": "stop", "length": "length"}
CHARS_PER_TOKEN = 4  # rough English BPE ratio; only used when neither usage nor a tokenizer is available
_LOOPBACK = {"127.0.0.1", "localhost", "::1"}


class GenerationServerError(GenerationError):
    """An OpenAI-compatible server was unreachable, failed, or answered outside the protocol."""


class OpenAIGenerator:
    """Samples k responses per conversation from an OpenAI-compatible server, requests in parallel.

    ``base_url`` is given as to the OpenAI SDK, including the API prefix, e.g.
    ``http://127.0.0.1:8000/v1``. Conversation i is sampled with seed ``params.seed + i``.
    Connection errors, 429 and 5xx answers are retried ``retries`` times with exponential
    backoff; anything else fails at once with :class:`GenerationServerError` naming the URL.
    ``extra_body`` is merged into every request for server-specific options, e.g.
    ``{"skip_special_tokens": False}`` so vLLM keeps ``<think>`` tokens in the text.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        timeout: float = 60,
        max_concurrency: int = 8,
        tokenizer_path: str | Path | None = None,
        retries: int = 3,
        backoff_s: float = 0.5,
        extra_body: Mapping[str, Any] | None = None,
        chat_template_kwargs: Mapping[str, Any] | None = None,
    ) -> None:
        if max_concurrency < 1:
            raise ValueError(f"max_concurrency must be >= 1, got {max_concurrency}")
        if retries < 0:
            raise ValueError(f"retries must be >= 0, got {retries}")
        parsed = urllib.parse.urlparse(base_url)
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise ValueError(f"base_url must be an http(s) URL such as http://127.0.0.1:8000/v1, got {base_url!r}")
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.api_key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
        self.timeout = timeout
        self.max_concurrency = max_concurrency
        self.retries = retries
        self.backoff_s = backoff_s
        self.extra_body = dict(extra_body or {})
        self.chat_template_kwargs = dict(chat_template_kwargs or {})
        self.tokenizer: Any = None
        if tokenizer_path is not None:
            from transformers import AutoTokenizer

            self.tokenizer = AutoTokenizer.from_pretrained(tokenizer_path)
        # A server on this machine must never be reached through an environment proxy.
        handlers = [urllib.request.ProxyHandler({})] if parsed.hostname in _LOOPBACK else []
        self._opener = urllib.request.build_opener(*handlers)

    def generate(self, conversations: Sequence[Conversation], params: SamplingParams) -> list[list[Sample]]:
        """Sample ``params.k`` responses per conversation, returned in input order."""
        if not conversations:
            return []
        workers = min(self.max_concurrency, len(conversations))
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="ade-openai") as pool:
            futures = [
                pool.submit(self._sample_one, conversation, params, params.seed + index)
                for index, conversation in enumerate(conversations)
            ]
            return [future.result() for future in futures]

    def _sample_one(self, conversation: Conversation, params: SamplingParams, seed: int) -> list[Sample]:
        """One request with n = k for one conversation."""
        payload: dict[str, Any] = {
            "model": self.model,
            "n": params.k,
            "temperature": params.temperature,
            "top_p": params.top_p,
            "max_tokens": params.max_new_tokens,
            "seed": seed,
        }
        if self.tokenizer is not None:
            endpoint = "completions"
            payload["prompt"] = render_conversation(self.tokenizer, conversation, self.chat_template_kwargs)
        else:
            endpoint = "chat/completions"
            payload["messages"] = [dict(message) for message in conversation]
            if self.chat_template_kwargs:  # the server renders the template (vLLM's request field)
                payload["chat_template_kwargs"] = dict(self.chat_template_kwargs)
        payload.update(self.extra_body)
        url = f"{self.base_url}/{endpoint}"
        answer = self._post(url, payload)
        return self._parse(url, answer, params.k)

    def _post(self, url: str, payload: dict[str, Any]) -> dict[str, Any]:
        """POST JSON, retrying what a later attempt can fix; the decoded JSON answer."""
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        body = json.dumps(payload).encode()
        attempts = self.retries + 1
        reason = ""
        for attempt in range(attempts):
            if attempt:
                time.sleep(self.backoff_s * 2 ** (attempt - 1))
            request = urllib.request.Request(url, data=body, headers=headers, method="POST")
            try:
                with self._opener.open(request, timeout=self.timeout) as response:
                    raw = response.read()
            except urllib.error.HTTPError as error:
                detail = error.read().decode(errors="replace")[:500]
                reason = f"HTTP {error.code}: {detail}"
                if error.code == 429 or error.code >= 500:
                    continue
                hint = " (does base_url end with the API prefix, e.g. /v1?)" if error.code == 404 else ""
                raise GenerationServerError(f"POST {url} was rejected with {reason}{hint}") from None
            except (urllib.error.URLError, OSError) as error:
                reason = f"{type(error).__name__}: {getattr(error, 'reason', error)}"
                continue
            try:
                return json.loads(raw)
            except json.JSONDecodeError:
                raise GenerationServerError(f"POST {url} answered with invalid JSON: {raw[:200]!r}") from None
        raise GenerationServerError(
            f"POST {url} failed after {attempts} attempt(s), last: {reason}; check that the server is "
            f"running and that base_url ({self.base_url}) is right"
        )

    def _parse(self, url: str, answer: dict[str, Any], k: int) -> list[Sample]:
        """Samples from a (chat) completions answer, in choice-index order."""
        choices = sorted(answer.get("choices") or [], key=lambda choice: choice.get("index", 0))
        if len(choices) != k:
            raise GenerationServerError(
                f"POST {url} returned {len(choices)} choice(s) for n={k}; the server must support n > 1"
            )
        usage = answer.get("usage") or {}
        average = usage.get("completion_tokens")
        samples = []
        for choice in choices:
            raw_reason = choice.get("finish_reason")
            finish = FINISH_REASONS.get(raw_reason)
            if finish is None:
                raise GenerationServerError(
                    f"POST {url} returned finish_reason={raw_reason!r}; expected one of {sorted(FINISH_REASONS)}"
                )
            text = choice["message"].get("content") if "message" in choice else choice.get("text")
            text = text or ""
            if self.tokenizer is not None:
                text = strip_suffix(text, [self.tokenizer.eos_token or ""])
            samples.append(Sample(text, self._count_tokens(text, finish, average, k), finish))
        return samples

    def _count_tokens(self, text: str, finish: FinishReason, completion_tokens: int | None, k: int) -> int:
        """Tokens a response took, eos included.

        Exact with a local tokenizer (re-encoding the text) or when the server reports usage for
        n = 1; with n > 1 usage only gives the total, so each sample gets the average; without
        either it is an estimate of one token per CHARS_PER_TOKEN characters.
        """
        stop = 1 if finish == "stop" else 0
        if self.tokenizer is not None:
            return len(self.tokenizer(text, add_special_tokens=False)["input_ids"]) + stop
        if completion_tokens is not None:
            return round(completion_tokens / k)
        return math.ceil(len(text) / CHARS_PER_TOKEN) + stop

    def close(self) -> None:
        """Nothing to release: each call opens its own connections and worker threads."""
