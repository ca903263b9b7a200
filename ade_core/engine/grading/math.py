"""Mathematical-equivalence grading with math-verify (paper Appendix D.5: 3-second grading timeout)."""

from __future__ import annotations

import threading

from ade_core.errors import AdeError

GRADING_TIMEOUT_S = 3


class MissingDependencyError(AdeError):
    """An optional dependency a requested feature needs is not installed."""


def grade_math_verify(response: str, reference: str) -> bool:
    """True when math-verify finds the response's final answer equivalent to the reference.

    math-verify enforces its timeouts with SIGALRM, which only works in the main thread;
    elsewhere the timeout is left to the caller's process-level limit.
    """
    try:
        import math_verify
    except ImportError:
        raise MissingDependencyError(
            "grader 'math_verify' needs the math-verify package; install it with: pip install 'ade-core[train]'"
        ) from None
    timeout = GRADING_TIMEOUT_S if threading.current_thread() is threading.main_thread() else None
    gold = math_verify.parse(f"${reference}$", parsing_timeout=timeout)
    answer = math_verify.parse(response, parsing_timeout=timeout)
    if not gold or not answer:
        return False
    return bool(math_verify.verify(gold, answer, timeout_seconds=timeout))
