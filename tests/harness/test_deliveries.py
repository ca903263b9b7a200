"""Deliveries the Harness refuses: stale, foreign, duplicate and malformed ones, and failing agents."""

from __future__ import annotations

import pytest
from harness_world import config, dry_run, models

from ade_core.errors import DeliveryRejected
from ade_core.harness.roles import AgentError
from ade_core.harness.scripted import ScriptedBackend
from ade_core.schemas.deliveries import ReviewDesign, ReviewRequest
from ade_core.schemas.trial import Unavailable
from ade_core.schemas.views import AnalyzerView, View
from ade_core.store import RunStore


def events(run_dir, kind):
    with RunStore.open(run_dir) as store:
        return [e for e in store.events() if e.kind == kind]


def test_concurrent_coordinators_never_admit_on_a_stale_catalog(tmp_path):
    # Equal thinking times: all three Coordinators propose from the same catalog at once.
    run_dir = tmp_path / "run"
    backend = ScriptedBackend(latency={"coordinator": 40.0})
    dry_run(run_dir, config(coordinators=3, plans=2), backend=backend)
    refused = [e for e in events(run_dir, "coordinator_called") if e.payload.get("refused") == "stale"]
    assert refused, "no Coordinator ever proposed on a catalog that had moved on"
    assert all("catalog changed" in e.payload["feedback"][0] for e in refused)
    with RunStore.open(run_dir) as store:
        for plan in store.list("plan"):
            if plan.key == "P000":
                continue
            accepted = next(e for e in store.events() if e.kind == "delivery_accepted" and e.revision == plan.revision)
            basis = accepted.payload["basis_revision"]
            # nothing was admitted between the view the Coordinator saw and its admission
            assert not [p for p in store.list("plan") if basis < p.revision < plan.revision]


class Intruder(ScriptedBackend):
    """While the Builder of C1/P1/T1 thinks, another process-like writer sends deliveries it should not."""

    def __init__(self, run_dir):
        super().__init__()
        self.run_dir = run_dir
        self.reasons: dict[str, str] = {}

    def builder(self, view):
        if view.subject == "C1/P1/T1#build-0" and not self.reasons:
            with RunStore.open(self.run_dir) as other:
                plan_call = next(e for e in other.expectations(subject="C1/P1") if e.role == "coordinator")
                attempts = {
                    "foreign": ("analyzer", view.subject, view.basis_revision, {"requests": []}),
                    "stale": ("builder", view.subject, view.basis_revision - 1, {"source": "x"}),
                    "duplicate": ("coordinator", "C1/P1", plan_call.basis_revision, {"direction": "again"}),
                    "unexpected": ("review_worker", "C9/P9/T1#review", 1, {}),
                    "malformed": ("builder", view.subject, view.basis_revision, ["not", "an", "object"]),
                }
                for expected, (role, subject, basis, payload) in attempts.items():
                    with pytest.raises(DeliveryRejected) as caught:
                        other.accept_delivery(role, subject, basis, payload)
                    self.reasons[expected] = caught.value.reason
        return super().builder(view)


def test_foreign_stale_duplicate_and_malformed_deliveries_are_rejected_and_recorded(tmp_path):
    run_dir = tmp_path / "run"
    intruder = Intruder(run_dir)
    assert dry_run(run_dir, config(coordinators=1, plans=1), backend=intruder) == "completed"
    assert intruder.reasons == {k: k for k in ("foreign", "stale", "duplicate", "unexpected", "malformed")}
    rejected = events(run_dir, "delivery_rejected")
    assert sorted(e.payload["reason"] for e in rejected) == sorted(intruder.reasons)
    # the awaited Builder delivery was still accepted once, from its own view
    assert next(t for t in models(run_dir, "trial") if t.trial_id == "C1/P1/T1").status == "completed"


class ForgetfulAnalyzer(ScriptedBackend):
    """Asks for review over a pool that does not exist, then (on feedback) repairs the request."""

    def analyzer(self, view: AnalyzerView):
        design = super().analyzer(view)
        if view.stage == "design" and not view.feedback and isinstance(design, ReviewDesign):
            bogus = ReviewRequest(pool="held_out_answers", selection="all", question="peek")
            return design.model_copy(update={"requests": (*design.requests, bogus)})
        return design


def test_a_review_request_outside_the_task_pools_is_refused_and_asked_again(tmp_path):
    run_dir = tmp_path / "run"
    assert dry_run(run_dir, config(coordinators=1, plans=1), backend=ForgetfulAnalyzer()) == "completed"
    refused = [e for e in events(run_dir, "analyzer_called") if e.payload.get("refused") == "malformed"]
    assert len(refused) == 2  # one per Trial (P000 and C1/P1)
    assert "unknown review pool 'held_out_answers'" in refused[0].payload["feedback"][0]
    trials = models(run_dir, "trial")
    assert all(isinstance(t.records.review, str) for t in trials)


class MalformedBuilder(ScriptedBackend):
    """The first Builder call returns something that is not a BuilderDelivery."""

    async def deliver(self, role: str, view: View):
        reply = await super().deliver(role, view)
        if role == "builder" and not view.feedback and view.subject.endswith("#build-0"):
            return reply.__class__(delivery={"code": "print(1)"}, seconds=reply.seconds)
        return reply


def test_a_malformed_delivery_is_refused_with_feedback_and_the_role_asked_again(tmp_path):
    run_dir = tmp_path / "run"
    assert dry_run(run_dir, config(coordinators=1, plans=1), backend=MalformedBuilder()) == "completed"
    rejected = events(run_dir, "delivery_rejected")
    assert [e.payload["reason"] for e in rejected] == ["malformed"]
    retry = [e for e in events(run_dir, "builder_called") if e.payload.get("refused")]
    assert "does not validate as BuilderDelivery" in retry[0].payload["feedback"][0]
    assert next(t for t in models(run_dir, "trial") if t.trial_id == "C1/P1/T1").status == "completed"


class SilentRoles(ScriptedBackend):
    """The Builder's endpoint is down for C1/P1; the Plan Summarizer never answers for it either."""

    async def deliver(self, role: str, view: View):
        if role in ("builder", "plan_summarizer") and view.subject.startswith("C1/P1/"):
            raise AgentError("endpoint unreachable", seconds=5.0)
        return await super().deliver(role, view)


def test_agents_that_never_deliver_end_in_typed_failures_with_harness_memory_updates(tmp_path):
    run_dir = tmp_path / "run"
    assert dry_run(run_dir, config(coordinators=1, plans=1), backend=SilentRoles()) == "completed"
    trial = next(t for t in models(run_dir, "trial") if t.trial_id == "C1/P1/T1")
    assert trial.status == "build_failed" and "builder gave no admissible delivery" in trial.failure
    assert len([e for e in events(run_dir, "builder_called")]) == 3  # agent_retries
    assert isinstance(trial.conclusions.hypothesis, Unavailable)  # nobody assessed it ...
    assert trial.plan_memory == "C1/P1@v1"  # ... but its Plan-Memory update was published by the Harness
    assert [e.subject for e in events(run_dir, "plan_memory_by_harness")] == ["C1/P1/T1"]
    with RunStore.open(run_dir) as store:
        assert store.queue(status="pending") == []


class PrematureRevisit(ScriptedBackend):
    """C2's first proposal revisits C1/P1 before C1/P1 has completed."""

    def coordinator(self, view):
        proposal = super().coordinator(view)
        if view.subject == "C2/P1":
            return proposal.model_copy(update={"relation": "revisit", "sources": ("C1/P1",)})
        return proposal


def test_a_relation_to_an_uncompleted_plan_is_refused_and_the_slot_consumed(tmp_path):
    run_dir = tmp_path / "run"
    assert dry_run(run_dir, config(coordinators=2, plans=2), backend=PrematureRevisit()) == "completed"
    calls = [e.payload for e in events(run_dir, "coordinator_called") if e.subject == "C2/P1"]
    refused = [c["feedback"][0] for c in calls if c.get("refused") == "malformed"]
    # first C1/P1 does not exist yet, then it is admitted (a stale catalog: asked again) but still running
    assert refused == [
        "source Plan 'C1/P1' does not exist",
        "source Plan 'C1/P1' is not completed (its memory updates are not all published)",
    ]
    assert [e.subject for e in events(run_dir, "coordinator_failed")] == ["C2/P1"]
    plans = {p.plan_id for p in models(run_dir, "plan")}
    assert "C2/P1" not in plans and "C2/P2" in plans
    with RunStore.open(run_dir) as store:
        assert [op.subject for op in store.operations() if op.action == "plan_slot_unfilled"] == ["C2/P1"]
