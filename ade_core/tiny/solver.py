"""Re-derive a tiny-world problem's integer answer, and its worked steps, from its question text alone.

One pattern per template in ``problems.py`` (standard and reworded surface forms), with the steps of
the world's worked solution: what each works from and what it reaches (a process judge checks a
response's steps against them). The solver parses only the question: it reads no world file and no
label, so a judge built on it sees exactly what a strategy sees (the request), never the ground truth.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

_N = r"(-?\d+)"


# One worked step: the numbers it works from and the value it reaches ("8*7=56" is ((8, 7), 56)).
WorkedStep = tuple[tuple[int, ...], int]
Worked = tuple[WorkedStep, ...]


def _add(a: int, b: int) -> Worked:
    return (((a, b), a + b),)


def _subtract(a: int, b: int) -> Worked:
    return (((a, b), a - b),)


def _multiply(a: int, b: int) -> Worked:
    return (((a, b), a * b),)


def _linear(a: int, b: int, c: int) -> Worked | None:
    """a x + b = c: a x = c - b, then x = (c - b) / a, when that is an integer."""
    if a == 0 or (c - b) % a:
        return None
    return (((c, b), c - b), ((c - b, a), (c - b) // a))


def _remainder(a: int, b: int) -> Worked | None:
    """a mod b: b q, then a - b q."""
    if b <= 0:
        return None
    q = a // b
    return (((b, q), b * q), ((a, b * q), a - b * q))


def _pairs(n: int) -> Worked:
    """n choose 2: n (n - 1), then half of it."""
    return (((n, n - 1), n * (n - 1)), ((n * (n - 1), 2), n * (n - 1) // 2))


def _perimeter(a: int, b: int) -> Worked:
    return (((a, b), a + b), ((2, a + b), 2 * (a + b)))


def _quadratic(b: int, c: int, x: int) -> Worked:
    """x^2 + b x + c: x x, b x, their sum, then plus c."""
    return (((x, x), x * x), ((b, x), b * x), ((x * x, b * x), x * x + b * x), ((x * x + b * x, c), x * x + b * x + c))


def _dot(a: int, b: int, c: int, d: int) -> Worked:
    return (((a, c), a * c), ((b, d), b * d), ((a * c, b * d), a * c + b * d))


def _pattern(template: str) -> re.Pattern[str]:
    """A template with ``{}`` for each integer, matched literally otherwise (case and spacing aside)."""
    parts = [re.escape(part).replace(r"\ ", r"\s+") for part in template.split("{}")]
    return re.compile(r"\s*" + _N.join(parts) + r"\s*", re.IGNORECASE)


# Each template's worked steps as the tiny world's solutions take them, the last reaching the
# answer (None when the question has no integer answer).
Rule = tuple[re.Pattern[str], Callable[..., Worked | None]]

RULES: tuple[Rule, ...] = tuple(
    (_pattern(template), compute)
    for template, compute in (
        # Prealgebra
        ("What is {} + {}?", _add),
        ("Add {} and {}.", _add),
        ("What is {} - {}?", _subtract),
        ("Take {} away from {}.", lambda b, a: _subtract(a, b)),
        # Algebra: a x + b = c
        ("Solve for x: {}x + {} = {}.", _linear),
        ("Find x if {}x plus {} equals {}.", _linear),
        # Number Theory
        ("What is the remainder when {} is divided by {}?", _remainder),
        ("Divide {} by {}. What is left over?", _remainder),
        # Counting & Probability
        ("How many ways can 2 people be chosen from {}?", _pairs),
        ("{} players each shake hands once. How many handshakes?", _pairs),
        ("A menu has {} soups and {} salads. How many soup-and-salad meals are there?", _multiply),
        ("Pick one of {} hats and one of {} scarves. How many outfits?", _multiply),
        # Geometry
        ("A rectangle is {} by {}. What is its area?", _multiply),
        ("Sides {} and {}: find the rectangle's area.", _multiply),
        ("A rectangle is {} by {}. What is its perimeter?", _perimeter),
        ("Sides {} and {}: find the rectangle's perimeter.", _perimeter),
        # Intermediate Algebra: f(x) = x^2 + b x + c
        ("If f(x) = x^2 + {}x + {}, what is f({})?", _quadratic),
        ("Compute x^2 + {}x + {} when x is {}.", _quadratic),
        # Precalculus
        ("What is the dot product of ({}, {}) and ({}, {})?", _dot),
        ("Take the dot product of ({}, {}) and ({}, {}).", _dot),
    )
)


@dataclass(frozen=True)
class Derivation:
    """A tiny-world question re-derived from its text: its numbers and the worked steps to its answer."""

    numbers: tuple[int, ...]
    steps: Worked

    @property
    def answer(self) -> int:
        return self.steps[-1][1]

    def reaches(self, value: object, operands: tuple[int, ...]) -> bool:
        """Whether some worked step reaches ``value`` from numbers that are all among ``operands``."""
        return any(value == result and set(needed) <= set(operands) for needed, result in self.steps)


def derive(question: str) -> Derivation | None:
    """The question's numbers and worked steps, or None for a question no template matches (or one
    without an integer answer)."""
    for pattern, compute in RULES:
        match = pattern.fullmatch(question)
        if match:
            numbers = tuple(int(group) for group in match.groups())
            steps = compute(*numbers)
            return None if steps is None else Derivation(numbers, steps)
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
