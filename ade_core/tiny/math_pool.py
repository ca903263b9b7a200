"""The tiny world's paper-scale curriculum pool: 3,072 problems in MATH's subject x level shares.

The paper's Curriculum Learning schedules 100 steps of 256 distinct problems over a 3,072-problem
MATH pool, 3 of which the prompt limit excludes. This pool gives the tiny world the same shape:

- Cell quotas are the product of the subject totals and the level totals of MATH's 7,500-problem
  training split (below), by largest remainder. MATH's joint table is not reproduced; its marginals are.
- The generators have few distinct problems at the lowest levels of some subjects (Counting &
  Probability has 37 at level 1, most of them evaluation problems). A cell short of its quota passes
  the rest to the next level of the same subject, so every subject keeps its total.
- ``overlength`` problems (3, as in the paper) carry a long preamble that puts their prompt over the
  tiny recipe's prompt limit; their subject and level stay, so the eligible pool is 3,069.

The pool is disjoint from the world's evaluation splits; unlike the other training pools it may share
problems with them (a curriculum pool of this size needs the low levels' few distinct problems).
"""

from __future__ import annotations

import random
from collections.abc import Set as AbstractSet

from ade_core.tiny.problems import LEVELS, SUBJECTS, MathProblem, _id, make_problem, problem_key
from ade_core.tiny.splits import largest_remainder

# MATH training split (7,500 problems): problems per subject and per level.
MATH_TRAIN_SUBJECTS = {
    "Algebra": 1744,
    "Counting & Probability": 771,
    "Geometry": 870,
    "Intermediate Algebra": 1295,
    "Number Theory": 869,
    "Prealgebra": 1205,
    "Precalculus": 746,
}
MATH_TRAIN_LEVELS = {1: 566, 2: 1348, 3: 1592, 4: 1690, 5: 2304}
# Subjects whose problems get the long preamble: not the four the paper's curriculum reserves slots for.
OVERLENGTH_SUBJECTS = ("Algebra", "Prealgebra", "Number Theory")
PREAMBLE = (
    "The next question is copied from a long contest booklet together with its whole introduction. The booklet "
    "asks every reader to keep in mind that each answer is a whole number, that the working should be shown "
    "step by step, and that the final answer should be written once at the end. With that said, here it is: "
)


def math_quotas(size: int) -> dict[tuple[str, int], int]:
    """Problems per (subject, level): MATH's subject totals times its level totals, to ``size``."""
    assert set(MATH_TRAIN_SUBJECTS) == set(SUBJECTS) and set(MATH_TRAIN_LEVELS) == set(LEVELS)
    weights = {(s, lvl): float(n * m) for s, n in MATH_TRAIN_SUBJECTS.items() for lvl, m in MATH_TRAIN_LEVELS.items()}
    return largest_remainder(weights, size)


def _cell(
    rng: random.Random, subject: str, level: int, wanted: int, excluded: AbstractSet[str], seen: set[str]
) -> list[MathProblem]:
    """Up to ``wanted`` problems of one cell, none excluded or already ``seen`` (small numbers make the same
    text at several levels); fewer where the cell runs out. Adds what it takes to ``seen``."""
    out: list[MathProblem] = []
    for _ in range(200 * wanted + 2000):
        if len(out) == wanted:
            break
        problem = make_problem(rng, subject, level)
        key = problem_key(problem.problem)
        if key not in seen and key not in excluded:
            seen.add(key)
            out.append(problem)
    return out


def lengthen(problem: MathProblem) -> MathProblem:
    """The same problem behind a long preamble (its prompt goes over the tiny prompt limit)."""
    text = PREAMBLE + problem.problem
    return MathProblem(
        text,
        problem.solution,
        problem.answer,
        problem.subject,
        problem.level,
        _id(problem.subject, problem.level, text),
    )


def math_shares_pool(size: int, overlength: int, seed: int, excluded: AbstractSet[str]) -> list[MathProblem]:
    """``size`` problems in MATH's shares, ``overlength`` of them lengthened, in a seeded order."""
    rng = random.Random(seed)
    quotas = math_quotas(size)
    chosen: list[MathProblem] = []
    seen: set[str] = set()
    for subject in SUBJECTS:
        carry = 0
        for level in LEVELS:
            wanted = quotas[(subject, level)] + carry
            got = _cell(rng, subject, level, wanted, excluded, seen)
            carry = wanted - len(got)
            chosen += got
        if carry:
            raise ValueError(f"the curriculum pool is {carry} problems short in {subject}")
    rng.shuffle(chosen)
    candidates = [i for i, p in enumerate(chosen) if p.subject in OVERLENGTH_SUBJECTS]
    for index in sorted(rng.sample(candidates, overlength)):
        chosen[index] = lengthen(chosen[index])
    return chosen
