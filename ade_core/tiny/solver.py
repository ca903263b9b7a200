"""Re-derive a tiny-world problem's integer answer, and its worked values, from its question text alone.

One pattern per template in ``problems.py`` (standard and reworded surface forms), with the value
each top-level step of the world's worked solution reaches (a process judge checks a response's
steps against them). The solver
parses only the question: it reads no world file and no label, so a judge built on it sees
exactly what a strategy sees (the request), never the ground truth.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

_N = r"(-?\d+)"


def _exact_quotient(numerator: int, denominator: int) -> int | None:
    if denominator == 0 or numerator % denominator:
        return None
    return numerator // denominator


def _solve_linear(a: int, b: int, c: int) -> tuple[int, ...] | None:
    x = _exact_quotient(c - b, a)
    return None if x is None else (c - b, x)


def _remainder(a: int, b: int) -> tuple[int, ...] | None:
    return (b * (a // b), a % b) if b > 0 else None


def _pattern(template: str) -> re.Pattern[str]:
    """A template with ``{}`` for each integer, matched literally otherwise (case and spacing aside)."""
    parts = [re.escape(part).replace(r"\ ", r"\s+") for part in template.split("{}")]
    return re.compile(r"\s*" + _N.join(parts) + r"\s*", re.IGNORECASE)


# Each template's worked values in the order the tiny world's solutions reach them: the result of
# every top-level step, the last being the answer (None when the question has no integer answer).
Rule = tuple[re.Pattern[str], Callable[..., tuple[int, ...] | None]]

RULES: tuple[Rule, ...] = tuple(
    (_pattern(template), compute)
    for template, compute in (
        # Prealgebra
        ("What is {} + {}?", lambda a, b: (a + b,)),
        ("Add {} and {}.", lambda a, b: (a + b,)),
        ("What is {} - {}?", lambda a, b: (a - b,)),
        ("Take {} away from {}.", lambda b, a: (a - b,)),
        # Algebra: a x + b = c
        ("Solve for x: {}x + {} = {}.", _solve_linear),
        ("Find x if {}x plus {} equals {}.", _solve_linear),
        # Number Theory
        ("What is the remainder when {} is divided by {}?", _remainder),
        ("Divide {} by {}. What is left over?", _remainder),
        # Counting & Probability
        ("How many ways can 2 people be chosen from {}?", lambda n: (n * (n - 1), n * (n - 1) // 2)),
        ("{} players each shake hands once. How many handshakes?", lambda n: (n * (n - 1), n * (n - 1) // 2)),
        ("A menu has {} soups and {} salads. How many soup-and-salad meals are there?", lambda a, b: (a * b,)),
        ("Pick one of {} hats and one of {} scarves. How many outfits?", lambda a, b: (a * b,)),
        # Geometry
        ("A rectangle is {} by {}. What is its area?", lambda a, b: (a * b,)),
        ("Sides {} and {}: find the rectangle's area.", lambda a, b: (a * b,)),
        ("A rectangle is {} by {}. What is its perimeter?", lambda a, b: (a + b, 2 * (a + b))),
        ("Sides {} and {}: find the rectangle's perimeter.", lambda a, b: (a + b, 2 * (a + b))),
        # Intermediate Algebra: f(x) = x^2 + b x + c
        ("If f(x) = x^2 + {}x + {}, what is f({})?", lambda b, c, x: (x * x, b * x, x * x + b * x, x * x + b * x + c)),
        ("Compute x^2 + {}x + {} when x is {}.", lambda b, c, x: (x * x, b * x, x * x + b * x, x * x + b * x + c)),
        # Precalculus
        ("What is the dot product of ({}, {}) and ({}, {})?", lambda a, b, c, d: (a * c, b * d, a * c + b * d)),
        ("Take the dot product of ({}, {}) and ({}, {}).", lambda a, b, c, d: (a * c, b * d, a * c + b * d)),
    )
)


@dataclass(frozen=True)
class Derivation:
    """What a tiny-world question asks, re-derived from its text: its numbers and its worked values."""

    numbers: tuple[int, ...]
    values: tuple[int, ...]

    @property
    def answer(self) -> int:
        return self.values[-1]


def derive(question: str) -> Derivation | None:
    """The question's numbers and the value of each worked step, or None for a question no template
    matches (or one without an integer answer)."""
    for pattern, compute in RULES:
        match = pattern.fullmatch(question)
        if match:
            numbers = tuple(int(group) for group in match.groups())
            values = compute(*numbers)
            return None if values is None else Derivation(numbers, values)
    return None


def solve(question: str) -> str | None:
    """The integer answer of a tiny-world problem as text, or None for a question no template matches."""
    derivation = derive(question)
    return None if derivation is None else str(derivation.answer)


if __name__ == "__main__":
    from ade_core.tiny.problems import generate_problems

    for problem in generate_problems(7, seed=1) + generate_problems(7, seed=1, reworded=True):
        print(f"{problem.problem!r} -> {solve(problem.problem)} (world answer {problem.answer})")
    print(f"{'Spell the word apple backwards.'!r} -> {solve('Spell the word apple backwards.')}")
