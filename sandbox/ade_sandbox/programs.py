"""Program runner for code graders: stdin/stdout programs and function-call tests.

Same isolation layers as strategies. Defaults follow the paper's LiveCodeBench procedure
(Appendix D.5): 6 s per test, 30 s for a program's whole test set.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any

from ade_sandbox.limits import Limits
from ade_sandbox.process import ChannelError, SandboxProcess
from ade_sandbox.results import SandboxResult, Status
from ade_sandbox.runner import classify_exit, resolve_level

PER_TEST_S = 6.0
OUTER_S = 30.0
PROGRAM_LIMITS = Limits(wall_s=PER_TEST_S, cpu_s=PER_TEST_S, memory_mb=1024, max_output_bytes=1 << 20)


def run_program(
    source: str,
    stdin: str = "",
    limits: Limits = PROGRAM_LIMITS,
    *,
    min_isolation: str = "process",
    level: str | None = None,
) -> SandboxResult:
    """Run ``source`` as ``__main__`` with ``stdin``; ok means exit code 0 within the limits."""
    chosen = resolve_level(min_isolation, level)
    started = time.monotonic()
    process = SandboxProcess.launch(chosen, limits, {"mode": "program", "source": source, "stdin": stdin}, {})
    status: Status = "ok"
    error: str | None = None
    try:
        deadline = process.started + limits.wall_s + 1.0  # the wall limit itself is enforced inside
        while process.next_message(deadline) is not None:  # "ready", then the exit
            pass
    except ChannelError as exc:
        status, error = "bad_output", str(exc)
    exit = process.close(grace_s=0)
    stdout, stderr = process.output()
    if status == "ok":
        if exit.returncode == 0 and exit.reason is None:
            pass
        elif exit.returncode is not None and exit.reason is None:
            last = stderr.strip().splitlines()[-1:] or [f"exit code {exit.returncode}"]
            status, error = "exception", last[0][:500]
        else:
            status, error = classify_exit(exit, limits, time.monotonic() - started)
    return SandboxResult(
        status=status,
        error=error,
        stdout=stdout,
        stderr=stderr,
        wall_s=time.monotonic() - started,
        cpu_s=exit.cpu_s,
        peak_memory_mb=exit.peak_memory_mb,
        isolation=chosen,
        exit_code=exit.returncode,
    )


@dataclass(frozen=True)
class ProgramTest:
    """One test: stdin in, expected stdout (compared after stripping trailing whitespace per line)."""

    stdin: str
    expected_stdout: str


@dataclass(frozen=True)
class FunctionTest:
    """One function-call test: ``name(*args)`` must equal ``expected`` (compared as JSON)."""

    name: str
    args: Sequence[Any]
    expected: Any


@dataclass(frozen=True)
class TestOutcome:
    """A graded test: passed or not, with the run that decided it."""

    passed: bool
    result: SandboxResult


def _normalize(text: str) -> list[str]:
    return [line.rstrip() for line in text.strip().splitlines()]


def _as_program(source: str, test: ProgramTest | FunctionTest) -> tuple[str, str]:
    if isinstance(test, ProgramTest):
        return source, test.stdin
    call = f"\n\nimport json as _j\nprint(_j.dumps({test.name}(*_j.loads({json.dumps(list(test.args))!r}))))\n"
    return source + call, ""


def _passed(test: ProgramTest | FunctionTest, result: SandboxResult) -> bool:
    if result.status != "ok":
        return False
    if isinstance(test, ProgramTest):
        return _normalize(result.stdout) == _normalize(test.expected_stdout)
    lines = result.stdout.strip().splitlines()
    try:
        return bool(lines) and json.loads(lines[-1]) == json.loads(json.dumps(test.expected))
    except ValueError:
        return False


def run_tests(
    source: str,
    tests: Sequence[ProgramTest | FunctionTest],
    *,
    per_test_s: float = PER_TEST_S,
    outer_s: float = OUTER_S,
    workers: int = 1,
    limits: Limits = PROGRAM_LIMITS,
    min_isolation: str = "process",
    level: str | None = None,
) -> list[TestOutcome]:
    """Run every test of one program, ``workers`` at a time, within one outer deadline.

    Tests that cannot start before the outer deadline are failed as ``timeout`` unrun.
    """
    deadline = time.monotonic() + outer_s

    def one(test: ProgramTest | FunctionTest) -> TestOutcome:
        left = deadline - time.monotonic()
        if left <= 0:
            skipped = SandboxResult(status="timeout", error=f"outer limit of {outer_s:g} s reached before this test")
            return TestOutcome(False, skipped)
        program, stdin = _as_program(source, test)
        budget = replace(limits, wall_s=min(per_test_s, left), cpu_s=per_test_s)
        result = run_program(program, stdin, budget, min_isolation=min_isolation, level=level)
        return TestOutcome(_passed(test, result), result)

    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        return list(pool.map(one, tests))
