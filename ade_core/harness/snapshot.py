"""Research state as of one store revision: what a view is built from and what decisions read.

A view must be rebuildable after a crash from its basis revision alone, so everything here
reads ``at_revision`` (``None`` = the latest commit).
"""

from __future__ import annotations

from dataclasses import dataclass

from ade_core.harness.ranking import MetricOrder, best_trial, rank_plans
from ade_core.schemas.memory import PlanMemory, RunMemory
from ade_core.schemas.plan import Plan
from ade_core.schemas.trial import Trial
from ade_core.schemas.views import RankEntry
from ade_core.store import RunStore

REFERENCE_PLAN = "P000"


def commit_key(trial_id: str) -> str:
    """The persistent key under which a Trial's Run-Memory update is queued."""
    return f"{trial_id}#run-memory"


def planned_trials(plan: Plan, trials_per_plan: int) -> int:
    """B_T for ``plan``: the bootstrap reference has one Trial."""
    return 1 if plan.plan_id == REFERENCE_PLAN else trials_per_plan


@dataclass(frozen=True)
class Snapshot:
    """Plans, Trials, memory and queue state as of ``revision``."""

    revision: int
    plans: tuple[Plan, ...]
    trials: tuple[Trial, ...]
    run_memory: RunMemory
    published: frozenset[str]

    @classmethod
    def read(cls, store: RunStore, revision: int | None = None) -> Snapshot:
        at = store.revision if revision is None else revision
        plans = tuple(Plan.model_validate(d.document) for d in store.list("plan", at_revision=at))
        trials = tuple(Trial.model_validate(d.document) for d in store.list("trial", at_revision=at))
        memories = [RunMemory.model_validate(d.document) for d in store.list("run_memory", at_revision=at)]
        published = frozenset(
            e.commit_key
            for e in store.queue()
            if e.status == "published" and e.published_revision is not None and e.published_revision <= at
        )
        latest = max(memories, key=lambda m: m.version) if memories else empty_run_memory()
        return cls(at, plans, trials, latest, published)

    def plan(self, plan_id: str) -> Plan | None:
        return next((p for p in self.plans if p.plan_id == plan_id), None)

    def trials_of(self, plan_id: str) -> list[Trial]:
        return [t for t in self.trials if t.plan_id == plan_id]

    def trial(self, trial_id: str) -> Trial | None:
        return next((t for t in self.trials if t.trial_id == trial_id), None)

    def trial_done(self, trial: Trial) -> bool:
        """Terminal with its Plan-Memory and Run-Memory updates published (cancelled ones have none)."""
        if trial.status == "cancelled":
            return True
        return trial.terminal and trial.plan_memory is not None and commit_key(trial.trial_id) in self.published

    def plan_completed(self, plan: Plan, trials_per_plan: int) -> bool:
        """All of the Plan's Trials ran and both memory updates of each were published."""
        trials = self.trials_of(plan.plan_id)
        return len(trials) >= planned_trials(plan, trials_per_plan) and all(self.trial_done(t) for t in trials)

    def ranking(self, metrics: MetricOrder) -> list[RankEntry]:
        return rank_plans(self.plans, self.trials, metrics)

    def best_of(self, plan_id: str, metrics: MetricOrder) -> Trial | None:
        return best_trial(self.trials_of(plan_id), metrics)


def empty_run_memory() -> RunMemory:
    return RunMemory(version=0, parent=None, revision=0, source_trials=(), source_digests=(), findings=())


def empty_plan_memory(plan_id: str, revision: int) -> PlanMemory:
    """Plan Memory v0 of a newly admitted Plan."""
    return PlanMemory(
        plan_id=plan_id, version=0, parent=None, revision=revision, source_trials=(), source_digests=(), findings=()
    )


def latest_plan_memory(store: RunStore, plan_id: str, revision: int | None = None) -> PlanMemory:
    """The newest Plan-Memory version of ``plan_id`` as of ``revision``."""
    versions = [
        PlanMemory.model_validate(d.document)
        for d in store.list("plan_memory", at_revision=revision)
        if d.key.startswith(f"{plan_id}@v")
    ]
    if not versions:
        raise LookupError(f"Plan {plan_id} has no Plan Memory (v0 is written when the Plan is admitted)")
    return max(versions, key=lambda m: m.version)
