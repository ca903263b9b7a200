"""The Judge service of Data Selection: rubric-scored evidence about one trajectory per request.

A selector awaits ``judge(requests)`` with ``{"question", "response", "rubric"}`` requests and
gets one answer per request: per-dimension scores on the rubric's own levels and their weighted
sum. The answer is evidence, not a selection decision (paper: Data Selection with Judge
enrichment). The offline provider is rule-based and sees only the request: it reads no file,
so world labels and gold answers cannot leak into a strategy through it.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Callable
from typing import Any

from pydantic import Field, ValidationError, field_validator, model_validator

from ade_core import BOX, INVALID_REQUEST, ConfigError, ExperimentConfig, Model, ServiceSpec, last_boxed
from ade_core import normalize_answer as normalize
from ade_core import solve_tiny_question as solve

WEIGHT_TOLERANCE = 1e-6
DISABLED_REASON = "judge enrichment is disabled in this experiment ([judge].enabled = false)"
THINK_OPEN, THINK_CLOSE = "<think>", "</think>"


class Dimension(Model):
    """One rubric dimension: an observable criterion scored on a fixed ladder of levels."""

    name: str = Field(description="Dimension name, unique within the rubric; keys the scores.")
    criterion: str = Field(description="An observable criterion a reader can check in the response.")
    levels: tuple[float, ...] = Field(description="Allowed scores, at least two, each in [0, 1], sorted ascending.")
    weight: float = Field(description="Share of the projected score, > 0; the rubric's weights sum to 1.")

    @field_validator("name")
    @classmethod
    def _named(cls, value: str) -> str:
        if not value.strip():
            raise ValueError(f"name is empty (got {value!r}); name what the dimension scores, e.g. 'correctness'")
        return value

    @field_validator("criterion")
    @classmethod
    def _observable(cls, value: str) -> str:
        if not value.strip():
            raise ValueError(
                f"criterion is empty (got {value!r}); state what a reader can observe, "
                "e.g. 'the think span is closed before the final answer'"
            )
        return value

    @field_validator("levels")
    @classmethod
    def _ladder(cls, value: tuple[float, ...]) -> tuple[float, ...]:
        outside = [level for level in value if not (math.isfinite(level) and 0 <= level <= 1)]
        if outside:
            raise ValueError(
                f"levels must lie in [0, 1] (got {outside} in {list(value)}); rescale them, e.g. [0, 0.5, 1]"
            )
        if len(set(value)) < 2:
            raise ValueError(
                f"levels need at least two distinct values to tell responses apart (got {list(value)}); "
                "add a lower or higher level, e.g. [0, 1]"
            )
        if list(value) != sorted(set(value)):
            raise ValueError(
                f"levels must be distinct and sorted ascending (got {list(value)}); write them as {sorted(set(value))}"
            )
        return value

    @field_validator("weight")
    @classmethod
    def _positive(cls, value: float) -> float:
        if not (math.isfinite(value) and value > 0):
            raise ValueError(f"weight must be > 0 (got {value}); give the dimension a positive share or drop it")
        return value

    def snap(self, value: float) -> float:
        """The allowed level nearest to ``value``; a tie goes to the lower level, so doubt never inflates."""
        return min(self.levels, key=lambda level: (abs(level - value), level))

    @property
    def middle(self) -> float:
        """The middle level (the lower middle one for an even count): the score of an unassessed dimension."""
        return self.levels[(len(self.levels) - 1) // 2]


class Rubric(Model):
    """What the judge scores: dimensions whose weights sum to one."""

    dimensions: tuple[Dimension, ...] = Field(description="Scored dimensions, at least one, names unique.")

    @field_validator("dimensions")
    @classmethod
    def _some(cls, value: tuple[Dimension, ...]) -> tuple[Dimension, ...]:
        if not value:
            raise ValueError("a rubric needs at least one dimension (got none); add one with its criterion and levels")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> Rubric:
        names = [d.name for d in self.dimensions]
        repeated = sorted({name for name in names if names.count(name) > 1})
        if repeated:
            raise ValueError(f"dimension names repeat {repeated}; give each dimension its own name")
        total = sum(d.weight for d in self.dimensions)
        if abs(total - 1) > WEIGHT_TOLERANCE:
            weights = {d.name: d.weight for d in self.dimensions}
            raise ValueError(
                f"dimension weights must sum to 1 (got {total:.6g} from {weights}); divide each weight by {total:.6g}"
            )
        return self


class JudgeRequest(Model):
    """One request: the question, the assistant response to judge, and the rubric to judge it by."""

    question: str = Field(description="The user turn the response answers.")
    response: str = Field(description="The assistant turn: a <think>...</think> span and a final answer.")
    rubric: Rubric = Field(description="Dimensions to score.")


def _reason(error: ValidationError) -> str:
    parts = []
    for item in error.errors():
        where = ".".join(str(part) for part in item["loc"]) or "request"
        message = item["msg"].removeprefix("Value error, ")
        if item["type"] == "missing":
            message = "required field is missing; add it"
        elif item["type"] == "extra_forbidden":
            message = "unknown field; a request has only question, response and rubric"
        parts.append(f"{where}: {message}")
    return "invalid judge request: " + "; ".join(parts)


# ---- the response's parts -------------------------------------------------------------------


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


# ---- the offline provider ----------------------------------------------------------------------


class OfflineJudge:
    """Rule-based judge with an imperfect correctness verdict, like an LLM judge's.

    A verdict is flipped with probability ``error_rate``, decided by a hash of the seed, question
    and response: the same request gets the same answer in any call and in any position.
    """

    def __init__(self, error_rate: float, seed: int) -> None:
        if not 0 <= error_rate <= 1:
            raise ConfigError(f"judge.error_rate must be in [0, 1] (got {error_rate}); e.g. 0.1")
        self.error_rate = error_rate
        self.seed = seed

    def __call__(self, requests: list[Any]) -> list[dict[str, Any]]:
        return [self.judge_one(request) for request in requests]

    def flipped(self, question: str, response: str) -> bool:
        """Whether this request's correctness verdict is wrong on purpose."""
        key = f"{self.seed}\x00{question}\x00{response}".encode()
        draw = int.from_bytes(hashlib.sha256(key).digest()[:8], "big") / 2**64
        return draw < self.error_rate

    def judge_one(self, request: Any) -> dict[str, Any]:
        # A malformed request is the strategy's error ("invalid"), never a judge that is down ("unavailable").
        if not isinstance(request, dict):
            return {
                "status": INVALID_REQUEST,
                "reason": f"a judge request is an object {{question, response, rubric}} (got {type(request).__name__})",
            }
        try:
            parsed = JudgeRequest.model_validate(request)
        except ValidationError as error:
            return {"status": INVALID_REQUEST, "reason": _reason(error)}
        scores: dict[str, float] = {}
        unassessed: list[str] = []
        for dimension in parsed.rubric.dimensions:
            found = detector_for(dimension)
            value = None if found is None else found[1](parsed.question, parsed.response)
            if found is None or value is None:
                scores[dimension.name] = dimension.middle
                why = "no offline detector matches it" if found is None else "the question cannot be re-derived"
                unassessed.append(f"{dimension.name!r} ({why}; scored at its middle level {dimension.middle})")
                continue
            if found[0] == "correctness" and self.flipped(parsed.question, parsed.response):
                value = 1 - value
            scores[dimension.name] = dimension.snap(value)
        weights = {d.name: d.weight for d in parsed.rubric.dimensions}
        return {
            "status": "completed",
            "scores_by_dimension": scores,
            "projected_score": sum(weights[name] * score for name, score in scores.items()),
            "fallback": bool(unassessed),
            "fallback_reason": ("unassessed dimensions: " + "; ".join(unassessed)) if unassessed else "",
        }


def _disabled(requests: list[Any]) -> list[dict[str, Any]]:
    return [{"status": "unavailable", "reason": DISABLED_REASON} for _ in requests]


def judge_service(config: ExperimentConfig) -> ServiceSpec:
    """The ``judge`` service of an experiment, from its ``[judge]`` table."""
    settings = config.judge
    if not settings.enabled:
        handler: Callable[[list[Any]], list[Any]] = _disabled
    elif settings.provider == "offline":
        handler = OfflineJudge(settings.error_rate, settings.seed)
    else:
        raise ConfigError(
            f"judge.provider = {settings.provider!r} needs the agents' OpenAI client, which is not available yet; "
            'set judge.provider = "offline" (the rule-based judge) or disable the judge (judge.enabled = false)'
        )
    return ServiceSpec(
        name="judge",
        description="Scores each {question, response, rubric} request per rubric dimension on the rubric's levels, "
        "with their weighted sum; 'unavailable' answers carry a reason and no score.",
        essential=settings.enabled,
        max_calls=settings.max_calls,
        max_items_per_call=settings.max_items_per_call,
        handler=handler,
    )
