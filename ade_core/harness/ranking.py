"""Ranking and the Harness's own conclusions (paper Sec 3.4, App. C.2, C.6).

Plans are ranked by their best eligible Trial under the task's ordered in-loop metrics: the
first metric decides, later ones break ties, and a remaining tie goes to the Trial committed
first. Only offline in-loop scores enter; held-out results never do (Sec 3.4).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from ade_core.schemas.plan import FrozenTarget, Plan
from ade_core.schemas.trial import PortfolioStatus, Trial, Unavailable
from ade_core.schemas.views import RankEntry


class MetricOrder:
    """The task's ordered in-loop metrics and each one's direction."""

    def __init__(self, order: Sequence[str], higher_is_better: Mapping[str, bool] | None = None):
        self.order = tuple(order)
        self.higher = {name: (higher_is_better or {}).get(name, True) for name in self.order}

    def key(self, scores: Mapping[str, float]) -> tuple[float, ...]:
        """A sort key where larger is better, metric by metric in order (missing metrics rank last)."""
        out = []
        for name in self.order:
            value = scores.get(name)
            if value is None:
                out.append(float("-inf"))
            else:
                out.append(value if self.higher[name] else -value)
        return tuple(out)

    def beats(self, scores: Mapping[str, float], other: Mapping[str, float]) -> bool:
        """Strictly better under the ordered metrics."""
        return self.key(scores) > self.key(other)


def eligible(trial: Trial) -> bool:
    """A Trial that can represent its Plan: completed, with in-loop scores."""
    return trial.status == "completed" and isinstance(trial.scores, dict)


def best_trial(trials: Iterable[Trial], metrics: MetricOrder) -> Trial | None:
    """τ*: the Plan's best eligible Trial; on a tie the earliest (input order is commit order)."""
    best: Trial | None = None
    for trial in trials:
        if not eligible(trial):
            continue
        assert isinstance(trial.scores, dict)
        if best is None or metrics.beats(trial.scores, best.scores):  # type: ignore[arg-type]  # best passed eligible(), so its scores are a dict
            best = trial
    return best


def rank_plans(plans: Sequence[Plan], trials: Sequence[Trial], metrics: MetricOrder) -> list[RankEntry]:
    """Plans with an eligible Trial, best first; ties keep admission order."""
    by_plan: dict[str, list[Trial]] = {}
    for trial in trials:
        by_plan.setdefault(trial.plan_id, []).append(trial)
    represented = []
    for index, plan in enumerate(plans):
        best = best_trial(by_plan.get(plan.plan_id, []), metrics)
        if best is not None:
            assert isinstance(best.scores, dict)
            represented.append((metrics.key(best.scores), -index, plan.plan_id, best))
    represented.sort(key=lambda item: (item[0], item[1]), reverse=True)
    return [
        RankEntry(rank=rank, plan_id=plan_id, trial_id=best.trial_id, scores=dict(best.scores))
        for rank, (_, _, plan_id, best) in enumerate(represented, 1)
    ]


def target_of(kind: str, plan_id: str | None, trials: Sequence[Trial], metrics: MetricOrder) -> FrozenTarget:
    """The frozen target for ``plan_id``: its best eligible Trial and scores (None when it has none)."""
    best = best_trial([t for t in trials if t.plan_id == plan_id], metrics)
    return FrozenTarget(
        kind=kind,
        plan_id=plan_id,
        trial_id=best.trial_id if best else None,
        scores=dict(best.scores) if best else None,
    )


def deltas(scores: dict[str, float] | Unavailable, target: FrozenTarget) -> dict[str, float] | Unavailable:
    """Trial minus target per shared metric, or why no comparison is possible."""
    if isinstance(scores, Unavailable):
        return Unavailable(reason=f"the Trial has no in-loop scores ({scores.reason})")
    if target.scores is None:
        return Unavailable(reason=f"the {target.kind.replace('_', ' ')} has no eligible Trial to compare with")
    return {name: round(scores[name] - target.scores[name], 6) for name in scores if name in target.scores}


def portfolio_conclusion(
    scores: dict[str, float] | Unavailable, target: FrozenTarget | None, metrics: MetricOrder
) -> PortfolioStatus | Unavailable:
    """new_best / not_new_best against the portfolio target frozen at admission; not_comparable without one."""
    if isinstance(scores, Unavailable):
        return Unavailable(reason=f"no in-loop scores ({scores.reason})")
    if target is None or target.scores is None:
        return "not_comparable"
    return "new_best" if metrics.beats(scores, target.scores) else "not_new_best"
