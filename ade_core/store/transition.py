"""A transition: the handle through which one committed revision writes research state.

Everything written through a ``Transition`` lands in the same SQLite transaction as the event
that records it, so either the event and all of its writes are committed, or none of them.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from ade_core.errors import ImmutableRecordError, TransitionError, did_you_mean
from ade_core.schemas.common import canonical_json, sha256_digest
from ade_core.specs import ROLES
from ade_core.store import memory_queue
from ade_core.store.records import (
    IMMUTABLE_KINDS,
    Delivery,
    Event,
    Expectation,
    Kind,
    QueueEntry,
    StoredDocument,
    validate_document,
)

if TYPE_CHECKING:
    from ade_core.store.db import RunStore


class Transition:
    """The open body of one transition: write documents, register awaited deliveries, enqueue updates.

    Obtained from ``RunStore.transition`` (or ``RunStore.delivery``); usable only inside its
    ``with`` block. ``revision`` is the revision this transition commits as.
    """

    def __init__(self, store: RunStore, conn: sqlite3.Connection, event: Event, delivery: Delivery | None = None):
        self._store = store
        self._conn = conn
        self.event = event
        self.revision = event.revision
        self.delivery = delivery
        self._closed = False

    def _check_open(self) -> None:
        if self._closed:
            raise TransitionError(
                f"transition {self.event.kind!r} (revision {self.revision}) is already closed; "
                "write only inside its `with` block"
            )

    def close(self) -> None:
        """Forbid further use; called by the store when the ``with`` block ends."""
        self._closed = True

    def put(self, kind: Kind, key: str, document: BaseModel | Mapping[str, Any]) -> StoredDocument:
        """Write ``document`` as the current version of ``kind``/``key`` at this revision.

        The document is validated against its kind's schema and must be stored under its own
        identity (see ``natural_key``). Writing the identical document again is a no-op that
        returns the stored row, so replayed transitions are idempotent; changing an immutable
        kind (plan, plan_memory, run_memory, ledger) raises ``ImmutableRecordError``.
        """
        self._check_open()
        data = validate_document(kind, key, document)
        digest = sha256_digest(data)
        current = self._store.get(kind, key)
        if current is not None:
            if current.digest == digest:
                return current
            if kind in IMMUTABLE_KINDS:
                raise ImmutableRecordError(
                    f"{kind} {key!r} is immutable (written at revision {current.revision} as {current.digest}, "
                    f"new content {digest}); publish a new version under a new key instead"
                )
        self._conn.execute(
            "INSERT INTO documents (kind, key, revision, document, digest) VALUES (?, ?, ?, ?, ?)",
            (kind, key, self.revision, canonical_json(data), digest),
        )
        return StoredDocument(kind=kind, key=key, revision=self.revision, document=data, digest=digest)

    def get(self, kind: Kind, key: str) -> StoredDocument | None:
        """The current version of ``kind``/``key``, including writes made earlier in this transition."""
        self._check_open()
        return self._store.get(kind, key)

    def list(self, kind: Kind) -> list[StoredDocument]:
        """Current versions of every ``kind`` document, including this transition's writes."""
        self._check_open()
        return self._store.list(kind)

    def expect_delivery(self, role: str, subject: str, *, basis_revision: int | None = None) -> Expectation:
        """Register that ``role`` is to deliver for ``subject`` from a view built at ``basis_revision``.

        The basis defaults to this transition's revision: the view shows the state this transition
        commits. Registering again for the same role and subject withdraws the earlier expectation
        (a retried call gets a fresh view), so a late delivery for the old view is rejected as stale.
        """
        self._check_open()
        if role not in ROLES:
            raise TransitionError(f"unknown role {role!r}{did_you_mean(str(role), ROLES)}; roles: {ROLES}")
        if not isinstance(subject, str) or not subject:
            raise TransitionError(f"an expectation needs a non-empty subject string (got {subject!r})")
        basis = self.revision if basis_revision is None else basis_revision
        if isinstance(basis, bool) or not isinstance(basis, int) or not 0 <= basis <= self.revision:
            raise TransitionError(
                f"basis_revision must be an int in [0, {self.revision}] (got {basis_revision!r}); "
                "a view cannot be built from a revision that does not exist yet"
            )
        self.withdraw_expectation(role, subject)
        cursor = self._conn.execute(
            "INSERT INTO expectations (role, subject, basis_revision, registered_revision, status) "
            "VALUES (?, ?, ?, ?, 'awaiting')",
            (role, subject, basis, self.revision),
        )
        return Expectation(
            expectation_id=int(cursor.lastrowid or 0),
            role=role,
            subject=subject,
            basis_revision=basis,
            registered_revision=self.revision,
            status="awaiting",
            closed_revision=None,
        )

    def withdraw_expectation(self, role: str, subject: str) -> Expectation | None:
        """Stop awaiting ``role``'s delivery for ``subject``; return the withdrawn expectation, if any."""
        self._check_open()
        awaiting = self._store.awaited(role, subject)
        if awaiting is None:
            return None
        self._conn.execute(
            "UPDATE expectations SET status = 'withdrawn', closed_revision = ? WHERE expectation_id = ?",
            (self.revision, awaiting.expectation_id),
        )
        return self._store.expectation(awaiting.expectation_id)

    def enqueue_run_memory_update(self, commit_key: str, plan_memory_ref: str) -> QueueEntry:
        """Queue the Plan-Memory version ``plan_memory_ref`` for the Run-Memory writer under ``commit_key``.

        Call it in the transition that publishes that Plan-Memory version (App. C.7: Plan Memory
        is committed before its update is queued, exactly once). Enqueuing a key already queued
        returns the existing entry and writes nothing.
        """
        self._check_open()
        return memory_queue.enqueue(self._conn, self._store, commit_key, plan_memory_ref, self.revision)
