"""Grading code answers by running the response's last code block against the problem's tests.

Follows the paper's LiveCodeBench procedure (Appendix D.5): 6 s per test, 30 s per program,
every test must pass, and code that cannot be extracted or run scores 0.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ade_core.errors import AdeError

if TYPE_CHECKING:
    from ade_sandbox.programs import FunctionTest, ProgramTest

# The sandbox's own program-level limit (ade_sandbox.programs.OUTER_S); kept here so registering
# the grader does not import the sandbox on every CLI start.
PROGRAM_LIMIT_S = 30.0

# A fence line, an optional language tag, the body, and a closing fence on its own line start.
FENCE = re.compile(r"^[ \t]*```[ \t]*([\w+#.-]*)[^\n]*\n(.*?)^[ \t]*```", re.DOTALL | re.MULTILINE)
PYTHON_TAGS = frozenset({"", "python", "python3", "py"})


class CodeReferenceError(AdeError):
    """A benchmark row's reference is not a test list the code grader can run."""


def extract_code(response: str) -> str | None:
    """The body of the last ```python (or untagged) fenced block in ``response``, or None.

    Blocks tagged with another language are skipped; a fence left open is not a block.
    """
    bodies = [match.group(2) for match in FENCE.finditer(response) if match.group(1).lower() in PYTHON_TAGS]
    if not bodies or not bodies[-1].strip():
        return None
    return bodies[-1]


def code_tests(reference: Any) -> list[ProgramTest | FunctionTest]:
    """The tests a reference describes: stdin/stdout tests, or function-call tests under ``fn_name``."""
    from ade_sandbox.programs import FunctionTest, ProgramTest

    rows = reference.get("tests") if isinstance(reference, Mapping) else None
    if not isinstance(rows, Sequence) or isinstance(rows, str):
        raise CodeReferenceError(
            f"code reference must be a mapping with a 'tests' list (got {str(reference)[:200]!r}); "
            'use {"tests": [{"stdin": ..., "expected_stdout": ...}]} or '
            '{"fn_name": ..., "tests": [{"args": [...], "expected": ...}]}'
        )
    if not rows:
        raise CodeReferenceError("code reference has an empty 'tests' list; a problem needs at least one test")
    name = reference.get("fn_name")
    try:
        if name:
            return [FunctionTest(name=str(name), args=list(row["args"]), expected=row["expected"]) for row in rows]
        return [ProgramTest(stdin=str(row["stdin"]), expected_stdout=str(row["expected_stdout"])) for row in rows]
    except (KeyError, TypeError) as exc:
        wanted = "'args' and 'expected'" if name else "'stdin' and 'expected_stdout'"
        raise CodeReferenceError(f"a code test lacks {wanted} ({exc!r}); every test row needs both") from None


def grade_code(response: str, reference: Any) -> bool:
    """True when the response's last code block passes every test of the reference.

    Tests run one at a time in the sandbox, sharing one outer deadline, and grading stops at
    the first failure: one failing test already makes the answer wrong. Wrong output, a crash,
    a timeout or an output flood is a failed test, never an exception. A malformed reference
    raises ``CodeReferenceError`` (a benchmark defect, not a wrong answer).
    """
    from ade_sandbox import programs

    tests = code_tests(reference)
    source = extract_code(response)
    if source is None:
        return False
    deadline = time.monotonic() + programs.OUTER_S
    for test in tests:
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        (outcome,) = programs.run_tests(source, [test], per_test_s=programs.PER_TEST_S, outer_s=left)
        if not outcome.passed:
            return False
    return True


_last_score: tuple[tuple[str, str], float] | None = None  # the worker scores, then grades, the same pair


def score_code(response: str, reference: Any) -> float:
    """The share of the reference's tests the response's last code block passes (0 without code).

    Every test runs, one at a time in the sandbox under one outer deadline; tests the deadline leaves
    unrun count as failed. A continuous score for coverage@k; ``grade_code_fraction`` calls the same
    pair correct only when every test passes.
    """
    global _last_score
    from ade_sandbox import programs

    tests = code_tests(reference)
    source = extract_code(response)
    passed = 0
    if source is not None:
        deadline = time.monotonic() + programs.OUTER_S
        for test in tests:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            (outcome,) = programs.run_tests(source, [test], per_test_s=programs.PER_TEST_S, outer_s=left)
            passed += outcome.passed
    value = passed / len(tests) if tests else 0.0
    _last_score = ((response, repr(reference)), value)
    return value


def grade_code_fraction(response: str, reference: Any) -> bool:
    """Correct when every test passes; reuses the score just computed for this pair rather than rerunning."""
    if _last_score is not None and _last_score[0] == (response, repr(reference)):
        return _last_score[1] == 1.0
    return score_code(response, reference) == 1.0
