"""The tiny-world solver re-derives every answer from the question text alone."""

from __future__ import annotations

import pytest

from ade_core.tiny.candidates import CHAT_TOPICS, WORDS
from ade_core.tiny.problems import generate_problems
from ade_core.tiny.solver import solve


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


def test_unrecognized_text_is_none():
    assert solve("Spell the word apple backwards.") is None
    assert all(solve(template.format(w=word)) is None for template, _ in CHAT_TOPICS for word in WORDS)
    assert solve("What is 3 + 4? Also, what is 5?") is None  # a template inside longer text is not the template
    assert solve("Solve for x: 2x + 1 = 4.") is None  # no integer solution


def test_spacing_and_case_do_not_matter():
    assert solve("  what is 12 +   30? ") == "42"
