"""The ``offline`` judge provider: rule-based detectors with an emulated error rate.

It sees only the request (it reads no file), so world labels and gold answers cannot leak into a
strategy through it. Each dimension goes to the detector its name (or, failing that, its
criterion) asks for: repetition, completeness, correctness (the answer re-derived from the
question by the tiny world's solver) or format; and, for Reward Design's process evidence,
derivation soundness, conclusion support and substantive relevance, which read the worked steps
of the think span (``steps.py``) against the question's own derivation (``tiny/solver.py``). A
dimension it cannot assess makes the whole answer ``unavailable`` with the reason: never a
made-up middle score, never a zero.
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Callable
from typing import Any

from ade_core.engine.grading.boxed import BOX, last_boxed, normalize
from ade_core.errors import ConfigError
from ade_core.judging.answers import completed, unavailable
from ade_core.judging.rubric import Dimension, JudgeRequest
from ade_core.judging.steps import Step, worked_steps
from ade_core.tiny.solver import derive, solve

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


# ---- process detectors: the working itself, re-derived from the question ----------------------


def _all_or_share(share: float) -> float:
    """1 when the share is whole, else the share capped at one half: one flaw never snaps to the top."""
    return 1.0 if share == 1 else min(share, 0.5)


def _working(response: str) -> tuple[str, str | None]:
    """The working and the final answer (None when the response was cut off): the think span and what
    follows it; without a think span (a model that answers in one turn), the text before the last box
    and the box on."""
    if THINK_OPEN in response:
        return _think_span(response), _final_answer(response)
    index = response.rfind(BOX)
    if index < 0:
        return response, None
    return response[:index], response[index:].strip()


@functools.lru_cache(maxsize=1024)  # the three process detectors read the same response in turn
def _steps(response: str) -> tuple[Step, ...]:
    working, answer = _working(response)
    return tuple(worked_steps(working, cut=answer is None))


def detect_derivation_soundness(question: str, response: str) -> float | None:
    """The share of the think span's worked steps that are sound: their arithmetic holds (columns
    included) and they reach a value of the question's own derivation from the numbers that step
    of the derivation works from. 1 when every step is sound, else the share capped at 0.5; 0 when
    there is no worked step. None when the question cannot be re-derived."""
    derivation = derive(question)
    if derivation is None:
        return None
    steps = _steps(response)
    if not steps:
        return 0.0
    sound = [step.holds and derivation.reaches(step.value, step.operands) for step in steps]
    return _all_or_share(sum(sound) / len(sound))


def detect_conclusion_support(question: str, response: str) -> float | None:
    """1 when the final boxed answer equals the result of the last worked step, 0.5 when the answer
    states that result without a box, 0 otherwise (another value, no answer, no worked step). None
    when the question cannot be re-derived."""
    if derive(question) is None:
        return None
    results = [step.value for step in _steps(response) if step.value is not None]
    answer = _working(response)[1]
    if not results or not answer:
        return 0.0
    boxed = last_boxed(answer)
    if boxed is not None:
        return float(normalize(boxed) == str(results[-1]))
    stated = re.findall(r"-?\d+", answer)
    return 0.5 if stated and stated[-1] == str(results[-1]) else 0.0


def detect_substantive_relevance(question: str, response: str) -> float | None:
    """The share of the question's numbers that the worked steps work from: 1 when all are used, else
    the share capped at 0.5; 0 when there is no worked step. None when the question cannot be
    re-derived."""
    derivation = derive(question)
    if derivation is None:
        return None
    used = {operand for step in _steps(response) for operand in step.operands}
    numbers = set(derivation.numbers)
    return _all_or_share(len(numbers & used) / len(numbers))


Detector = Callable[[str, str], float | None]
# Reward Design's process dimensions: an erring verdict moves one level (correctness flips outright).
PROCESS = ("derivation_soundness", "conclusion_support", "substantive_relevance")
# Checked in this order against the dimension's name, then its criterion: the first match wins. The
# process detectors come first, so that a criterion like "the boxed answer follows from the last
# step" is not taken for format, and every name is tried before any criterion.
DETECTORS: tuple[tuple[str, tuple[str, ...], Detector], ...] = (
    ("derivation_soundness", ("derivation", "sound"), detect_derivation_soundness),
    ("conclusion_support", ("conclusion", "follows from"), detect_conclusion_support),
    ("substantive_relevance", ("relevan", "substantive"), detect_substantive_relevance),
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
    """Rule-based judge with imperfect verdicts, like an LLM judge's.

    Each verdict errs with probability ``error_rate``, decided by a hash of the seed, the request
    and (for a process dimension) the detector: the same request gets the same answer in any call
    and in any position. An erring correctness verdict is flipped (right becomes wrong). An erring
    process verdict (derivation soundness, conclusion support, substantive relevance) moves one
    level along the dimension's ladder, as a judge that misreads a step is off by one grade rather
    than inverted: from the top it moves down, from the bottom up, from a middle level down or up
    with equal chance. Repetition, completeness and format are read exactly.
    """

    name = "offline"

    def __init__(self, error_rate: float, seed: int) -> None:
        if not 0 <= error_rate <= 1:
            raise ConfigError(f"judge.error_rate must be in [0, 1] (got {error_rate}); e.g. 0.1")
        self.error_rate = error_rate
        self.seed = seed

    def settings(self) -> dict[str, Any]:
        return {"provider": self.name, "error_rate": self.error_rate, "seed": self.seed}

    def _draw(self, *parts: str) -> float:
        """A uniform number in [0, 1) fixed by the seed and ``parts``."""
        key = "\x00".join((str(self.seed), *parts)).encode()
        return int.from_bytes(hashlib.sha256(key).digest()[:8], "big") / 2**64

    def flipped(self, question: str, response: str) -> bool:
        """Whether this request's correctness verdict is wrong on purpose."""
        return self._draw(question, response) < self.error_rate

    def misjudged(self, kind: str, dimension: Dimension, value: float, question: str, response: str) -> float:
        """A process verdict (a level of ``dimension``) as the emulated judge gives it: one level off
        with probability ``error_rate``, else unchanged."""
        draw = self._draw(kind, question, response)
        if draw >= self.error_rate:
            return value
        levels = dimension.levels
        index = levels.index(value)
        if index == len(levels) - 1 or (0 < index and draw < self.error_rate / 2):
            return levels[index - 1]
        return levels[index + 1]

    def answer(self, requests: list[JudgeRequest]) -> list[dict[str, Any]]:
        return [self.answer_one(request) for request in requests]

    def answer_one(self, request: JudgeRequest) -> dict[str, Any]:
        scores: dict[str, float] = {}
        for dimension in request.rubric.dimensions:
            found = detector_for(dimension)
            if found is None:
                known = ", ".join(kind for kind, _, _ in DETECTORS)
                return unavailable(
                    f"the offline judge has no detector for dimension {dimension.name!r}; name it after one of "
                    f"{known}, or use the openai provider"
                )
            kind, detector = found
            value = detector(request.question, request.response)
            if value is None:
                return unavailable(
                    f"the offline judge cannot re-derive the answer to this question, so dimension "
                    f"{dimension.name!r} is not assessed"
                )
            if kind == "correctness" and self.flipped(request.question, request.response):
                value = 1 - value
            level = dimension.snap(value)
            if kind in PROCESS:
                level = self.misjudged(kind, dimension, level, request.question, request.response)
            scores[dimension.name] = level
        return completed(scores, request.rubric)
