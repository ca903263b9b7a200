"""Mathematical-equivalence grading with math-verify (paper Appendix D.5: 3-second grading timeout).

The final answer is the response's ``\\boxed{...}``; math-verify decides whether it is equivalent
to the gold answer, so ``\\dfrac{1}{2}``, ``0.5`` and ``\\frac12`` all agree. Every box must be: a
response whose boxes disagree hedges between answers and scores 0 (see ``grading.boxed``).
"""

from __future__ import annotations

import threading
from typing import Any

from ade_core.engine.grading.boxed import BOX, boxed_answers
from ade_core.errors import AdeError

GRADING_TIMEOUT_S = 3


class MissingDependencyError(AdeError):
    """An optional dependency a requested feature needs is not installed."""


def final_answers(response: str) -> list[str] | None:
    """The parts of ``response`` to parse: each boxed answer, re-boxed; None when a box never closes.

    A response without any box is handed to math-verify whole, which finds an anchored
    answer ("the final answer is ...") or finds nothing.
    """
    answers = boxed_answers(response)
    if answers is None:
        return None  # Appendix D.5: an unextractable final answer scores 0
    if not answers:
        return [response]
    # Re-boxing keeps math-verify's boxed-answer normalization and parses each box alone; read
    # together, math-verify would take several boxes as one set.
    return [BOX + answer + "}" for answer in answers]


def gold_text(reference: Any) -> str:
    """The reference answer as math-verify input: bare LaTeX gains math delimiters."""
    text = str(reference).strip()
    if "$" in text or BOX in text:
        return text
    return f"${text}$"


def grade_math_verify(response: str, reference: Any) -> bool:
    """True when math-verify finds the response's final answer equivalent to the reference.

    Never raises for a bad response: malformed LaTeX, an unparsable gold answer or a math-verify
    timeout all score False. math-verify enforces its timeouts with SIGALRM, which only works in
    the main thread; elsewhere the limit is the caller's (``grading.pool`` kills the worker).
    """
    try:
        import math_verify
        from math_verify.errors import TimeoutException
    except ImportError:
        raise MissingDependencyError(
            "grader 'math_verify' needs the math-verify package; install it with: pip install 'ade-core[train]'"
        ) from None
    answer_texts = final_answers(response)
    if answer_texts is None:
        return False
    timeout = GRADING_TIMEOUT_S if threading.current_thread() is threading.main_thread() else None
    try:
        # math-verify's verify is asymmetric: the gold answer comes first.
        gold = math_verify.parse(gold_text(reference), parsing_timeout=timeout)
        if not gold:
            return False
        # The last box first: a wrong final answer needs no look at the others.
        for answer_text in reversed(answer_texts):
            answer = math_verify.parse(answer_text, parsing_timeout=timeout)
            if not answer or not math_verify.verify(gold, answer, timeout_seconds=timeout):
                return False
        return True
    except (Exception, TimeoutException):
        # TimeoutException derives from BaseException; a grading failure is a wrong answer, not a crash.
        return False
