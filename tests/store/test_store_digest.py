"""The state digest covers committed research state in commit order, and nothing operational."""

from __future__ import annotations

import pytest
from store_world import attempt, ledger, plan, plan_memory, run_memory, trial

from ade_core.errors import DeliveryRejected
from ade_core.schemas import Plan, PlanMemory, RunMemory, Trial
from ade_core.store import EXCLUDED_FIELDS, EXCLUDED_KINDS, RunStore, state_digest


def research(store: RunStore, *, order=(1, 2), score: float = 0.4, noise: bool = False) -> str:
    """Commit two Plans to completion; with ``noise``, also everything a crashed-and-recovered run adds."""
    with store.transition("run_started", actor="harness", subject="run") as tx:
        tx.put("run_memory", "v0", run_memory(0, ()))
    for n in order:
        trial_id = f"C1/P{n}/T1"
        with store.transition("plan_admitted", actor="harness", subject=f"C1/P{n}") as tx:
            tx.put("plan", f"C1/P{n}", plan(n))
            tx.put("trial", trial_id, trial(n))
            tx.expect_delivery("builder", trial_id)
        if noise:
            with pytest.raises(DeliveryRejected):
                store.accept_delivery("builder", trial_id, 0, {"late": True})
            with store.transition("attempt_started", actor="harness", subject=trial_id) as tx:
                tx.put("attempt", f"{trial_id}/crashed", attempt(n, 1, attempt_id=f"{trial_id}/crashed"))
                tx.put("ledger", str(n), ledger(n))
            store.record_operation("attempt_fenced", subject=trial_id, details={"attempt": f"{trial_id}/crashed"})
        attempts = (f"{trial_id}/crashed", f"{trial_id}/retry") if noise else (f"{trial_id}/a1",)
        with store.delivery("builder", trial_id, store.awaited("builder", trial_id).basis_revision, {"s": n}) as tx:
            tx.put("trial", trial_id, trial(n, status="completed", attempts=attempts, score=score))
        with store.transition("plan_memory_published", actor="plan_summarizer", subject=f"C1/P{n}") as tx:
            tx.put("plan_memory", f"C1/P{n}@v1", plan_memory(n, revision=tx.revision))
            tx.enqueue_run_memory_update(f"{trial_id}#pm1", f"C1/P{n}@v1")
        latest = store.latest_run_memory()
        head = store.queue_head().commit_key
        store.publish_run_memory(
            head, run_memory(latest.version + 1, (*latest.commit_keys, head), revision=store.revision + 1)
        )
    return state_digest(store)


def test_recovery_noise_does_not_change_the_digest(tmp_path):
    with RunStore.open(tmp_path / "clean") as clean, RunStore.open(tmp_path / "noisy") as noisy:
        clean_digest = research(clean)
        noisy_digest = research(noisy, noise=True)
        assert noisy.revision > clean.revision  # the noisy run committed more events ...
        assert noisy.get("run_memory", "v2").document["revision"] != clean.get("run_memory", "v2").document["revision"]
    assert noisy_digest == clean_digest  # ... but the same research
    assert clean_digest.startswith("sha256:") and len(clean_digest) == 71


@pytest.mark.parametrize("change", [{"score": 0.5}, {"order": (2, 1)}])
def test_different_research_or_commit_order_changes_the_digest(tmp_path, change):
    with RunStore.open(tmp_path / "a") as a, RunStore.open(tmp_path / "b") as b:
        assert research(a) != research(b, **change)


def test_the_digest_is_stable_and_reads_one_snapshot(tmp_path):
    with RunStore.open(tmp_path) as store:
        digest = research(store)
        assert state_digest(store) == digest
    with RunStore.open(tmp_path) as reopened:
        assert state_digest(reopened) == digest


def test_the_excluded_fields_are_the_documented_operational_ones():
    assert {
        "attempt_id",
        "attempts",
        "started_at",
        "ended_at",
        "at",
        "selected_checkpoint",
        "revision",
    } <= EXCLUDED_FIELDS
    assert EXCLUDED_KINDS == {"attempt", "ledger"}
    # No research field of a Plan, Trial or memory version is excluded.
    research_fields = set(Plan.model_fields) | set(PlanMemory.model_fields) | set(RunMemory.model_fields)
    research_fields |= set(Trial.model_fields) - {"attempts", "package"}
    assert research_fields & EXCLUDED_FIELDS == {"revision"}
    # The package reference is physical: a replayed attempt writes another package with the same scores.
    assert "package" in EXCLUDED_FIELDS and "scores" not in EXCLUDED_FIELDS
