"""In-loop metrics and checkpoint ranking over evaluation results (paper Appendix D.5).

Metrics weight problems equally and are reported as percentages. A process-level failure
that keeps an evaluation from finishing is ``Missing``, never zero: it stays out of every
average and can never be selected as the best checkpoint.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

T = TypeVar("T")

# Appendix D.5: SFT ranks by Pass@K then Average@K; RFT by Average@K then Pass@K.
SFT_ORDER: tuple[str, ...] = ("pass_at_k", "average_at_k")
RFT_ORDER: tuple[str, ...] = ("average_at_k", "pass_at_k")


@dataclass(frozen=True)
class Missing:
    """An evaluation (or one benchmark of it) that did not finish, and why."""

    reason: str


# One evaluation's metric values by name; an evaluation that did not finish at all may be Missing whole.
Scores = Mapping[str, "float | Missing"]
ScoresOrMissing = Scores | Missing


def _check(matrix: Sequence[Sequence[object]]) -> None:
    if not matrix:
        raise ValueError("correctness matrix has no problems")
    widths = {len(row) for row in matrix}
    if 0 in widths:
        raise ValueError("a problem has no samples")


def pass_at_k(matrix: Sequence[Sequence[bool]]) -> float:
    """Percentage of problems with at least one correct sample among the K drawn."""
    _check(matrix)
    return 100.0 * sum(any(row) for row in matrix) / len(matrix)


def average_at_k(matrix: Sequence[Sequence[bool]]) -> float:
    """Mean over problems of the fraction of correct samples, as a percentage."""
    _check(matrix)
    return 100.0 * sum(sum(row) / len(row) for row in matrix) / len(matrix)


def unbiased_pass_at_k(n: int, c: int, k: int) -> float:
    """Probability that k of n samples, c of them correct, include a correct one (Chen et al. 2021).

    Computes 1 - C(n-c, k) / C(n, k) as a product of ratios, which never forms the huge
    binomials and so stays exact enough for n in the thousands.
    """
    if not 1 <= k <= n:
        raise ValueError(f"pass@k needs 1 <= k <= n (got n={n}, k={k}); draw at least k samples per problem")
    if not 0 <= c <= n:
        raise ValueError(f"pass@k needs 0 <= c <= n (got n={n}, c={c}); c counts the correct samples among n")
    if n - c < k:
        return 1.0  # every draw of k samples contains a correct one
    # C(n-c, k) / C(n, k) = prod_{i=n-c+1}^{n} (1 - k / i)
    miss = 1.0
    for i in range(n - c + 1, n + 1):
        miss *= 1.0 - k / i
    return 1.0 - miss


def unbiased_pass_at_ks(matrix: Sequence[Sequence[bool]], ks: Sequence[int]) -> dict[str, float]:
    """``{"pass@k": percentage}``: the mean over problems of the unbiased pass@k from each problem's samples,
    for every k in ``ks`` that no problem has fewer samples than (the others cannot be estimated)."""
    _check(matrix)
    fewest = min(len(row) for row in matrix)
    return {
        f"pass@{k}": 100.0 * math.fsum(unbiased_pass_at_k(len(row), sum(row), k) for row in matrix) / len(matrix)
        for k in sorted(ks)
        if k <= fewest
    }


def coverage_at_ks(
    values: Sequence[Sequence[float | None]], ks: Sequence[int], thresholds: Sequence[float]
) -> dict[str, float]:
    """``{"coverage@k>=t": percentage}``: unbiased pass@k of the thresholded scores (a sample counts when its
    score reaches ``t``; an unscored sample never does), for every k the samples allow and every threshold."""
    _check(values)
    fewest = min(len(row) for row in values)
    return {
        coverage_name(k, t): 100.0
        * math.fsum(unbiased_pass_at_k(len(row), sum(v is not None and v >= t for v in row), k) for row in values)
        / len(values)
        for t in sorted(thresholds)
        for k in sorted(ks)
        if k <= fewest
    }


def coverage_name(k: int, threshold: float) -> str:
    return f"coverage@{k}>={threshold:g}"


def extra_metric_names(pass_k: Sequence[int], coverage_k: Sequence[int], thresholds: Sequence[float]) -> list[str]:
    """The names [evaluation]'s pass_k, coverage_k and coverage_thresholds add to every evaluation's scores."""
    names = [f"pass@{k}" for k in sorted(pass_k)]
    return names + [coverage_name(k, t) for t in sorted(thresholds) for k in sorted(coverage_k)]


def coverage_at_k(scores: Sequence[Sequence[float]], threshold: float) -> float:
    """Percentage of problems where at least one of K continuous scores reaches ``threshold``."""
    _check(scores)
    return 100.0 * sum(any(score >= threshold for score in row) for row in scores) / len(scores)


def macro_average(values: Sequence[float | Missing]) -> float | Missing:
    """Mean of unrounded per-benchmark scores, each benchmark weighted equally.

    One missing benchmark makes the macro average unavailable: it is Missing, never zero.
    """
    if not values:
        raise ValueError("macro average over no benchmarks; list at least one held-out benchmark")
    missing = [value for value in values if isinstance(value, Missing)]
    if missing:
        reasons = "; ".join(value.reason for value in missing)
        return Missing(f"{len(missing)} of {len(values)} benchmarks missing: {reasons}")
    return math.fsum(values) / len(values)  # type: ignore[arg-type]  # no Missing value is left: returned above


def is_missing(evaluation: ScoresOrMissing, order: Sequence[str]) -> bool:
    """Whether an evaluation cannot be ranked: it, or one of its metrics in ``order``, is Missing."""
    return ordered_key(evaluation, order) == (0,)


def ordered_key(scores: ScoresOrMissing, order: Sequence[str]) -> tuple[float, ...]:
    """Sort key ranking evaluations by the metrics in ``order``, first metric deciding.

    A complete evaluation keys as ``(1, first, second, ...)``; an evaluation with any metric
    Missing keys as ``(0,)``, below every complete one and tied with other missing ones.
    Higher metric values are better.
    """
    if not order:
        raise ValueError("metric order is empty; name at least one metric, e.g. ('pass_at_k', 'average_at_k')")
    if isinstance(scores, Missing):
        return (0,)
    key: list[float] = [1]
    for metric in order:
        if metric not in scores:
            raise KeyError(f"scores lack metric {metric!r} named in the metric order; they have {sorted(scores)}")
        value = scores[metric]
        if isinstance(value, Missing):
            return (0,)
        if math.isnan(value):
            raise ValueError(f"metric {metric!r} is NaN; record an evaluation that failed as Missing(reason)")
        key.append(value)
    return tuple(key)


def better(a: ScoresOrMissing, b: ScoresOrMissing, order: Sequence[str]) -> bool:
    """Whether ``a`` ranks strictly above ``b``; ties are not better, Missing is worse than any number."""
    return ordered_key(a, order) > ordered_key(b, order)


def select_best(candidates: Sequence[tuple[T, ScoresOrMissing]], order: Sequence[str]) -> T | None:
    """The best candidate by ``order``, the earliest among ties; None when every one is missing."""
    best: tuple[T, ScoresOrMissing] | None = None
    for candidate in candidates:
        if is_missing(candidate[1], order):
            continue
        if best is None or better(candidate[1], best[1], order):
            best = candidate
    return None if best is None else best[0]


def best_so_far(history: Sequence[ScoresOrMissing], order: Sequence[str]) -> list[Scores | None]:
    """Running best evaluation after each entry of ``history``; a missing entry never improves it."""
    running: list[Scores | None] = []
    best: Scores | None = None
    for evaluation in history:
        if not is_missing(evaluation, order) and (best is None or better(evaluation, best, order)):
            best = evaluation  # type: ignore[assignment]  # not missing: the evaluation holds scores
        running.append(best)
    return running


if __name__ == "__main__":
    demo = [[True, False, False, False], [False, False, False, False], [True, True, True, True]]
    print(f"Pass@4 = {pass_at_k(demo):.2f}  Average@4 = {average_at_k(demo):.2f}")
    print(f"unbiased pass@2 with n=5, c=2: {unbiased_pass_at_k(5, 2, 2):.2f}")
    steps: list[ScoresOrMissing] = [
        {"pass_at_k": 40.0, "average_at_k": 20.0},
        Missing("trainer crashed"),
        {"pass_at_k": 40.0, "average_at_k": 25.0},
    ]
    print(f"best checkpoint (SFT order): step {select_best(list(enumerate(steps)), SFT_ORDER)}")
