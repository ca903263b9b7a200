"""Deliveries are accepted only against an awaited expectation; every rejection is a recorded event."""

from __future__ import annotations

import pytest
from store_world import plan, trial

from ade_core.errors import DeliveryRejected, TransitionError
from ade_core.schemas import Plan, sha256_digest
from ade_core.store import RunStore, check_store

TRIAL = "C1/P1/T1"


@pytest.fixture
def store(tmp_path):
    """A run awaiting the Builder's strategy for Trial C1/P1/T1, from the view at revision 1."""
    with RunStore.open(tmp_path / "run") as opened:
        with opened.transition("plan_admitted", actor="harness", subject="C1/P1") as tx:
            tx.put("plan", "C1/P1", plan(1))
            tx.put("trial", TRIAL, trial(1))
            tx.expect_delivery("builder", TRIAL)
        yield opened


def rejected(store: RunStore, *args, **kwargs) -> DeliveryRejected:
    """Deliver, expect a rejection, and check it was committed as its own event."""
    before = store.revision
    with pytest.raises(DeliveryRejected) as info:
        store.accept_delivery(*args, **kwargs)
    error = info.value
    assert store.revision == before + 1 == error.revision
    event = store.events(since=before)[0]
    assert (event.kind, event.actor) == ("delivery_rejected", "harness")
    assert event.payload["reason"] == error.reason
    assert event.payload["detail"] in str(error)
    assert check_store(store) == []
    return error


def test_a_matching_delivery_is_accepted_together_with_what_it_commits(store):
    with store.delivery("builder", TRIAL, 1, {"strategy": "dedup"}) as tx:
        assert tx.delivery is not None and tx.delivery.payload == {"strategy": "dedup"}
        tx.put("trial", TRIAL, trial(1, status="building"))
    assert store.revision == 2
    event = store.events()[-1]
    assert (event.kind, event.actor, event.subject) == ("delivery_accepted", "builder", TRIAL)
    assert event.payload["payload_digest"] == sha256_digest({"strategy": "dedup"})
    [expectation] = store.expectations(subject=TRIAL)
    assert (expectation.status, expectation.closed_revision) == ("fulfilled", 2)
    assert store.get("trial", TRIAL).revision == 2
    assert store.awaited("builder", TRIAL) is None
    [delivery] = store.accepted_deliveries(subject=TRIAL)
    assert (delivery.role, delivery.revision, delivery.payload) == ("builder", 2, {"strategy": "dedup"})


def test_a_failing_body_rolls_back_the_acceptance_too(store):
    with pytest.raises(ValueError, match="admission"):
        with store.delivery("builder", TRIAL, 1, {"strategy": "dedup"}):
            raise ValueError("admission refused the strategy")
    assert store.revision == 1
    assert store.awaited("builder", TRIAL).basis_revision == 1
    assert store.accept_delivery("builder", TRIAL, 1, {"strategy": "dedup"}).revision == 2


def test_a_delivery_from_an_older_view_is_stale(store):
    error = rejected(store, "builder", TRIAL, 0, {"strategy": "dedup"})
    assert error.reason == "stale"
    assert "basis revision 0" in str(error) and "built at revision 1" in str(error)
    assert store.awaited("builder", TRIAL).status == "awaiting"  # still awaited
    assert store.accept_delivery("builder", TRIAL, 1, {"strategy": "dedup"}).basis_revision == 1


def test_a_retried_call_withdraws_the_old_view(store):
    with store.transition("builder_retry", actor="harness", subject=TRIAL) as tx:
        fresh = tx.expect_delivery("builder", TRIAL)
    assert fresh.basis_revision == 2
    assert [e.status for e in store.expectations(subject=TRIAL)] == ["withdrawn", "awaiting"]
    assert rejected(store, "builder", TRIAL, 1, {"strategy": "old"}).reason == "stale"
    assert store.accept_delivery("builder", TRIAL, 2, {"strategy": "new"}).expectation_id == fresh.expectation_id


def test_a_second_delivery_for_a_fulfilled_expectation_is_a_duplicate(store):
    store.accept_delivery("builder", TRIAL, 1, {"strategy": "dedup"})
    error = rejected(store, "builder", TRIAL, 1, {"strategy": "dedup"})
    assert error.reason == "duplicate"
    assert "accepted at revision 2" in str(error)
    # Still a duplicate when a newer call for the same role and subject is open.
    with store.transition("next_build", actor="harness", subject=TRIAL) as tx:
        tx.expect_delivery("builder", TRIAL)
    assert rejected(store, "builder", TRIAL, 1, {"strategy": "dedup"}).reason == "duplicate"


def test_a_delivery_from_another_role_is_foreign(store):
    error = rejected(store, "analyzer", TRIAL, 1, {"analysis": "x"})
    assert error.reason == "foreign"
    assert f"{TRIAL!r} awaits a delivery from builder, not from analyzer" in str(error)
    assert store.awaited("builder", TRIAL) is not None


def test_a_delivery_nobody_asked_for_is_unexpected(store):
    error = rejected(store, "builder", "C9/P9/T9", 1, {"strategy": "dedup"})
    assert error.reason == "unexpected"
    assert store.events()[-1].subject == "C9/P9/T9"


@pytest.mark.parametrize(
    ("role", "subject", "basis", "payload", "match"),
    [
        ("bilder", TRIAL, 1, {}, "did you mean 'builder'"),
        ("builder", "", 1, {}, "non-empty string"),
        ("builder", TRIAL, "1", {}, "must be an int"),
        ("builder", TRIAL, 99, {}, "basis revision 99 does not exist"),
        ("builder", TRIAL, 1, ["not", "an", "object"], "must be a JSON object"),
        ("builder", TRIAL, 1, {"x": float("inf")}, "not JSON-serializable"),
    ],
)
def test_malformed_deliveries_are_rejected_and_recorded(store, role, subject, basis, payload, match):
    error = rejected(store, role, subject, basis, payload)
    assert error.reason == "malformed"
    assert match in str(error)
    assert store.awaited("builder", TRIAL) is not None


def test_a_payload_that_fails_its_model_is_malformed(store):
    with store.transition("plan_call", actor="harness", subject="C1/P2") as tx:
        tx.expect_delivery("coordinator", "C1/P2")
    error = rejected(store, "coordinator", "C1/P2", 2, {"plan_id": "C1/P2"}, model=Plan)
    assert error.reason == "malformed" and "does not validate as Plan" in str(error)
    accepted = store.accept_delivery("coordinator", "C1/P2", 2, plan(2), model=Plan)
    assert Plan.model_validate(accepted.payload) == plan(2)


def test_expect_delivery_on_its_own_and_its_checks(store):
    expectation = store.expect_delivery("analyzer", TRIAL)
    assert expectation.basis_revision == store.revision == 2
    assert store.events()[-1].kind == "delivery_awaited"
    with store.transition("t", actor="harness", subject=TRIAL) as tx:
        with pytest.raises(TransitionError, match="did you mean 'review_worker'"):
            tx.expect_delivery("review_workr", TRIAL)
        with pytest.raises(TransitionError, match=r"basis_revision must be an int in \[0, 3\]"):
            tx.expect_delivery("analyzer", TRIAL, basis_revision=4)
