"""In-loop metrics over a correctness matrix c[i][j]: problem i, sample j (paper Appendix D.5).

Both metrics weight problems equally and are reported as percentages.
"""

from __future__ import annotations

from collections.abc import Sequence


def _check(matrix: Sequence[Sequence[bool]]) -> None:
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


if __name__ == "__main__":
    demo = [[True, False, False, False], [False, False, False, False], [True, True, True, True]]
    print(f"Pass@4 = {pass_at_k(demo):.2f}  Average@4 = {average_at_k(demo):.2f}")
