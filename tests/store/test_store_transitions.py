"""Transitions: one transaction, one revision, one append-only event; typed documents per kind."""

from __future__ import annotations

import sqlite3
from datetime import datetime

import pytest
from store_world import attempt, ledger, plan, plan_memory, trial

from ade_core.errors import (
    ImmutableRecordError,
    InvalidDocumentError,
    StoreBusyError,
    TransitionError,
)
from ade_core.schemas import Plan, sha256_digest
from ade_core.store import RunStore, check_store


@pytest.fixture
def store(tmp_path):
    with RunStore.open(tmp_path / "run") as opened:
        yield opened


def test_a_transition_bumps_the_revision_and_appends_its_event(store):
    with store.transition("plan_admitted", actor="harness", subject="C1/P1", payload={"why": "new"}) as tx:
        assert tx.revision == 1
        written = tx.put("plan", "C1/P1", plan(1))
    assert store.revision == 1
    [event] = store.events()
    assert (event.revision, event.kind, event.actor, event.subject) == (1, "plan_admitted", "harness", "C1/P1")
    assert event.payload == {"why": "new"}
    assert event.payload_digest == sha256_digest({"why": "new"})
    assert datetime.fromisoformat(event.at).utcoffset().total_seconds() == 0
    assert written.revision == 1
    assert store.get("plan", "C1/P1").digest == plan(1).digest()


def test_a_failing_body_commits_nothing_and_keeps_the_revision(store, tmp_path):
    with store.transition("run_started", actor="harness", subject="run"):
        pass
    with pytest.raises(RuntimeError, match="admission failed"):
        with store.transition("plan_admitted", actor="harness", subject="C1/P1") as tx:
            tx.put("plan", "C1/P1", plan(1))
            tx.put("trial", "C1/P1/T1", trial(1))
            tx.expect_delivery("builder", "C1/P1/T1")
            raise RuntimeError("admission failed")
    assert store.revision == 1
    assert store.get("plan", "C1/P1") is None
    assert store.expectations() == []
    with RunStore.open(tmp_path / "run") as other:  # another connection sees the same
        assert other.revision == 1
        assert other.list("trial") == []
    # The next transition takes the next revision, without a gap.
    with store.transition("plan_admitted", actor="harness", subject="C1/P1") as tx:
        assert tx.revision == 2


def test_events_and_documents_are_append_only_in_sql(store):
    with store.transition("plan_admitted", actor="harness", subject="C1/P1") as tx:
        tx.put("plan", "C1/P1", plan(1))
    raw = sqlite3.connect(store.path)
    for statement in (
        "UPDATE events SET kind = 'forged' WHERE revision = 1",
        "DELETE FROM events WHERE revision = 1",
        "UPDATE documents SET document = '{}'",
        "DELETE FROM documents",
    ):
        with pytest.raises(sqlite3.IntegrityError, match="append-only"):
            raw.execute(statement)
    with pytest.raises(sqlite3.IntegrityError, match="contiguous"):
        raw.execute("INSERT INTO events VALUES (5, 'k', 'harness', 's', '{}', 'd', 'now')")
    raw.close()
    assert store.events()[0].kind == "plan_admitted"


def test_transitions_do_not_nest_and_the_outer_one_rolls_back(store):
    with pytest.raises(TransitionError, match="do not nest"):
        with store.transition("outer", actor="harness", subject="run") as tx:
            tx.put("plan", "C1/P1", plan(1))
            with store.transition("inner", actor="harness", subject="run"):
                pass
    assert store.revision == 0
    assert store.get("plan", "C1/P1") is None


def test_a_transition_handle_is_dead_after_its_block(store):
    with store.transition("plan_admitted", actor="harness", subject="C1/P1") as tx:
        pass
    with pytest.raises(TransitionError, match="already closed"):
        tx.put("plan", "C1/P1", plan(1))
    assert store.get("plan", "C1/P1") is None


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"actor": "harnes", "subject": "run"}, "did you mean 'harness'"),
        ({"actor": "harness", "subject": ""}, "non-empty subject"),
        ({"actor": "harness", "subject": "run", "payload": {"x": float("nan")}}, "not JSON-serializable"),
        ({"actor": "harness", "subject": "run", "payload": {"x": {1, 2}}}, "not JSON-serializable"),
    ],
)
def test_invalid_transition_fields_are_refused_before_anything_is_written(store, kwargs, match):
    with pytest.raises(TransitionError, match=match):
        with store.transition("k", **kwargs):
            pass
    assert store.revision == 0


def test_documents_are_validated_against_their_kind_and_identity(store):
    with store.transition("t", actor="harness", subject="run") as tx:
        with pytest.raises(InvalidDocumentError, match="does not validate as Plan"):
            tx.put("plan", "C1/P1", {"plan_id": "C1/P1"})
        with pytest.raises(InvalidDocumentError, match="identity is 'C1/P1'; use 'C1/P1'"):
            tx.put("plan", "C1/P9", plan(1))
        with pytest.raises(InvalidDocumentError, match="must be a Trial"):
            tx.put("trial", "C1/P1", plan(1))
        with pytest.raises(InvalidDocumentError, match="did you mean 'plan_memory'"):
            tx.put("plan_memry", "x", {})  # type: ignore[arg-type]
        # A mapping is accepted when it validates, and stored in the schema's JSON form.
        stored = tx.put("plan", "C1/P2", plan(2).model_dump(mode="json"))
    assert stored.model() == plan(2)


def test_immutable_kinds_refuse_change_and_identical_rewrites_are_no_ops(store):
    with store.transition("t1", actor="harness", subject="C1/P1") as tx:
        tx.put("plan", "C1/P1", plan(1))
        tx.put("plan_memory", "C1/P1@v1", plan_memory(1))
        tx.put("ledger", "1", ledger(1))
    with store.transition("t2", actor="harness", subject="C1/P1") as tx:
        again = tx.put("plan", "C1/P1", plan(1))
        assert again.revision == 1
        with pytest.raises(ImmutableRecordError, match=r"plan 'C1/P1' is immutable \(written at revision 1"):
            tx.put("plan", "C1/P1", plan(1, hypothesis="Something else."))
        with pytest.raises(ImmutableRecordError, match="new version under a new key"):
            tx.put("plan_memory", "C1/P1@v1", plan_memory(1, revision=2))
    assert len(store.history("plan", "C1/P1")) == 1


def test_mutable_kinds_keep_every_version_and_reads_can_go_back_in_time(store):
    with store.transition("t1", actor="harness", subject="C1/P1/T1") as tx:
        tx.put("trial", "C1/P1/T1", trial(1))
        tx.put("attempt", "C1/P1/T1/a1", attempt(1, 1))
    with store.transition("t2", actor="harness", subject="C1/P1/T1") as tx:
        tx.put("trial", "C1/P1/T1", trial(1, status="running", attempts=("C1/P1/T1/a1",)))
        assert tx.get("trial", "C1/P1/T1").document["status"] == "running"  # its own write
    assert store.get_model("trial", "C1/P1/T1").status == "running"
    assert store.get_model("trial", "C1/P1/T1", at_revision=1).status == "planned"
    assert store.get("trial", "C1/P1/T1", at_revision=0) is None
    assert [d.revision for d in store.history("trial", "C1/P1/T1")] == [1, 2]
    assert store.get_model("attempt", "C1/P1/T1/a1").number == 1


def test_list_returns_current_versions_in_first_write_order(store):
    with store.transition("t1", actor="harness", subject="run") as tx:
        tx.put("plan", "C1/P2", plan(2))
        tx.put("trial", "C1/P2/T1", trial(2))
    with store.transition("t2", actor="harness", subject="run") as tx:
        tx.put("plan", "C1/P1", plan(1))
        tx.put("trial", "C1/P1/T1", trial(1))
        tx.put("trial", "C1/P2/T1", trial(2, status="running"))
    assert [d.key for d in store.list("plan")] == ["C1/P2", "C1/P1"]
    assert [(d.key, d.document["status"]) for d in store.list("trial")] == [
        ("C1/P2/T1", "running"),
        ("C1/P1/T1", "planned"),
    ]
    assert [d.key for d in store.list("trial", at_revision=1)] == ["C1/P2/T1"]
    assert isinstance(store.get_model("plan", "C1/P1"), Plan)


def test_a_second_writer_waits_for_the_lock_and_then_gives_up_with_a_typed_error(store, tmp_path):
    with RunStore.open(tmp_path / "run", busy_timeout_s=0.2) as other:
        with store.transition("holding", actor="harness", subject="run"):
            with pytest.raises(StoreBusyError, match="one controller process owns a run"):
                with other.transition("blocked", actor="harness", subject="run"):
                    pass
        with other.transition("after", actor="harness", subject="run") as tx:
            assert tx.revision == 2


def test_a_snapshot_reads_one_revision_while_another_writer_commits(store, tmp_path):
    with store.transition("t1", actor="harness", subject="run") as tx:
        tx.put("plan", "C1/P1", plan(1))
    with RunStore.open(tmp_path / "run") as writer:
        with store.snapshot():
            assert store.revision == 1
            with writer.transition("t2", actor="harness", subject="run") as tx:
                tx.put("plan", "C1/P2", plan(2))
            assert store.revision == 1
            assert store.get("plan", "C1/P2") is None
    assert store.revision == 2


def test_the_operations_log_is_apart_from_events_and_revisions(store):
    with store.transition("t1", actor="harness", subject="run"):
        pass
    seq = store.record_operation("attempt_fenced", subject="C1/P1/T1", details={"attempt": "a1"})
    [operation] = store.operations()
    assert (operation.seq, operation.action, operation.subject, operation.revision) == (
        seq,
        "attempt_fenced",
        "C1/P1/T1",
        1,
    )
    assert operation.details == {"attempt": "a1"}
    assert store.revision == 1 and len(store.events()) == 1
    with store.transition("t2", actor="harness", subject="run"):
        with pytest.raises(TransitionError, match="inside an open transition"):
            store.record_operation("resumed")
    raw = sqlite3.connect(store.path)
    with pytest.raises(sqlite3.IntegrityError, match="append-only"):
        raw.execute("DELETE FROM operations")
    raw.close()


def test_check_store_reports_a_revision_gap(store):
    for n in (1, 2, 3):
        with store.transition("t", actor="harness", subject=f"s{n}"):
            pass
    assert check_store(store) == []
    raw = sqlite3.connect(store.path)
    raw.execute("DROP TRIGGER events_no_delete")
    raw.execute("DELETE FROM events WHERE revision = 2")
    raw.commit()
    raw.close()
    assert check_store(store) == ["event revisions are not 1..2 without gaps"]
