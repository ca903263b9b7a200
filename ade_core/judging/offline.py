"""The ``offline`` judge provider: rule-based detectors with an emulated error rate.

It sees only the request (it reads no file), so world labels and gold answers cannot leak into a
strategy through it. Each dimension goes to the detector its name (or, failing that, its
criterion) asks for: repetition, completeness, correctness (the answer re-derived from the
question by the tiny world's solver) or format. A dimension it cannot assess makes the whole
answer ``unavailable`` with the reason: never a made-up middle score, never a zero.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from typing import Any

from ade_core.engine.grading.boxed import BOX, last_boxed, normalize
from ade_core.errors import ConfigError
from ade_core.judging.answers import completed, unavailable
from ade_core.judging.rubric import Dimension, JudgeRequest
from ade_core.tiny.solver import solve

THINK_OPEN, THINK_CLOSE = "<think>", "</think>"


def _think_span(response: str) -> str:
    """Text inside the first think span, up to its close or the end when it never closes."""
    start = response.find(THINK_OPEN)
    if start < 0:
        return ""
    body = response[start + len(THINK_OPEN) :]
    end = body.find(THINK_CLOSE)
    return body if end < 0 else body[:end]


def _final_answer(response: str) -> str | None:
    """Text after the closing think tag, or None when the span never closes."""
    _, closed, after = response.partition(THINK_CLOSE)
    return after.strip() if closed else None


def _is_math(question: str) -> bool:
    return solve(question) is not None or bool(re.search(r"\d", question))


# ---- detectors: each returns a value in [0, 1], or None when it cannot assess ----------------

_WORD = re.compile(r"[^\s;,]+")
LOOP_WINDOW = 2  # words per window: a step repeated three times already repeats pairs of words
LOOP_REPEATS = 3  # repeated windows that make a span a loop (score 0); clean tiny-world spans have 0-1


def detect_repetition(question: str, response: str) -> float:
    """1 when no window of words recurs in the think span, falling to 0 at LOOP_REPEATS recurrences."""
    words = _WORD.findall(_think_span(response))
    seen: set[tuple[str, ...]] = set()
    repeats = 0
    for index in range(len(words) - LOOP_WINDOW + 1):
        window = tuple(words[index : index + LOOP_WINDOW])
        repeats += window in seen
        seen.add(window)
    return max(0.0, 1 - repeats / LOOP_REPEATS)


def detect_format(question: str, response: str) -> float:
    """1 for exactly one closed think span then a non-empty answer (boxed for math), 0.5 when only
    the box is missing, else 0."""
    answer = _final_answer(response)
    one_span = response.count(THINK_OPEN) == 1 and response.count(THINK_CLOSE) == 1
    if not one_span or response.find(THINK_OPEN) > response.find(THINK_CLOSE) or not answer:
        return 0.0
    return 0.5 if _is_math(question) and last_boxed(answer) is None else 1.0


def detect_completeness(question: str, response: str) -> float:
    """1 when the think span closes and an answer follows in full, 0.5 when the answer is empty or
    its box is cut off, 0 when the span never closes (the response ran past its cap)."""
    answer = _final_answer(response)
    if answer is None:
        return 0.0
    cut_box = BOX in answer and last_boxed(answer) is None
    return 0.5 if not answer or cut_box else 1.0


def detect_correctness(question: str, response: str) -> float | None:
    """1 when the last boxed answer equals the answer re-derived from the question, else 0; None when
    the question is not one the solver can re-derive."""
    expected = solve(question)
    if expected is None:
        return None
    answer = last_boxed(response)
    return float(answer is not None and normalize(answer) == expected)


Detector = Callable[[str, str], float | None]
# Checked in this order against the dimension's name, then its criterion: the first match wins.
DETECTORS: tuple[tuple[str, tuple[str, ...], Detector], ...] = (
    ("repetition", ("repet", "repeat", "loop"), detect_repetition),
    ("completeness", ("complete", "truncat", "cut off", "unfinished", "unclosed"), detect_completeness),
    ("correctness", ("correct", "accura", "wrong"), detect_correctness),
    ("format", ("format", "box", "structure", "well-formed"), detect_format),
)


def detector_for(dimension: Dimension) -> tuple[str, Detector] | None:
    """The detector a dimension's name (or, failing that, its criterion) asks for, or None."""
    for text in (dimension.name, dimension.criterion):
        lowered = text.lower()
        for kind, keywords, detector in DETECTORS:
            if any(keyword in lowered for keyword in keywords):
                return kind, detector
    return None


class OfflineProvider:
    """Rule-based judge with an imperfect correctness verdict, like an LLM judge's.

    A verdict is flipped with probability ``error_rate``, decided by a hash of the seed, question
    and response: the same request gets the same answer in any call and in any position.
    """

    name = "offline"

    def __init__(self, error_rate: float, seed: int) -> None:
        if not 0 <= error_rate <= 1:
            raise ConfigError(f"judge.error_rate must be in [0, 1] (got {error_rate}); e.g. 0.1")
        self.error_rate = error_rate
        self.seed = seed

    def settings(self) -> dict[str, Any]:
        return {"provider": self.name, "error_rate": self.error_rate, "seed": self.seed}

    def flipped(self, question: str, response: str) -> bool:
        """Whether this request's correctness verdict is wrong on purpose."""
        key = f"{self.seed}\x00{question}\x00{response}".encode()
        draw = int.from_bytes(hashlib.sha256(key).digest()[:8], "big") / 2**64
        return draw < self.error_rate

    def answer(self, requests: list[JudgeRequest]) -> list[dict[str, Any]]:
        return [self.answer_one(request) for request in requests]

    def answer_one(self, request: JudgeRequest) -> dict[str, Any]:
        scores: dict[str, float] = {}
        for dimension in request.rubric.dimensions:
            found = detector_for(dimension)
            if found is None:
                return unavailable(
                    f"the offline judge has no detector for dimension {dimension.name!r}; name it "
                    "after repetition, completeness, correctness or format, or use the openai provider"
                )
            value = found[1](request.question, request.response)
            if value is None:
                return unavailable(
                    f"the offline judge cannot re-derive the answer to this question, so dimension "
                    f"{dimension.name!r} is not assessed"
                )
            if found[0] == "correctness" and self.flipped(request.question, request.response):
                value = 1 - value
            scores[dimension.name] = dimension.snap(value)
        return completed(scores, request.rubric)
