"""Runs research transitions on a run store in a loop until it is killed; resumes from whatever was committed.

Usage: python store_crash_worker.py RUN_DIR. Prints "ready" once the store is open and the
replayed publication of the last merged commit key has been acknowledged.
"""

from __future__ import annotations

import sys
import time

from store_world import plan, plan_memory, run_memory, trial

from ade_core.errors import DeliveryRejected
from ade_core.store import RunStore


def step(store: RunStore, n: int) -> None:
    """Plan n from admission to its Run-Memory merge, skipping whatever is already committed."""
    plan_id, trial_id = f"C1/P{n}", f"C1/P{n}/T1"
    if store.get("plan", plan_id) is None:
        with store.transition("plan_admitted", actor="harness", subject=plan_id, payload={"n": n}) as tx:
            tx.put("plan", plan_id, plan(n))
            tx.put("trial", trial_id, trial(n))
            tx.expect_delivery("builder", trial_id)
    current = store.get_model("trial", trial_id)
    assert current is not None
    if current.status == "planned":
        awaited = store.awaited("builder", trial_id)
        assert awaited is not None
        with store.delivery("builder", trial_id, awaited.basis_revision, {"strategy": n}) as tx:
            tx.put("trial", trial_id, trial(n, status="completed", attempts=(f"a{n}",), score=n / 10))
        store.objects.put_bytes(f"package of trial {n}\n".encode() * 2000)
    if store.get("plan_memory", f"{plan_id}@v1") is None:
        with store.transition("plan_memory_published", actor="plan_summarizer", subject=plan_id) as tx:
            tx.put("plan_memory", f"{plan_id}@v1", plan_memory(n, revision=tx.revision))
            tx.enqueue_run_memory_update(f"{trial_id}#pm1", f"{plan_id}@v1")
    while (head := store.queue_head()) is not None:
        latest = store.latest_run_memory()
        assert latest is not None
        store.publish_run_memory(
            head.commit_key, run_memory(latest.version + 1, (*latest.commit_keys, head.commit_key))
        )
    if n % 3 == 0:
        try:
            store.accept_delivery("builder", trial_id, 0, {"late": True})
        except DeliveryRejected:
            pass


def main(run_dir: str) -> None:
    store = RunStore.open(run_dir)
    if store.get("run_memory", "v0") is None:
        with store.transition("run_started", actor="harness", subject="run") as tx:
            tx.put("run_memory", "v0", run_memory(0, ()))
    published = store.queue(status="published")
    if published:
        latest = store.latest_run_memory()
        assert latest is not None
        replay = store.publish_run_memory(published[-1].commit_key, latest)
        assert replay.status == "acknowledged", replay
    print("ready", flush=True)
    deadline = time.monotonic() + 30
    n = 1
    while time.monotonic() < deadline:
        step(store, n)
        n += 1


if __name__ == "__main__":
    main(sys.argv[1])
