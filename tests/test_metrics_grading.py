"""Generic metrics and graders that ade-core provides to every task."""

from __future__ import annotations

import pytest

from ade_core.engine.grading.boxed import boxed_answers, grade_boxed_exact, last_boxed
from ade_core.engine.metrics import average_at_k, pass_at_k
from ade_core.plugins import load_plugins


def test_pass_and_average_at_k():
    matrix = [[True, False, False, False], [False] * 4, [True] * 4]
    assert pass_at_k(matrix) == pytest.approx(200 / 3)
    assert average_at_k(matrix) == pytest.approx(100 * (0.25 + 0 + 1) / 3)


def test_metrics_refuse_empty_input():
    with pytest.raises(ValueError, match="no problems"):
        pass_at_k([])
    with pytest.raises(ValueError, match="no samples"):
        average_at_k([[True], []])


def test_last_boxed_handles_nesting():
    assert last_boxed("a \\boxed{1} then \\boxed{\\frac{1}{2}}") == "\\frac{1}{2}"
    assert last_boxed("no box") is None and last_boxed("\\boxed{open") is None


def test_boxed_exact():
    assert grade_boxed_exact("<think>...</think> \\boxed{1,024}", "1024")
    assert grade_boxed_exact("\\boxed{ 42. }", "42")
    assert not grade_boxed_exact("\\boxed{41}", "42") and not grade_boxed_exact("42", "42")
    assert grade_boxed_exact("\\boxed{42} and once more \\boxed{42.}", "42")


def test_boxed_exact_refuses_disagreeing_and_unclosed_boxes():
    assert not grade_boxed_exact("\\boxed{41} or maybe \\boxed{42}", "42")  # hedged: the last box is right
    assert not grade_boxed_exact("\\boxed{\\boxed{42}", "42")  # the outer box never closes
    assert not grade_boxed_exact("\\boxed{42} \\boxed{", "42")


def test_boxed_answers_are_the_top_level_boxes():
    assert boxed_answers("\\boxed{1} then \\boxed{\\frac{1}{2}}") == ["1", "\\frac{1}{2}"]
    assert boxed_answers("\\boxed{\\boxed{2}}") == ["\\boxed{2}"]
    assert boxed_answers("no box") == [] and boxed_answers("\\boxed{1} \\boxed{open") is None


def test_math_verify_grader_checks_equivalence():
    grade = load_plugins().graders()["math_verify"].grade
    assert grade("so the answer is \\boxed{\\frac{1}{2}}", "0.5")
    assert grade("\\boxed{2\\sqrt{2}}", "\\sqrt{8}")
    assert not grade("\\boxed{3}", "4")
    assert not grade("I cannot tell", "4")
