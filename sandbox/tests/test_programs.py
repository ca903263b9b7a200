"""The program runner code graders use: stdin/stdout programs, function tests, timeouts, batches."""

from __future__ import annotations

import time

from ade_sandbox import Limits
from ade_sandbox.programs import FunctionTest, ProgramTest, run_program, run_tests


def test_stdin_stdout_program():
    result = run_program("n = int(input())\nprint(n * 2)\n", "21\n")
    assert result.status == "ok" and result.stdout == "42\n" and result.exit_code == 0


def test_runtime_error_and_exit_code():
    result = run_program("import sys\nprint('partial')\nsys.exit(3)\n")
    assert result.status == "exception" and result.exit_code == 3 and result.stdout == "partial\n"
    error = run_program("raise ValueError('boom')\n")
    assert error.status == "exception" and error.error == "ValueError: boom"


def test_program_timeouts():
    assert run_program("while True:\n    pass\n", limits=Limits(wall_s=1, cpu_s=5)).status == "timeout"
    assert run_program("while True:\n    pass\n", limits=Limits(wall_s=5, cpu_s=1)).status == "cpu_timeout"


def test_program_tests_with_workers():
    source = "a, b = map(int, input().split())\nprint(a + b)\n"
    tests = [ProgramTest(f"{i} {i}", str(2 * i)) for i in range(6)] + [ProgramTest("1 1", "3")]
    outcomes = run_tests(source, tests, workers=2)
    assert [o.passed for o in outcomes] == [True] * 6 + [False]


def test_function_call_tests():
    source = "def add(a, b):\n    return a + b\n"
    outcomes = run_tests(source, [FunctionTest("add", [2, 3], 5), FunctionTest("add", [[1], [2]], [1, 2]),
                                  FunctionTest("add", [1, 1], 3)])  # fmt: skip
    assert [o.passed for o in outcomes] == [True, True, False]


def test_per_test_and_outer_timeouts():
    source = "import time\nn = int(input())\ntime.sleep(n)\nprint(n)\n"
    started = time.monotonic()
    outcomes = run_tests(source, [ProgramTest("0", "0"), ProgramTest("5", "5"), ProgramTest("5", "5")],
                         per_test_s=1, outer_s=1.5)  # fmt: skip
    assert [o.passed for o in outcomes] == [True, False, False]
    assert outcomes[1].result.status == "timeout" and outcomes[2].result.status == "timeout"
    assert time.monotonic() - started < 5
