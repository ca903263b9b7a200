"""Scores over sampled records (seed 001, Sec 4.3): unbiased pass@k for a set of k, and frontier sets.

pass@k of one problem is Chen et al.'s unbiased estimate from its n graded samples, c of them
correct; a benchmark's pass@k is the mean over its problems, as a percentage. A k above the samples
drawn is refused: the estimate needs n >= k. Responses dropped for naming their hidden approach
are not samples (IID evaluation never drops any).

A frontier set holds the problems the base model solves at most ``max_solved`` times of
``samples`` (the seed: 2 of 64): the problems where a different approach is needed. It is computed
from a base sampling run, which the caller caches by model and settings.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ade_core.engine.metrics import unbiased_pass_at_k
from ade_core.sampling.samplers import ProblemSamples, SamplingError


def parse_ks(text: str) -> tuple[int, ...]:
    """``"1,8,64"`` -> ``(1, 8, 64)``; a typed error names what is wrong."""
    try:
        ks = tuple(sorted({int(part) for part in text.split(",") if part.strip()}))
    except ValueError:
        raise SamplingError(f"--passk {text!r}: give comma-separated whole numbers, e.g. 1,8,64") from None
    if not ks or ks[0] < 1:
        raise SamplingError(f"--passk {text!r}: every k must be >= 1")
    return ks


def check_ks(ks: Iterable[int], samples: int) -> None:
    """Refuse a k larger than the samples per problem (pass@k needs n >= k)."""
    too_big = [k for k in ks if k > samples]
    if too_big:
        raise SamplingError(
            f"pass@{too_big[0]} needs at least {too_big[0]} samples per problem, but {samples} are drawn; "
            f"raise --samples to {max(too_big)} or drop k > {samples}"
        )


def graded(record: ProblemSamples) -> tuple[int, int]:
    """(n, c): the problem's graded samples and how many are correct."""
    kept = [sample for sample in record.kept() if sample["correct"] is not None]
    return len(kept), sum(1 for sample in kept if sample["correct"])


def pass_at_ks(records: Sequence[ProblemSamples], ks: Sequence[int]) -> dict[str, float]:
    """``{"pass@k": percentage}`` over ``records`` for every k."""
    if not records:
        raise SamplingError("pass@k over no problems: the problem set is empty")
    counts = [graded(record) for record in records]
    check_ks(ks, min(n for n, _ in counts))
    return {f"pass@{k}": 100.0 * sum(unbiased_pass_at_k(n, c, k) for n, c in counts) / len(counts) for k in ks}


def frontier_ids(records: Sequence[ProblemSamples], max_solved: int) -> list[str]:
    """Ids of the problems solved at most ``max_solved`` times, in record order."""
    if max_solved < 0:
        raise SamplingError(f"max_solved = {max_solved} must be >= 0")
    return [record.problem_id for record in records if graded(record)[1] <= max_solved]


__all__ = ["check_ks", "frontier_ids", "graded", "parse_ks", "pass_at_ks"]
