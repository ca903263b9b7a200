"""Mathematical-equivalence grading with math-verify (paper Appendix D.5: 3-second grading timeout).

The final answer is the response's last ``\\boxed{...}``; math-verify decides whether it is
equivalent to the gold answer, so ``\\dfrac{1}{2}``, ``0.5`` and ``\\frac12`` all agree.
"""

from __future__ import annotations

import threading
from typing import Any

from ade_core.engine.grading.boxed import BOX, last_boxed
from ade_core.errors import AdeError

GRADING_TIMEOUT_S = 3


class MissingDependencyError(AdeError):
    """An optional dependency a requested feature needs is not installed."""


def final_answer(response: str) -> str | None:
    """The part of ``response`` to parse: its last boxed answer, re-boxed; None when that box never closes.

    A response without any box is handed to math-verify whole, which finds an anchored
    answer ("the final answer is ...") or finds nothing.
    """
    answer = last_boxed(response)
    if answer is not None:
        # Re-boxing keeps math-verify's boxed-answer normalization and drops every earlier box,
        # which it would otherwise read together with the last one as a set.
        return BOX + answer + "}"
    if BOX in response:
        return None  # Appendix D.5: an unextractable final answer scores 0
    return response


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
    answer_text = final_answer(response)
    if answer_text is None:
        return False
    timeout = GRADING_TIMEOUT_S if threading.current_thread() is threading.main_thread() else None
    try:
        # math-verify's verify is asymmetric: the gold answer comes first.
        gold = math_verify.parse(gold_text(reference), parsing_timeout=timeout)
        answer = math_verify.parse(answer_text, parsing_timeout=timeout)
        if not gold or not answer:
            return False
        return bool(math_verify.verify(gold, answer, timeout_seconds=timeout))
    except (Exception, TimeoutException):
        # TimeoutException derives from BaseException; a grading failure is a wrong answer, not a crash.
        return False
