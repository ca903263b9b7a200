"""The tiny-world solver re-derives every answer from the question text alone."""

from __future__ import annotations

import pytest

from ade_core.judging.steps import worked_steps
from ade_core.tiny.candidates import CHAT_TOPICS, WORDS
from ade_core.tiny.problems import generate_problems
from ade_core.tiny.solver import derive, solve


@pytest.mark.parametrize(
    "options",
    [{}, {"reworded": True}, {"levels": (4, 5)}, {"scale": 4}],
    ids=["standard", "reworded", "hard-levels", "wider-numbers"],
)
def test_solves_every_template(options):
    problems = generate_problems(3000, seed=5, **options)
    wrong = [(p.problem, p.answer, solve(p.problem)) for p in problems if solve(p.problem) != p.answer]
    assert wrong == []
    assert {p.subject for p in problems} == {
        "Prealgebra",
        "Algebra",
        "Number Theory",
        "Counting & Probability",
        "Geometry",
        "Intermediate Algebra",
        "Precalculus",
    }


@pytest.mark.parametrize("options", [{}, {"reworded": True}, {"levels": (4, 5)}], ids=["standard", "reworded", "hard"])
def test_the_derivation_takes_the_steps_of_the_worlds_solutions(options):
    for problem in generate_problems(500, seed=6, **options):
        derivation = derive(problem.problem)
        steps = worked_steps(problem.solution)
        assert len(steps) == len(derivation.steps), problem
        for step, (operands, value) in zip(steps, derivation.steps, strict=True):
            assert step.holds and step.value == value and set(operands) <= set(step.operands), (problem, step)


def test_unrecognized_text_is_none():
    assert solve("Spell the word apple backwards.") is None
    assert all(solve(template.format(w=word)) is None for template, _ in CHAT_TOPICS for word in WORDS)
    assert solve("What is 3 + 4? Also, what is 5?") is None  # a template inside longer text is not the template
    assert solve("Solve for x: 2x + 1 = 4.") is None  # no integer solution
    assert derive("Spell the word apple backwards.") is None and derive("Solve for x: 2x + 1 = 4.") is None


def test_spacing_and_case_do_not_matter():
    assert solve("  what is 12 +   30? ") == "42"
