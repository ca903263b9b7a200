"""The ``openai`` judge provider: any OpenAI-compatible chat-completions endpoint.

It uses the client the agents use (the sync ``openai`` client, our own bounded retries) with the
paper's review-provider settings: temperature 0, thinking disabled where the chat template
supports it (``chat_template_kwargs.enable_thinking``), at most three attempts per request,
bounded concurrency and a completion limit. A reply must be one JSON object giving every rubric
dimension one of its levels; anything else is retried, and after the last attempt the request is
``unavailable`` with the reason — as is a request whose endpoint timed out or refused.

What decides an answer (model, temperature, completion limit, thinking, prompt) is 𝓑's
``[judge]``; where the endpoint is and its key are operational (``JudgeEndpoint``).
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ade_core.judging.answers import completed, unavailable
from ade_core.judging.rubric import JudgeRequest, Rubric

if TYPE_CHECKING:
    import openai

PROMPT_VERSION = "ade.judge_prompt.v1"  # part of the cache key: a new prompt is a new judge
LOCAL_SERVER_KEY = "not-needed"  # local servers (vLLM, llama.cpp, Ollama) ignore the key; the client wants one
MAX_BACKOFF_S = 30.0
SYSTEM = (
    "You are a careful judge. Score the response against each rubric dimension, using only that dimension's "
    "allowed levels. Judge only what you can observe in the response. Reply with one JSON object and nothing "
    'else: {"scores": {"<dimension name>": <level>, ...}} with every dimension exactly once.'
)
_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL)


@dataclass(frozen=True)
class JudgeEndpoint:
    """Where the judge's model is served: operational, never part of 𝓑 (a key or a host changes no answer).

    Read from the environment by ``from_environment``: ``ADE_JUDGE_BASE_URL`` (API root with its
    prefix, e.g. http://127.0.0.1:8000/v1; unset: the openai client's default), ``ADE_JUDGE_API_KEY_ENV``
    (the variable holding the key, default OPENAI_API_KEY), ``ADE_JUDGE_TIMEOUT_S`` (default 120) and
    ``ADE_JUDGE_CONCURRENCY`` (requests in flight, default 128 as the paper's review provider).
    """

    base_url: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    timeout_s: float = 120.0
    concurrency: int = 128
    backoff_s: float = 1.0

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None) -> JudgeEndpoint:
        env = os.environ if environ is None else environ
        return cls(
            base_url=env.get("ADE_JUDGE_BASE_URL") or None,
            api_key_env=env.get("ADE_JUDGE_API_KEY_ENV") or "OPENAI_API_KEY",
            timeout_s=float(env.get("ADE_JUDGE_TIMEOUT_S") or 120.0),
            concurrency=max(1, int(env.get("ADE_JUDGE_CONCURRENCY") or 128)),
        )

    @property
    def where(self) -> str:
        return self.base_url or "the openai client's default endpoint"


class ReplyInvalid(ValueError):
    """A reply that is not the expected JSON (the reason goes into the next attempt's record)."""


def render_messages(request: JudgeRequest) -> list[dict[str, str]]:
    """The chat messages of one request: the rubric with its levels, the question, the response."""
    lines = []
    for dimension in request.rubric.dimensions:
        levels = ", ".join(f"{level:g}" for level in dimension.levels)
        lines.append(f"- {dimension.name} (weight {dimension.weight:g}): {dimension.criterion}. Levels: {levels}.")
        for level, standard in zip(dimension.levels, dimension.standards, strict=False):
            lines.append(f"    {level:g}: {standard}")
    user = (
        "## Rubric\n" + "\n".join(lines) + f"\n\n## Question\n{request.question}\n\n## Response\n{request.response}\n"
    )
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]


def read_scores(text: str, rubric: Rubric) -> dict[str, float]:
    """The per-dimension scores in a reply; raises ReplyInvalid naming what is wrong."""
    body = re.sub(r"<think>.*?</think>", "", text, flags=re.DOTALL).strip()
    fenced = _FENCE.search(body)
    if fenced:
        body = fenced.group(1).strip()
    start, end = body.find("{"), body.rfind("}")
    if start < 0 or end < start:
        raise ReplyInvalid(f"the reply holds no JSON object: {text[:120]!r}")
    try:
        data = json.loads(body[start : end + 1])
    except json.JSONDecodeError as exc:
        raise ReplyInvalid(f"the reply is not valid JSON ({exc.msg}): {text[:120]!r}") from None
    scores = data.get("scores", data) if isinstance(data, dict) else None
    if not isinstance(scores, dict):
        raise ReplyInvalid(f"the reply's scores are not an object: {text[:120]!r}")
    names = [d.name for d in rubric.dimensions]
    extra, missing = sorted(set(scores) - set(names)), [n for n in names if n not in scores]
    if extra or missing:
        raise ReplyInvalid(f"the reply must score exactly {names} (missing {missing}, unknown {extra})")
    result = {}
    for dimension in rubric.dimensions:
        value = scores[dimension.name]
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        if not ok or not any(abs(value - level) <= 1e-9 for level in dimension.levels):
            raise ReplyInvalid(f"{dimension.name} = {value!r} is not one of its levels {list(dimension.levels)}")
        result[dimension.name] = dimension.snap(float(value))
    return result


class OpenAIProvider:
    """Asks an OpenAI-compatible endpoint, one chat completion per request, ``concurrency`` at once."""

    name = "openai"

    def __init__(
        self,
        model: str,
        *,
        temperature: float = 0.0,
        max_tokens: int = 4096,
        attempts: int = 3,
        enable_thinking: bool | None = False,
        endpoint: JudgeEndpoint | None = None,
    ) -> None:
        self.model = model
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.attempts = attempts
        self.enable_thinking = enable_thinking
        self.endpoint = endpoint or JudgeEndpoint.from_environment()
        self._client: openai.OpenAI | None = None
        self._lock = threading.Lock()
        self.prompt_tokens = self.completion_tokens = 0

    def settings(self) -> dict[str, Any]:
        return {
            "provider": self.name,
            "model": self.model,
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "enable_thinking": self.enable_thinking,
            "prompt": PROMPT_VERSION,
        }

    def answer(self, requests: list[JudgeRequest]) -> list[dict[str, Any]]:
        import openai  # only when asked: loading plugins must not pay for the client (~1 s)

        key = os.environ.get(self.endpoint.api_key_env)
        if not key and self.endpoint.base_url is None:
            reason = (
                f"${self.endpoint.api_key_env} is not set; export the judge's API key there, or point "
                "ADE_JUDGE_BASE_URL at a local server"
            )
            return [unavailable(reason) for _ in requests]
        with self._lock:
            if self._client is None:
                self._client = openai.OpenAI(
                    base_url=self.endpoint.base_url,
                    api_key=key or LOCAL_SERVER_KEY,
                    timeout=self.endpoint.timeout_s,
                    max_retries=0,  # attempts are ours: bounded and recorded
                )
        if len(requests) <= 1:
            return [self.answer_one(request) for request in requests]
        with ThreadPoolExecutor(min(self.endpoint.concurrency, len(requests)), thread_name_prefix="ade-judge") as pool:
            return list(pool.map(self.answer_one, requests))

    def answer_one(self, request: JudgeRequest) -> dict[str, Any]:
        import openai

        body: dict[str, Any] = {
            "model": self.model,
            "messages": render_messages(request),
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
        }
        if self.enable_thinking is not None:
            body["extra_body"] = {"chat_template_kwargs": {"enable_thinking": self.enable_thinking}}
        reason = "no attempt was made"
        for attempt in range(self.attempts):
            if attempt:
                time.sleep(min(self.endpoint.backoff_s * 2 ** (attempt - 1), MAX_BACKOFF_S))
            try:
                assert self._client is not None
                completion = self._client.chat.completions.create(**body)
                self._count(completion)
                text = completion.choices[0].message.content or "" if completion.choices else ""
                return completed(read_scores(text, request.rubric), request.rubric)
            except ReplyInvalid as exc:
                reason = str(exc)
            except (openai.AuthenticationError, openai.PermissionDeniedError, openai.NotFoundError) as exc:
                return unavailable(
                    f"{self.endpoint.where} refused the judge request ({exc.status_code}): {exc.message}"
                )
            except openai.APIStatusError as exc:
                reason = f"{self.endpoint.where} answered {exc.status_code}: {exc.message}"
            except (openai.APIError, json.JSONDecodeError) as exc:  # timeouts, lost connections, cut-off bodies
                reason = f"{type(exc).__name__}: {exc}"
        return unavailable(f"the judge gave no valid answer in {self.attempts} attempt(s); last: {reason}")

    def _count(self, completion: Any) -> None:
        usage = getattr(completion, "usage", None)
        if usage is not None:
            with self._lock:
                self.prompt_tokens += usage.prompt_tokens or 0
                self.completion_tokens += usage.completion_tokens or 0
