"""Generation through any OpenAI-compatible server (vLLM serve, SGLang, TGI, llama.cpp, OpenAI itself).

Requests go through the ``openai`` client, which owns the connection pool, timeouts and retries
(429, 5xx, timeouts and lost connections, with exponential backoff that honours ``Retry-After``).
Without a tokenizer it calls ``/chat/completions`` and the server applies its chat template; with
``tokenizer_path`` it renders the template locally and calls ``/completions``, so evaluation sees
exactly the prompt text the model was trained on.
"""

from __future__ import annotations

import math
import os
import urllib.parse
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ade_core.engine.generation.base import (
    Conversation,
    FinishReason,
    GenerationError,
    Sample,
    SamplingParams,
    render_conversation,
    strip_suffix,
)
from ade_core.judging.openai_provider import LOCAL_SERVER_KEY

if TYPE_CHECKING:
    import openai

FINISH_REASONS: dict[str, FinishReason] = {"stop": "stop", "eos": "stop", "length": "length"}
CHARS_PER_TOKEN = 4  # rough English BPE ratio; only used when neither usage nor a tokenizer is available
_LOOPBACK = {"127.0.0.1", "localhost", "::1"}


class GenerationServerError(GenerationError):
    """An OpenAI-compatible server was unreachable, failed, or answered outside the protocol."""


class OpenAIGenerator:
    """Samples k responses per conversation from an OpenAI-compatible server, requests in parallel.

    ``base_url`` is given as to the OpenAI SDK, including the API prefix, e.g.
    ``http://127.0.0.1:8000/v1``. Conversation i is sampled with seed ``params.seed + i``, one
    request with ``n = k`` each, at most ``max_concurrency`` in flight. The client retries
    connection errors, timeouts, 429 and 5xx answers ``retries`` times; what is still failing then,
    and any other error answer, raises :class:`GenerationServerError` naming the URL. ``api_key``
    defaults to ``$OPENAI_API_KEY``. ``extra_body`` is merged into every request for
    server-specific options, e.g. ``{"skip_special_tokens": False}`` so vLLM keeps ``<think>``
    tokens in the text.
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
        self.timeout = timeout
        self.max_concurrency = max_concurrency
        self.retries = retries
        self.extra_body = dict(extra_body or {})
        self.chat_template_kwargs = dict(chat_template_kwargs or {})
        self.tokenizer: Any = None
        if tokenizer_path is not None:
            from transformers import AutoTokenizer

            self.tokenizer = AutoTokenizer.from_pretrained(tokenizer_path)
        import openai  # only when asked: importing the generation package must stay cheap

        key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
        # A server on this machine must never be reached through an environment proxy.
        loopback = parsed.hostname in _LOOPBACK
        self._client: openai.OpenAI | None = openai.OpenAI(
            base_url=self.base_url,
            api_key=key or LOCAL_SERVER_KEY,
            timeout=timeout,
            max_retries=retries,
            http_client=openai.DefaultHttpxClient(trust_env=False) if loopback else None,
        )

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
        import openai

        if self._client is None:
            raise GenerationServerError(f"the client of {self.base_url} is closed")
        request: dict[str, Any] = {
            "model": self.model,
            "n": params.k,
            "temperature": params.temperature,
            "top_p": params.top_p,
            "max_tokens": params.max_new_tokens,
            "seed": seed,
        }
        extra_body = dict(self.extra_body)
        if self.tokenizer is not None:
            url = f"{self.base_url}/completions"
            create: Any = self._client.completions.create
            request["prompt"] = render_conversation(self.tokenizer, conversation, self.chat_template_kwargs)
        else:
            url = f"{self.base_url}/chat/completions"
            create = self._client.chat.completions.create
            request["messages"] = [dict(message) for message in conversation]
            if self.chat_template_kwargs:  # the server renders the template (vLLM's request field)
                extra_body = {"chat_template_kwargs": dict(self.chat_template_kwargs), **extra_body}
        try:
            answer = create(**request, extra_body=extra_body or None)
        except openai.APIStatusError as error:
            reason = f"HTTP {error.status_code}: {error.message}"[:600]
            if error.status_code == 429 or error.status_code >= 500:
                raise self._exhausted(url, reason) from None
            hint = " (does base_url end with the API prefix, e.g. /v1?)" if error.status_code == 404 else ""
            raise GenerationServerError(f"POST {url} was rejected with {reason}{hint}") from None
        except openai.APIResponseValidationError as error:
            raise GenerationServerError(f"POST {url} answered outside the protocol: {error.message}") from None
        except openai.APIError as error:  # connection errors and timeouts, after the client's retries
            raise self._exhausted(url, f"{type(error).__name__}: {error}") from None
        return self._parse(url, answer, params.k)

    def _exhausted(self, url: str, reason: str) -> GenerationServerError:
        return GenerationServerError(
            f"POST {url} failed after {self.retries + 1} attempt(s), last: {reason}; check that the server is "
            f"running and that base_url ({self.base_url}) is right"
        )

    def _parse(self, url: str, answer: Any, k: int) -> list[Sample]:
        """Samples from a (chat) completions answer, in choice-index order."""
        choices = sorted(getattr(answer, "choices", None) or [], key=lambda choice: choice.index or 0)
        if len(choices) != k:
            raise GenerationServerError(
                f"POST {url} returned {len(choices)} choice(s) for n={k}; the server must support n > 1"
            )
        usage = getattr(answer, "usage", None)
        total = getattr(usage, "completion_tokens", None)
        samples = []
        for choice in choices:
            finish = FINISH_REASONS.get(choice.finish_reason)
            if finish is None:
                raise GenerationServerError(
                    f"POST {url} returned finish_reason={choice.finish_reason!r}; expected one of "
                    f"{sorted(FINISH_REASONS)}"
                )
            message = getattr(choice, "message", None)
            text = (message.content if message is not None else getattr(choice, "text", None)) or ""
            if self.tokenizer is not None:
                text = strip_suffix(text, [self.tokenizer.eos_token or ""])
            samples.append(Sample(text, self._count_tokens(text, finish, total, k), finish))
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
        """Close the client's connection pool; the generator is unusable afterwards."""
        if self._client is not None:
            self._client.close()
            self._client = None
