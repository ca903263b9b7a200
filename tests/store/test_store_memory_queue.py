"""The Run-Memory update queue: enqueued once, published head-first, merged exactly once (App. C.7)."""

from __future__ import annotations

import sqlite3

import pytest
from store_world import plan, plan_memory, run_memory

from ade_core.errors import QueueError, QueueOrderError
from ade_core.store import RunStore, check_store


@pytest.fixture
def store(tmp_path):
    """A run with the empty Run Memory v0 and two Plans whose Plan-Memory updates are queued."""
    with RunStore.open(tmp_path / "run") as opened:
        with opened.transition("run_started", actor="harness", subject="run") as tx:
            tx.put("run_memory", "v0", run_memory(0, ()))
        for n in (1, 2):
            publish_plan_memory(opened, n)
        yield opened


def publish_plan_memory(store: RunStore, n: int):
    with store.transition("plan_memory_published", actor="plan_summarizer", subject=f"C1/P{n}") as tx:
        tx.put("plan", f"C1/P{n}", plan(n))
        tx.put("plan_memory", f"C1/P{n}@v1", plan_memory(n, revision=tx.revision))
        return tx.enqueue_run_memory_update(f"k{n}", f"C1/P{n}@v1")


def test_enqueue_is_idempotent_on_the_commit_key(store):
    with store.transition("replayed", actor="plan_summarizer", subject="C1/P1") as tx:
        again = tx.enqueue_run_memory_update("k1", "C1/P1@v1")
    assert (again.position, again.enqueued_revision) == (1, 2)
    assert [e.commit_key for e in store.queue()] == ["k1", "k2"]


def test_enqueue_refuses_a_conflicting_ref_and_an_unpublished_plan_memory(store):
    with store.transition("t", actor="plan_summarizer", subject="C1/P1") as tx:
        with pytest.raises(QueueError, match="already queued for Plan Memory 'C1/P1@v1', not 'C1/P2@v1'"):
            tx.enqueue_run_memory_update("k1", "C1/P2@v1")
        with pytest.raises(QueueError, match="Plan Memory 'C1/P3@v1' is not stored"):
            tx.enqueue_run_memory_update("k3", "C1/P3@v1")


def test_an_enqueue_rolls_back_with_its_transition(store):
    with pytest.raises(RuntimeError):
        with store.transition("t", actor="plan_summarizer", subject="C1/P3") as tx:
            tx.put("plan_memory", "C1/P3@v1", plan_memory(3))
            tx.enqueue_run_memory_update("k3", "C1/P3@v1")
            raise RuntimeError("summarizer output refused")
    assert [e.commit_key for e in store.queue()] == ["k1", "k2"]
    assert store.get("plan_memory", "C1/P3@v1") is None


def test_the_head_is_the_oldest_pending_entry_and_only_it_may_publish(store):
    assert store.queue_head().commit_key == "k1"
    before = store.revision
    with pytest.raises(QueueOrderError, match="'k2' is not the queue head.*publish 'k1'"):
        store.publish_run_memory("k2", run_memory(1, ("k2",)))
    assert store.revision == before
    assert store.latest_run_memory().version == 0


def test_publication_and_dequeue_are_one_transition(store):
    before = store.revision
    result = store.publish_run_memory("k1", run_memory(1, ("k1",)))
    assert (result.status, result.run_memory_key, result.revision) == ("published", "v1", before + 1)
    assert store.revision == before + 1
    event = store.events()[-1]
    assert (event.kind, event.actor, event.subject) == ("run_memory_published", "run_summarizer", "k1")
    assert store.get("run_memory", "v1").revision == before + 1
    assert result.entry.status == "published" and result.entry.published_revision == before + 1
    assert store.queue_head().commit_key == "k2"
    store.publish_run_memory("k2", run_memory(2, ("k1", "k2")))
    assert store.queue_head() is None
    assert check_store(store) == []


def test_a_replayed_publication_is_acknowledged_not_merged_again(store):
    first = store.publish_run_memory("k1", run_memory(1, ("k1",)))
    revision = store.revision
    replay = store.publish_run_memory("k1", run_memory(1, ("k1",)))
    assert replay.status == "acknowledged"
    assert (replay.run_memory_key, replay.revision) == ("v1", first.revision)
    assert store.revision == revision
    assert len(store.list("run_memory")) == 2 and len(store.history("run_memory", "v1")) == 1
    [operation] = store.operations()
    assert (operation.action, operation.subject) == ("run_memory_acknowledged", "k1")
    assert operation.details["matches_published"] is True
    assert store.queue_head().commit_key == "k2"


def test_a_version_that_does_not_extend_the_latest_by_exactly_the_head_is_refused(store):
    with pytest.raises(QueueError, match="names parent 1, but the latest stored version is v0"):
        store.publish_run_memory("k1", run_memory(2, ("k1",)))
    with pytest.raises(QueueError, match=r"lists commit keys \['k1', 'k1'\], expected \['k1'\]"):
        store.publish_run_memory("k1", run_memory(1, ("k1", "k1")))
    with pytest.raises(QueueError, match="never enqueued"):
        store.publish_run_memory("k9", run_memory(1, ("k9",)))
    assert store.queue_head().commit_key == "k1"
    assert store.latest_run_memory().version == 0


def test_the_queue_order_is_also_enforced_in_sql(store):
    raw = sqlite3.connect(store.path)
    with pytest.raises(sqlite3.IntegrityError, match="only the queue head"):
        raw.execute(
            "UPDATE run_memory_queue SET status = 'published', published_revision = 1, run_memory_key = 'v9' "
            "WHERE commit_key = 'k2'"
        )
    with pytest.raises(sqlite3.IntegrityError, match="never deleted"):
        raw.execute("DELETE FROM run_memory_queue")
    raw.close()
