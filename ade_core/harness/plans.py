"""Planning admission (paper Sec 3.1, App. C.2): serialized against the Plan catalog.

A Coordinator proposes from a view frozen at one revision; while it thinks, another Coordinator
may admit a Plan. Admission therefore happens under the planning lock and refuses a proposal
whose catalog has changed since its view (the Coordinator is asked again with the new catalog,
without spending its call budget). The Harness then checks the relation's sources, freezes the
comparison target and, separately, the portfolio target, and writes the Plan with its empty
Plan Memory in one transition.
"""

from __future__ import annotations

from ade_core.harness.core import Harness, HarnessRefusal
from ade_core.harness.ranking import target_of
from ade_core.harness.snapshot import REFERENCE_PLAN, Snapshot, empty_plan_memory
from ade_core.harness.views import coordinator_view
from ade_core.schemas.deliveries import PlanProposal
from ade_core.schemas.plan import FrozenTarget, Plan
from ade_core.store import Transition


def reference_plan(h: Harness) -> Plan:
    """P000: the task's generic reference strategy, trained and compared against the base model."""
    metric = h.metrics.order[0]
    base = h.record.base_model
    return Plan(
        plan_id=REFERENCE_PLAN,
        coordinator=0,
        direction="generic reference: the task's fixed baseline strategy",
        relation="new",
        hypothesis="The generic reference strategy is the baseline every research Plan is compared with.",
        mechanism="Fixed by the task, not by an agent (paper Appendix D.3).",
        expected_observations=(f"{metric} is measured under the frozen configuration",),
        rejection_conditions=(
            dict(metric=metric, comparator="<", threshold=0.0, against="comparison_target", prose="below base model"),
        ),
        expectations=(dict(metric=metric, kind="diagnostic", against="comparison_target"),),
        rationale="Bootstrap: the generic baseline P000.",
        comparison_target=FrozenTarget(
            kind="base_model", plan_id=None, trial_id=None, scores=base if isinstance(base, dict) else None
        ),
        portfolio_target=FrozenTarget(kind="run_best", plan_id=None, trial_id=None, scores=None),
    )


def admit_reference_plan(h: Harness) -> Plan:
    """Write P000 and its Plan Memory v0 (idempotent)."""
    existing = h.store.get_model("plan", REFERENCE_PLAN)
    if existing is not None:
        return existing
    plan = reference_plan(h)
    with h.transition("plan_admitted", REFERENCE_PLAN, {"coordinator": 0}) as tx:
        tx.put("plan", plan.plan_id, plan)
        tx.put("plan_memory", f"{plan.plan_id}@v0", empty_plan_memory(plan.plan_id, tx.revision))
    return plan


def check_proposal(h: Harness, proposal: PlanProposal, snap: Snapshot) -> list[str]:
    """Why the proposal cannot be admitted against the current state (empty when it can)."""
    problems = []
    known = set(h.metrics.order)
    if proposal.relation not in h.method.relations:
        problems.append(
            f"relation {proposal.relation!r} is not available under research method {h.method.method!r} "
            f"(allowed: {list(h.method.relations)}); propose a 'new' Plan without sources"
        )
    if proposal.cited_findings and not h.method.run_memory_visible:
        problems.append(
            f"research method {h.method.method!r} shows no Run Memory, so no finding may be cited; "
            "remove cited_findings"
        )
    for source in proposal.sources:
        plan = snap.plan(source)
        if plan is None:
            problems.append(f"source Plan {source!r} does not exist")
        elif not snap.plan_completed(plan, h.config.budget.trials_per_plan):
            problems.append(f"source Plan {source!r} is not completed (its memory updates are not all published)")
    for expectation in proposal.expectations:
        if expectation.metric not in known:
            problems.append(f"expectation names unknown metric {expectation.metric!r}; metrics: {sorted(known)}")
    for condition in proposal.rejection_conditions:
        if condition.against != "absolute" and condition.metric not in known:
            problems.append(f"rejection condition compares unknown metric {condition.metric!r} with a target")
    cited = {f.finding_id for f in snap.run_memory.findings}
    for finding in proposal.cited_findings:
        if finding.finding_id not in cited:
            problems.append(f"cited finding {finding.finding_id!r} is not in the Run Memory the view showed")
    return problems


def frozen_targets(h: Harness, proposal: PlanProposal, snap: Snapshot) -> tuple[FrozenTarget, FrozenTarget]:
    """Comparison target (new -> P000; revisit/contradict -> sole source; combine -> first) and the Run's best."""
    if proposal.relation == "new":
        comparison = target_of("generic_baseline", REFERENCE_PLAN, snap.trials, h.metrics)
    else:
        comparison = target_of("source_plan", proposal.sources[0], snap.trials, h.metrics)
    ranking = snap.ranking(h.metrics)
    if ranking:
        top = ranking[0]
        portfolio = FrozenTarget(kind="run_best", plan_id=top.plan_id, trial_id=top.trial_id, scores=top.scores)
    else:
        portfolio = FrozenTarget(kind="run_best", plan_id=None, trial_id=None, scores=None)
    return comparison, portfolio


async def propose_plan(h: Harness, coordinator: int, slot: int) -> Plan:
    """Ask Coordinator ``coordinator`` for Plan ``C<c>/P<slot>`` and admit it; raises ``AgentFailed``."""
    plan_id = f"C{coordinator}/P{slot}"
    existing = h.store.get_model("plan", plan_id)
    if existing is not None:
        return existing

    def view(basis: int, feedback: tuple[str, ...]):
        return coordinator_view(h, plan_id, basis, feedback, coordinator)

    def accept(tx: Transition, proposal: PlanProposal | None, _: object) -> Plan:
        assert proposal is not None and tx.delivery is not None
        basis = tx.delivery.basis_revision
        newer = [d.key for d in h.store.list("plan") if d.revision > basis]
        if newer:  # the catalog moved on while the Coordinator thought: never admit on a stale catalog
            raise HarnessRefusal(
                "stale",
                [f"the Plan catalog changed since revision {basis}: {', '.join(newer)} admitted; propose again"],
                counts=False,
            )
        snap = Snapshot.read(h.store, tx.revision)
        problems = check_proposal(h, proposal, snap)
        if problems:
            raise HarnessRefusal("malformed", problems)
        comparison, portfolio = frozen_targets(h, proposal, snap)
        plan = Plan(
            plan_id=plan_id,
            coordinator=coordinator,
            **proposal.model_dump(),
            comparison_target=comparison,
            portfolio_target=portfolio,
        )
        tx.put("plan", plan_id, plan)
        tx.put("plan_memory", f"{plan_id}@v0", empty_plan_memory(plan_id, tx.revision))
        return plan

    return await h.ask(
        "coordinator",
        plan_id,
        key=f"C{coordinator}",
        view=view,
        model=PlanProposal,
        accept=accept,
        lock=h.planning_lock,
    )
