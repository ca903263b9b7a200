"""Group-relative advantage estimators over rewards laid out group by group (rows i*G .. i*G+G-1)."""

from __future__ import annotations

import math
from collections.abc import Sequence

from ade_core.engine.model import EngineError

EPSILON = 1e-6  # the paper's GRPO (verl); TRL uses 1e-4 (docs/design-notes.md)


def grpo_advantages(rewards: Sequence[float], group_size: int) -> list[float]:
    """(r - group mean) / (group std + 1e-6), std with Bessel's correction (sample standard deviation)."""
    out: list[float] = []
    for start in range(0, len(rewards), group_size):
        group = rewards[start : start + group_size]
        mean = sum(group) / len(group)
        std = math.sqrt(sum((r - mean) ** 2 for r in group) / (len(group) - 1)) if len(group) > 1 else 0.0
        out += [(r - mean) / (std + EPSILON) for r in group]
    return out


def maxrl_advantages(rewards: Sequence[float], group_size: int) -> list[float]:
    """MaxRL (seed 001): binary reward's deviation from the group mean divided by the mean; 0 when the mean is 0."""
    bad = sorted({r for r in rewards if r not in (0.0, 1.0)})
    if bad:
        raise EngineError(
            f"advantage_estimator = 'maxrl' needs binary rewards in {{0, 1}}, got {bad[:5]}; "
            "use 'grpo' or an outcome-only reward"
        )
    out: list[float] = []
    for start in range(0, len(rewards), group_size):
        group = rewards[start : start + group_size]
        mean = sum(group) / len(group)
        out += [0.0 if mean == 0 else (r - mean) / mean for r in group]
    return out


def advantages(rewards: Sequence[float], group_size: int, estimator: str) -> list[float]:
    if len(rewards) % group_size:
        raise EngineError(f"{len(rewards)} rewards do not split into groups of {group_size}")
    if estimator == "maxrl":
        return maxrl_advantages(rewards, group_size)
    return grpo_advantages(rewards, group_size)
