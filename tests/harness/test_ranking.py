"""Ranking under ordered metrics, frozen comparison targets, and the portfolio conclusion."""

from __future__ import annotations

from harness_world import config

from ade_core.harness.plans import frozen_targets
from ade_core.harness.ranking import MetricOrder, portfolio_conclusion, rank_plans
from ade_core.harness.snapshot import Snapshot
from ade_core.schemas.deliveries import PlanProposal
from ade_core.schemas.memory import RunMemory
from ade_core.schemas.plan import FrozenTarget, Plan
from ade_core.schemas.trial import Conclusions, Trial, Unavailable

METRICS = MetricOrder(("pass_at_k", "average_at_k"))
NA = Unavailable(reason="n/a")


def plan(plan_id: str) -> Plan:
    return Plan.model_validate(
        {
            "plan_id": plan_id,
            "coordinator": 1,
            "direction": "d",
            "relation": "new",
            "hypothesis": "h",
            "mechanism": "m",
            "expected_observations": ["o"],
            "rejection_conditions": [{"metric": "pass_at_k", "comparator": "<=", "threshold": 0, "prose": "p"}],
            "expectations": [{"metric": "pass_at_k", "kind": "strict_improvement"}],
        }
    )


def trial(trial_id: str, scores: dict[str, float] | None, status: str = "completed") -> Trial:
    return Trial(
        trial_id=trial_id,
        plan_id=trial_id.rsplit("/", 1)[0],
        plan_memory_base="x",
        run_memory_base="v0",
        status=status,
        scores=scores if scores is not None else NA,  # type: ignore[arg-type]
        conclusions=Conclusions(realization=NA, hypothesis=NA, portfolio=NA),
    )


PLANS = [plan("P000"), plan("C1/P1"), plan("C1/P2"), plan("C2/P1")]
TRIALS = [
    trial("P000/T1", {"pass_at_k": 40.0, "average_at_k": 20.0}),
    trial("C1/P1/T1", {"pass_at_k": 50.0, "average_at_k": 10.0}),
    trial("C1/P1/T2", {"pass_at_k": 50.0, "average_at_k": 25.0}),  # ties on the first metric, wins the second
    trial("C1/P2/T1", {"pass_at_k": 90.0, "average_at_k": 60.0}, status="evaluation_missing"),  # not eligible
    trial("C2/P1/T1", {"pass_at_k": 45.0, "average_at_k": 30.0}),
]


def test_plans_rank_by_their_best_eligible_trial_under_ordered_metrics():
    ranking = rank_plans(PLANS, TRIALS, METRICS)
    assert [(r.plan_id, r.trial_id) for r in ranking] == [
        ("C1/P1", "C1/P1/T2"),
        ("C2/P1", "C2/P1/T1"),
        ("P000", "P000/T1"),
    ]
    lower_is_better = MetricOrder(("pass_at_k",), {"pass_at_k": False})
    assert rank_plans(PLANS, TRIALS, lower_is_better)[0].plan_id == "P000"


def test_comparison_targets_follow_the_relation_and_the_portfolio_target_is_the_runs_best(tmp_path):
    snap = Snapshot(
        revision=1,
        plans=tuple(PLANS),
        trials=tuple(TRIALS),
        run_memory=RunMemory(version=0, parent=None, revision=0, source_trials=(), source_digests=(), findings=()),
        published=frozenset(),
    )

    class H:  # the two attributes frozen_targets reads
        metrics = METRICS
        config = config().experiment

    base = plan("X").model_dump(include=set(PlanProposal.model_fields) - {"rationale"})
    for relation, sources, expected in (
        ("new", (), ("generic_baseline", "P000", "P000/T1")),
        ("revisit", ("C2/P1",), ("source_plan", "C2/P1", "C2/P1/T1")),
        ("contradict", ("C1/P1",), ("source_plan", "C1/P1", "C1/P1/T2")),
        ("combine", ("C2/P1", "C1/P1"), ("source_plan", "C2/P1", "C2/P1/T1")),
    ):
        proposal = PlanProposal(**{**base, "relation": relation, "sources": sources, "rationale": "r"})
        comparison, portfolio = frozen_targets(H, proposal, snap)  # type: ignore[arg-type]
        assert (comparison.kind, comparison.plan_id, comparison.trial_id) == expected
        assert (portfolio.kind, portfolio.trial_id) == ("run_best", "C1/P1/T2")


def test_the_portfolio_conclusion():
    target = FrozenTarget(kind="run_best", plan_id="C1/P1", trial_id="C1/P1/T2", scores={"pass_at_k": 50.0})
    assert portfolio_conclusion({"pass_at_k": 51.0}, target, METRICS) == "new_best"
    assert portfolio_conclusion({"pass_at_k": 50.0}, target, METRICS) == "not_new_best"
    empty = FrozenTarget(kind="run_best", plan_id=None, trial_id=None, scores=None)
    assert portfolio_conclusion({"pass_at_k": 1.0}, empty, METRICS) == "not_comparable"
    assert isinstance(portfolio_conclusion(NA, target, METRICS), Unavailable)
