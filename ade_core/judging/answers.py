"""The two answers a judge gives: ``completed`` with scores, or ``unavailable`` with a reason.

An unavailable answer carries no score: it is never a zero, and a strategy must not read it as one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ade_core.judging.rubric import Rubric

COMPLETED, UNAVAILABLE = "completed", "unavailable"


def completed(scores: Mapping[str, float], rubric: Rubric) -> dict[str, Any]:
    """A judged request: one score per dimension on its levels, and their weighted sum."""
    ordered = {d.name: float(scores[d.name]) for d in rubric.dimensions}
    return {
        "status": COMPLETED,
        "scores_by_dimension": ordered,
        "projected_score": rubric.project(ordered),
        "fallback": False,
    }


def unavailable(reason: str) -> dict[str, Any]:
    """An unjudged request: why, and no score."""
    return {"status": UNAVAILABLE, "reason": reason, "fallback": True, "fallback_reason": reason}
