"""The judge core: the one way any task's judge is asked.

``Judge`` takes one call — a list of ``{question, response, rubric}`` requests — validates every
request (a malformed one raises ``InvalidServiceRequest`` naming its field: the strategy's error),
answers repeated requests once, serves what its content-addressed cache already holds, sends the
rest to its provider as one batch, and records the call. The cache key is the digest of the
provider's settings (everything that decides an answer: provider, model, temperature, …) and the
normalised request, so a cached answer is exactly the answer the provider would give again.
Only ``completed`` answers are cached: a judge that was down is asked again next time.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any, Protocol

from pydantic import Field

from ade_core.judging.answers import COMPLETED, unavailable
from ade_core.judging.rubric import JudgeRequest, parse_request
from ade_core.schemas.common import Model, sha256_digest
from ade_sandbox import InvalidServiceRequest


class Provider(Protocol):
    """What answers a batch of valid requests, one answer per request, in order."""

    name: str

    def settings(self) -> dict[str, Any]:
        """Everything that decides an answer (keys the cache)."""

    def answer(self, requests: list[JudgeRequest]) -> list[dict[str, Any]]:
        """One ``completed`` or ``unavailable`` answer per request; never raises for a bad reply."""


class DisabledProvider:
    """Answers every request ``unavailable`` with one reason (e.g. judge enrichment is off)."""

    name = "disabled"

    def __init__(self, reason: str) -> None:
        self.reason = reason

    def settings(self) -> dict[str, Any]:
        return {"provider": self.name}

    def answer(self, requests: list[JudgeRequest]) -> list[dict[str, Any]]:
        return [unavailable(self.reason) for _ in requests]


class AnswerCache:
    """Completed answers by key, in memory and, given a directory, on disk (one JSON file per key)."""

    def __init__(self, directory: str | Path | None = None) -> None:
        self.directory = Path(directory) if directory is not None else None
        self._answers: dict[str, dict[str, Any]] = {}

    def get(self, key: str) -> dict[str, Any] | None:
        if key not in self._answers and self.directory is not None:
            path = self.directory / key[:2] / f"{key}.json"
            if path.is_file():
                self._answers[key] = json.loads(path.read_text(encoding="utf-8"))
        found = self._answers.get(key)
        return json.loads(json.dumps(found)) if found is not None else None  # a copy the caller may change

    def put(self, key: str, answer: dict[str, Any]) -> None:
        self._answers[key] = json.loads(json.dumps(answer))
        if self.directory is not None:
            path = self.directory / key[:2] / f"{key}.json"
            path.parent.mkdir(parents=True, exist_ok=True)
            temporary = path.with_name(f".{key}.{os.getpid()}.{threading.get_ident()}.tmp")  # writers never share one
            temporary.write_text(json.dumps(answer, sort_keys=True), encoding="utf-8")
            temporary.replace(path)

    def __len__(self) -> int:
        return len(self._answers)


class JudgeCall(Model):
    """The record of one judge call: what was asked, what came from the cache, what came back."""

    provider: str = Field(description="Provider name.")
    settings_digest: str = Field(description="Digest of the provider settings (part of every cache key).")
    requests: int = Field(description="Requests in the call.")
    unique: int = Field(description="Distinct requests among them.")
    cached: int = Field(description="Distinct requests answered from the cache.")
    asked: int = Field(description="Distinct requests sent to the provider.")
    completed: int = Field(description="Answers with status completed.")
    unavailable: int = Field(description="Answers with status unavailable.")
    seconds: float = Field(description="Wall time of the call.")


def request_key(settings_digest: str, request: JudgeRequest) -> str:
    """The content address (hex sha256) of a request's answer under given provider settings."""
    digest = sha256_digest({"settings": settings_digest, "request": request.model_dump(mode="json")})
    return digest.removeprefix("sha256:")


class Judge:
    """A judge service handler: ``judge(requests) -> answers`` over a provider, with cache and records."""

    def __init__(self, provider: Provider, cache: AnswerCache | None = None) -> None:
        self.provider = provider
        self.cache = cache if cache is not None else AnswerCache()
        self.settings_digest = sha256_digest(provider.settings())
        self.calls: list[JudgeCall] = []

    def __call__(self, requests: Any) -> list[dict[str, Any]]:
        started = time.monotonic()
        parsed = parse_requests(requests)
        keys = [request_key(self.settings_digest, request) for request in parsed]
        unique = dict(zip(keys, parsed, strict=True))
        answers: dict[str, dict[str, Any]] = {}
        for key in unique:
            hit = self.cache.get(key)
            if hit is not None:
                answers[key] = hit
        missing = [key for key in unique if key not in answers]
        fresh = self.provider.answer([unique[key] for key in missing]) if missing else []
        for key, answer in zip(missing, fresh, strict=True):
            answers[key] = answer
            if answer.get("status") == COMPLETED:
                self.cache.put(key, answer)
        result = [dict(answers[key]) for key in keys]
        statuses = [answer["status"] for answer in result]
        self.calls.append(
            JudgeCall(
                provider=self.provider.name,
                settings_digest=self.settings_digest,
                requests=len(result),
                unique=len(unique),
                cached=len(unique) - len(missing),
                asked=len(missing),
                completed=statuses.count(COMPLETED),
                unavailable=len(statuses) - statuses.count(COMPLETED),
                seconds=round(time.monotonic() - started, 6),
            )
        )
        return result


def parse_requests(requests: Any) -> list[JudgeRequest]:
    """Every request of one call, normalised; the first malformed one raises InvalidServiceRequest."""
    if not isinstance(requests, list):
        raise InvalidServiceRequest(
            "requests", f"a judge call takes one list of requests (got {type(requests).__name__}); judge([request])"
        )
    parsed, bad = [], []
    for index, request in enumerate(requests):
        try:
            parsed.append(parse_request(request, f"requests[{index}]"))
        except InvalidServiceRequest as exc:
            bad.append(exc)
    if bad:
        more = f" ({len(bad) - 1} more malformed request(s) in this call)" if len(bad) > 1 else ""
        raise InvalidServiceRequest(bad[0].field, bad[0].fix + more)
    return parsed
