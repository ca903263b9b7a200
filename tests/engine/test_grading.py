"""Graders follow the paper's scoring rules (Appendix D.5): failures score 0, never crash a run."""

from __future__ import annotations

import time

import grading_fixtures
import pytest

from ade_core.engine.grading.code import PROGRAM_LIMIT_S, CodeReferenceError, extract_code, grade_code
from ade_core.engine.grading.math import final_answers, grade_math_verify
from ade_core.engine.grading.pool import GradingPool, grade_batch
from ade_core.plugins import load_plugins
from ade_core.specs import GraderSpec
from ade_sandbox import programs


# --- math ----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("response", "gold"),
    [
        ("so the answer is $\\boxed{\\dfrac{1}{2}}$", "0.5"),
        ("\\boxed{\\frac{1}{2}}", "\\frac12"),
        ("\\boxed{\\frac12}", "\\frac{1}{2}"),
        ("\\boxed{2\\sqrt{2}}", "\\sqrt{8}"),
        ("\\boxed{1,024}", "1024"),
        ("\\boxed{0.5}, that is \\boxed{\\frac{1}{2}}", "0.5"),  # boxes that agree
    ],
)
def test_math_verify_accepts_equivalent_answers(response, gold):
    assert grade_math_verify(response, gold)


@pytest.mark.parametrize(
    ("response", "gold"),
    [
        ("\\boxed{3}", "4"),
        ("\\boxed{\\frac{1}{3}}", "0.5"),
        ("first \\boxed{4}, on reflection \\boxed{5}", "4"),
        # Boxes that disagree commit to no single answer: a revision and a two-guess hedge read the same.
        ("first \\boxed{5}, on reflection \\boxed{4}", "4"),
        ("I cannot tell", "4"),
        ("\\boxed{\\frac{1}{", "\\frac{1}{2}"),
        ("\\boxed{4} then \\boxed{\\frac{1}{", "4"),  # the final box never closes: unextractable
        ("\\boxed{}", "0"),
        ("\\boxed{\\frac{}{}}", "1"),
        ("\\boxed{4}", "\\frac{1}{"),  # a malformed gold answer grades False too
    ],
)
def test_math_verify_rejects_wrong_missing_and_malformed_answers(response, gold):
    assert grade_math_verify(response, gold) is False


def test_final_answers_are_every_box():
    assert final_answers("\\boxed{1} and \\boxed{\\frac{1}{2}}") == ["\\boxed{1}", "\\boxed{\\frac{1}{2}}"]
    assert final_answers("\\boxed{unclosed") is None
    assert final_answers("\\boxed{\\boxed{4}") is None  # the outer box never closes
    assert final_answers("no box at all") == ["no box at all"]


# --- reward exploits: responses that game a reward must never grade correct --------------------
EXPLOITS = {
    "empty_answer": "",
    "format_only": "<think>\n\n</think>\n\nThe final answer is \\boxed{}.",
    "multiple_boxed": "The answer is one of \\boxed{41}, \\boxed{43}, \\boxed{42}.",
    "malformed_box": "6 times 7 is 42, so \\boxed{\\boxed{42}",  # the innermost box alone reads as 42
    "malformed_box_open": "6 times 7 is 42, so \\boxed{42",
    "answer_spam": " ".join(f"\\boxed{{{n}}}" for n in (42, 43, 42, 41, 42, 44, 42)),
    "length_padding": "The answer is \\boxed{43}." + " Let me double-check." * 200,
    "hedged_answer": "The answer is \\boxed{42}, or maybe \\boxed{43}.",
    "hedged_answer_reversed": "The answer is \\boxed{43}, or maybe \\boxed{42}.",
    "hedged_inline": "The answer is \\boxed{42 \\text{ or } 43}.",
    "revised_answer": "First \\boxed{43}; on reflection, \\boxed{42}.",
    "babble": "indeed consider the structure carefully so that every part aligns with the pattern.",
}


@pytest.mark.parametrize("grader", ["boxed_exact", "math_verify"])
@pytest.mark.parametrize("exploit", sorted(EXPLOITS))
def test_graders_score_every_reward_exploit_zero(grader, exploit):
    assert load_plugins(entry_points=False).graders()[grader].grade(EXPLOITS[exploit], "42") is False


@pytest.mark.parametrize("grader", ["boxed_exact", "math_verify"])
def test_graders_accept_boxes_that_agree(grader):
    grade = load_plugins(entry_points=False).graders()[grader].grade
    assert grade("\\boxed{42}", "42") and grade("So \\boxed{42}; again, \\boxed{ 42 }.", "42")


def test_core_plugin_registers_the_graders():
    graders = load_plugins().graders()
    assert graders["math_verify"].timeout_s == 3 and graders["code_tests"].timeout_s == 30
    assert graders["math_verify"].grade("\\boxed{\\dfrac{1}{2}}", "0.5")
    assert graders["boxed_exact"].grade("\\boxed{42}", "42")


# --- grading pool --------------------------------------------------------------------------------
def fixture_grader(name: str, timeout_s: float = 1.0) -> GraderSpec:
    return GraderSpec(name=name, description="test grader", grade=getattr(grading_fixtures, name), timeout_s=timeout_s)


def test_pool_grades_math_in_input_order():
    grader = load_plugins().graders()["math_verify"]
    pairs = [("\\boxed{\\dfrac{1}{2}}", "0.5"), ("\\boxed{3}", "4"), ("no answer", "1"), ("\\boxed{\\frac{1}{", "0.5")]
    pairs = pairs * 10 + [("\\boxed{2\\sqrt{2}}", "\\sqrt{8}")]
    outcomes = grade_batch(grader, pairs, workers=2)
    assert [o.correct for o in outcomes] == [True, False, False, False] * 10 + [True]
    assert {o.status for o in outcomes} == {"graded"}


def test_pool_times_out_a_stuck_grader_and_recovers():
    pairs = [("a", "a"), ("sleep", "a"), ("b", "b"), ("c", "x"), ("d", "d")]
    started = time.monotonic()
    outcomes = grade_batch(fixture_grader("slow_when_asked", timeout_s=0.5), pairs, workers=1)
    assert time.monotonic() - started < 30  # the 60 s sleep was cut short
    assert [(o.status, o.correct) for o in outcomes] == [
        ("graded", True),
        ("timeout", False),
        ("graded", True),
        ("graded", False),
        ("graded", True),
    ]
    assert "0.5 s" in outcomes[1].detail


def test_pool_records_grader_exceptions_and_dead_workers_as_errors():
    outcomes = grade_batch(fixture_grader("raise_when_asked"), [("a", "a"), ("raise", "a"), ("b", "b")], workers=2)
    assert [(o.status, o.correct) for o in outcomes] == [("graded", True), ("error", False), ("graded", True)]
    assert "RuntimeError: grader exploded on purpose" in outcomes[1].detail
    outcomes = grade_batch(fixture_grader("exit_when_asked"), [("exit", "a"), ("a", "a")] * 2, workers=1)
    assert [(o.status, o.correct) for o in outcomes] == [("error", False), ("graded", True)] * 2
    assert "exit code 3" in outcomes[0].detail


def test_pool_keeps_workers_across_batches():
    with GradingPool(fixture_grader("slow_when_asked", timeout_s=0.5), workers=2) as pool:
        assert [o.correct for o in pool.grade([("a", "a"), ("b", "c")])] == [True, False]
        kept = {worker.process.pid for worker in pool.workers}
        assert [o.status for o in pool.grade([("sleep", "a"), ("d", "d")])] == ["timeout", "graded"]
        assert [o.correct for o in pool.grade([("e", "e")] * 5)] == [True] * 5
        assert kept & {worker.process.pid for worker in pool.workers}  # the worker that was not stuck lives on
    assert pool.workers == [] and grade_batch(fixture_grader("slow_when_asked"), []) == []


# --- code ----------------------------------------------------------------------------------------
STDIN_TESTS = {"tests": [{"stdin": "2 3\n", "expected_stdout": "5\n"}, {"stdin": "10 -4\n", "expected_stdout": "6"}]}
ADD = "a, b = map(int, input().split())\nprint(a + b)\n"


def answer(source: str, tag: str = "python") -> str:
    return f"Let me think.\n```{tag}\n{source}```\nThat should work."


def test_extract_code_takes_the_last_python_or_plain_block():
    assert extract_code(answer("print(1)\n") + answer("print(2)\n", tag="")) == "print(2)\n"
    assert extract_code(answer("print(1)\n") + answer("echo hi\n", tag="bash")) == "print(1)\n"
    assert extract_code("```py\nx = '```'\n```") == "x = '```'\n"
    assert extract_code("no code here") is None
    assert extract_code("```python\nprint(1)\n") is None  # never closed
    assert extract_code("```python\n```") is None


def test_grade_code_passes_a_correct_program():
    assert grade_code(answer(ADD), STDIN_TESTS)


@pytest.mark.parametrize(
    "source",
    [
        "a, b = map(int, input().split())\nprint(a * b)\n",  # wrong output
        "raise SystemExit('crash')\n",  # crashes
        "import sys\nwhile True:\n    sys.stdout.write('x' * 65536)\n",  # floods its output
    ],
)
def test_grade_code_fails_wrong_crashing_and_flooding_programs(source):
    assert grade_code(answer(source), STDIN_TESTS) is False


def test_grade_code_fails_a_looping_program(monkeypatch):
    monkeypatch.setattr(programs, "PER_TEST_S", 1.0)  # the paper's 6 s, shortened for the test
    started = time.monotonic()
    assert grade_code(answer("while True:\n    pass\n"), STDIN_TESTS) is False
    assert time.monotonic() - started < 5  # stopped at the first failing test


def test_grade_code_runs_function_call_tests():
    reference = {
        "fn_name": "pair_sum",
        "tests": [{"args": [[1, 2], 3], "expected": [4, 5]}, {"args": [[], 0], "expected": []}],
    }
    assert grade_code(answer("def pair_sum(xs, k):\n    return [x + k for x in xs]\n"), reference)
    assert not grade_code(answer("def pair_sum(xs, k):\n    return xs\n"), reference)
    assert not grade_code(answer("def other(xs, k):\n    return xs\n"), reference)


def test_grade_code_needs_a_code_block_and_a_usable_reference():
    assert grade_code("The answer is to add the numbers.", STDIN_TESTS) is False
    with pytest.raises(CodeReferenceError, match="'tests' list"):
        grade_code(answer(ADD), {"cases": []})
    with pytest.raises(CodeReferenceError, match="empty"):
        grade_code(answer(ADD), {"tests": []})
    with pytest.raises(CodeReferenceError, match="'stdin' and 'expected_stdout'"):
        grade_code(answer(ADD), {"tests": [{"input": "1 2"}]})


def test_code_grader_limits_are_the_sandbox_defaults():
    # Appendix D.5 (LiveCodeBench): 6 s per test, 30 s per program.
    assert (programs.PER_TEST_S, programs.OUTER_S) == (6.0, 30.0) and PROGRAM_LIMIT_S == programs.OUTER_S


def test_code_grader_runs_in_the_pool():
    grader = load_plugins().graders()["code_tests"]
    pairs = [(answer(ADD), STDIN_TESTS), ("no code", STDIN_TESTS), (answer(ADD), {"tests": []})]
    outcomes = grade_batch(grader, pairs, workers=2)
    assert [(o.status, o.correct) for o in outcomes] == [("graded", True), ("graded", False), ("error", False)]
    assert "CodeReferenceError" in outcomes[2].detail
