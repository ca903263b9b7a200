"""Per-step GRPO diagnostics from the rollout record and the trainer's log, and the divergence flag.

Per step: the share of zero-variance groups (no learning signal), mean training reward and mean
verified outcome, advantage statistics, response length, and from the trainer's log KL, entropy
and clip fraction. A reward that rises while the verified outcome falls is the signature of a
reward being gamed: the package flags it (``reward_outcome_divergence``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from ade_core.engine.training.rewards import Rollout

# The trainer's log keys (TRL's GRPOTrainer) kept per step, under our names.
LOG_KEYS = {"kl": "kl", "entropy": "entropy", "clip_ratio/region_mean": "clip_fraction", "loss": "loss"}
DIVERGENCE_MIN_STEPS = 4  # fewer steps cannot show a trend


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def step_diagnostics(
    rollouts: Sequence[Rollout], group_size: int, log: Sequence[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """One row per optimizer step (rollouts are laid out group by group within a step)."""
    by_step: dict[int, list[Rollout]] = {}
    for rollout in rollouts:
        by_step.setdefault(rollout.step, []).append(rollout)
    logged = {int(entry["step"]): entry for entry in log if "step" in entry and "kl" in entry}
    rows = []
    for position, (step, batch) in enumerate(sorted(by_step.items())):
        groups = [batch[i : i + group_size] for i in range(0, len(batch), group_size)]
        zero = sum(len({r.reward for r in g}) == 1 for g in groups)
        values = [r.advantage for r in batch]
        mean_advantage = _mean(values)
        row: dict[str, Any] = {
            "step": step,
            "groups": len(groups),
            "zero_variance_share": round(zero / len(groups), 6) if groups else 0.0,
            "reward_mean": round(_mean([r.reward for r in batch]), 6),
            "outcome_mean": round(_mean([r.outcome for r in batch]), 6),
            "advantage_mean": round(mean_advantage, 6),
            "advantage_std": round(math.sqrt(_mean([(v - mean_advantage) ** 2 for v in values])), 6),
            "advantage_abs_max": round(max((abs(v) for v in values), default=0.0), 6),
            "response_length_mean": round(_mean([r.num_tokens for r in batch]), 3),
        }
        # TRL logs after the optimizer step: the rollouts of generation step s train step s + 1
        entry = logged.get(step + 1) or logged.get(position + 1) or {}
        for key, name in LOG_KEYS.items():
            row[name] = entry.get(key)
        rows.append(row)
    return rows


def divergence(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Whether the mean reward rose while the verified outcome fell, first half of the steps against
    the second (``flagged``), with both changes; too few steps is ``assessed: false``."""
    if len(rows) < DIVERGENCE_MIN_STEPS:
        return {"assessed": False, "flagged": False, "reason": f"fewer than {DIVERGENCE_MIN_STEPS} steps"}
    half = len(rows) // 2
    early, late = rows[:half], rows[-half:]
    reward = _mean([r["reward_mean"] for r in late]) - _mean([r["reward_mean"] for r in early])
    outcome = _mean([r["outcome_mean"] for r in late]) - _mean([r["outcome_mean"] for r in early])
    return {
        "assessed": True,
        "flagged": reward > 0 and outcome < 0,
        "reward_change": round(reward, 6),
        "outcome_change": round(outcome, 6),
    }
