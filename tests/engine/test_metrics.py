"""Metrics and checkpoint ranking follow the paper's evaluation rules (Appendix D.5)."""

from __future__ import annotations

import itertools
import math

import pytest

from ade_core.engine.metrics import (
    RFT_ORDER,
    SFT_ORDER,
    Missing,
    average_at_k,
    best_so_far,
    better,
    coverage_at_k,
    macro_average,
    ordered_key,
    pass_at_k,
    select_best,
    unbiased_pass_at_k,
)


def test_pass_and_average_at_k_by_hand():
    matrix = [[True, True, False, False], [False] * 4, [False, False, False, True]]
    assert pass_at_k(matrix) == pytest.approx(100 * 2 / 3)
    assert average_at_k(matrix) == pytest.approx(100 * (0.5 + 0 + 0.25) / 3)
    assert pass_at_k([[True], [False]]) == average_at_k([[True], [False]]) == 50.0


def test_problems_weigh_equally_whatever_their_sample_count():
    # One problem with 1 of 2 correct, one with 3 of 3: (50 + 100) / 2, not 4 of 5.
    assert average_at_k([[True, False], [True, True, True]]) == pytest.approx(75.0)


def brute_force_pass_at_k(n: int, c: int, k: int) -> float:
    """Share of all k-subsets of n samples (the first c correct) that hold a correct sample."""
    draws = list(itertools.combinations(range(n), k))
    return sum(any(i < c for i in draw) for draw in draws) / len(draws)


def test_unbiased_pass_at_k_matches_enumeration():
    for n in range(1, 8):
        for c in range(n + 1):
            for k in range(1, n + 1):
                assert unbiased_pass_at_k(n, c, k) == pytest.approx(brute_force_pass_at_k(n, c, k), abs=1e-12)


def test_unbiased_pass_at_k_known_values_and_edges():
    assert unbiased_pass_at_k(5, 2, 2) == pytest.approx(0.7)
    assert unbiased_pass_at_k(10, 0, 3) == 0.0
    assert unbiased_pass_at_k(5, 4, 2) == 1.0  # n - c = 1 < k: every pair holds a correct sample
    assert unbiased_pass_at_k(10, 3, 1) == pytest.approx(0.3)
    # Stable where the binomials themselves would overflow a float.
    assert unbiased_pass_at_k(2000, 1, 1) == pytest.approx(1 / 2000)
    assert 0.0 <= unbiased_pass_at_k(2000, 1000, 100) <= 1.0
    assert unbiased_pass_at_k(2000, 3, 1000) == pytest.approx(1 - math.comb(1997, 1000) / math.comb(2000, 1000))


def test_unbiased_pass_at_k_rejects_impossible_counts():
    with pytest.raises(ValueError, match=r"n=3, k=4"):
        unbiased_pass_at_k(3, 1, 4)
    with pytest.raises(ValueError, match=r"n=3, c=5"):
        unbiased_pass_at_k(3, 5, 2)
    with pytest.raises(ValueError, match=r"k=0"):
        unbiased_pass_at_k(3, 1, 0)


def test_coverage_at_k_counts_problems_reaching_the_threshold():
    scores = [[0.1, 0.9], [0.2, 0.3], [0.5, 0.5]]
    assert coverage_at_k(scores, 0.5) == pytest.approx(100 * 2 / 3)  # the threshold itself counts
    assert coverage_at_k(scores, 0.95) == 0.0
    with pytest.raises(ValueError, match="no samples"):
        coverage_at_k([[0.1], []], 0.5)


def test_macro_average_is_unrounded_and_missing_is_never_zero():
    assert macro_average([100 / 3, 50.0, 20.0]) == pytest.approx((100 / 3 + 50 + 20) / 3)
    result = macro_average([40.0, Missing("vLLM crashed on aime24"), 60.0])
    assert isinstance(result, Missing)
    assert "1 of 3" in result.reason and "aime24" in result.reason
    with pytest.raises(ValueError, match="no benchmarks"):
        macro_average([])


def test_sft_and_rft_orders_rank_differently():
    high_pass = {"pass_at_k": 60.0, "average_at_k": 20.0}
    high_average = {"pass_at_k": 50.0, "average_at_k": 30.0}
    candidates = [("a", high_pass), ("b", high_average)]
    assert select_best(candidates, SFT_ORDER) == "a"
    assert select_best(candidates, RFT_ORDER) == "b"
    assert better(high_pass, high_average, SFT_ORDER) and not better(high_pass, high_average, RFT_ORDER)


def test_second_metric_breaks_ties_and_full_ties_go_to_the_earliest():
    first = {"pass_at_k": 50.0, "average_at_k": 20.0}
    tie_breaker = {"pass_at_k": 50.0, "average_at_k": 25.0}
    same = dict(first)
    assert select_best([(1, first), (2, tie_breaker)], SFT_ORDER) == 2
    assert select_best([(1, first), (2, same)], SFT_ORDER) == 1
    assert not better(same, first, SFT_ORDER) and not better(first, same, SFT_ORDER)


def test_missing_never_wins():
    scored = {"pass_at_k": 0.0, "average_at_k": 0.0}
    partly = {"pass_at_k": 90.0, "average_at_k": Missing("grader pool died")}
    gone = Missing("trainer crashed")
    assert select_best([(1, gone), (2, partly), (3, scored)], SFT_ORDER) == 3
    assert select_best([(1, gone), (2, partly)], SFT_ORDER) is None
    assert select_best([], SFT_ORDER) is None
    assert better(scored, gone, SFT_ORDER) and not better(gone, scored, SFT_ORDER)
    assert not better(partly, scored, SFT_ORDER)
    assert ordered_key(gone, SFT_ORDER) < ordered_key(scored, SFT_ORDER)


def test_best_so_far_ignores_missing_entries():
    history = [
        Missing("eval OOM"),
        {"pass_at_k": 30.0, "average_at_k": 10.0},
        {"pass_at_k": Missing("vLLM died"), "average_at_k": Missing("vLLM died")},
        {"pass_at_k": 30.0, "average_at_k": 10.0},
        {"pass_at_k": 40.0, "average_at_k": 5.0},
        Missing("eval OOM"),
    ]
    running = best_so_far(history, SFT_ORDER)
    assert running[0] is None
    assert running[1] is history[1] and running[2] is history[1] and running[3] is history[1]
    assert running[4] is history[4] and running[5] is history[4]
    assert best_so_far(history, RFT_ORDER)[4] is history[1]


def test_ranking_names_an_absent_or_nan_metric():
    with pytest.raises(KeyError, match="average_at_k"):
        ordered_key({"pass_at_k": 1.0}, SFT_ORDER)
    with pytest.raises(ValueError, match="NaN"):
        ordered_key({"pass_at_k": float("nan"), "average_at_k": 1.0}, SFT_ORDER)
