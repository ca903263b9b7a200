"""Reading a run store: documents by kind and key (now or as of a revision), events, deliveries, the queue.

Reads outside a transition each see the latest committed revision; ``snapshot`` pins one revision
for a group of reads. Inside an open transition they also see that transition's own writes.
"""

from __future__ import annotations

import builtins
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Literal, overload

from ade_core.schemas import Attempt, LedgerEntry, Plan, PlanMemory, RunMemory, RunRecord, Trial
from ade_core.schemas.common import Model
from ade_core.store import deliveries, memory_queue
from ade_core.store.records import (
    Delivery,
    Event,
    Expectation,
    Kind,
    Operation,
    QueueEntry,
    StoredDocument,
    check_kind,
    loads,
)

_DOC_COLUMNS = "kind, key, revision, document, digest"


def _document(row: tuple) -> StoredDocument:
    return StoredDocument(kind=row[0], key=row[1], revision=row[2], document=loads(row[3]), digest=row[4])


class StoreReads:
    """The read side of ``RunStore``: every query over one SQLite connection."""

    _conn: sqlite3.Connection
    _in_transaction: bool

    @property
    def schema_version(self) -> int:
        """The schema version recorded in the store's ``meta`` table."""
        return int(self._conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0])

    @property
    def revision(self) -> int:
        """The run's revision: the number of committed transitions (0 for a new run)."""
        return int(self._conn.execute("SELECT COALESCE(MAX(revision), 0) FROM events").fetchone()[0])

    def awaited(self, role: str, subject: str) -> Expectation | None:
        """The expectation currently awaiting ``role``'s delivery for ``subject``, if any."""
        row = self._conn.execute(
            f"SELECT {deliveries.EXPECTATION_COLUMNS} FROM expectations "
            "WHERE role = ? AND subject = ? AND status = 'awaiting'",
            (role, subject),
        ).fetchone()
        return deliveries.expectation_from_row(row) if row else None

    def expectation(self, expectation_id: int) -> Expectation | None:
        """The expectation with ``expectation_id``, in whatever status."""
        row = self._conn.execute(
            f"SELECT {deliveries.EXPECTATION_COLUMNS} FROM expectations WHERE expectation_id = ?", (expectation_id,)
        ).fetchone()
        return deliveries.expectation_from_row(row) if row else None

    def expectations(self, *, subject: str | None = None) -> list[Expectation]:
        """Every expectation (optionally for one subject), in registration order."""
        sql = f"SELECT {deliveries.EXPECTATION_COLUMNS} FROM expectations"
        rows = (
            self._conn.execute(sql + " WHERE subject = ? ORDER BY expectation_id", (subject,))
            if subject is not None
            else self._conn.execute(sql + " ORDER BY expectation_id")
        )
        return [deliveries.expectation_from_row(row) for row in rows.fetchall()]

    def accepted_deliveries(self, *, subject: str | None = None) -> list[Delivery]:
        """Accepted deliveries (optionally for one subject), oldest first: recovery reuses these, never re-asks."""
        sql = (
            "SELECT e.expectation_id, e.role, e.subject, e.basis_revision, d.revision, d.payload, d.digest "
            "FROM deliveries d JOIN expectations e USING (expectation_id)"
        )
        rows = (
            self._conn.execute(sql + " WHERE e.subject = ? ORDER BY d.revision", (subject,))
            if subject is not None
            else self._conn.execute(sql + " ORDER BY d.revision")
        )
        return [Delivery(r[0], r[1], r[2], r[3], r[4], loads(r[5]), r[6]) for r in rows.fetchall()]

    def queue_head(self) -> QueueEntry | None:
        """The oldest pending Run-Memory update: the only one that may be published next."""
        return memory_queue.head(self._conn)

    def queue(self, *, status: Literal["pending", "published"] | None = None) -> list[QueueEntry]:
        """Every queue entry in FIFO order, optionally only pending or only published ones."""
        return memory_queue.entries(self._conn, status)

    def latest_run_memory(self) -> RunMemory | None:
        """The most recently published Run-Memory version, if any."""
        row = self._conn.execute(
            f"SELECT {_DOC_COLUMNS} FROM documents WHERE kind = 'run_memory' ORDER BY seq DESC LIMIT 1"
        ).fetchone()
        return RunMemory.model_validate(loads(row[3])) if row else None

    # -- reads ---------------------------------------------------------------------------------

    def get(self, kind: Kind, key: str, *, at_revision: int | None = None) -> StoredDocument | None:
        """The current version of ``kind``/``key`` (as of ``at_revision`` when given), or None."""
        check_kind(kind)
        limit = "" if at_revision is None else " AND revision <= ?"
        args: tuple[Any, ...] = (kind, key) if at_revision is None else (kind, key, at_revision)
        row = self._conn.execute(
            f"SELECT {_DOC_COLUMNS} FROM documents WHERE kind = ? AND key = ?{limit} ORDER BY seq DESC LIMIT 1", args
        ).fetchone()
        return _document(row) if row else None

    @overload
    def get_model(self, kind: Literal["plan"], key: str, *, at_revision: int | None = None) -> Plan | None: ...
    @overload
    def get_model(self, kind: Literal["trial"], key: str, *, at_revision: int | None = None) -> Trial | None: ...
    @overload
    def get_model(self, kind: Literal["attempt"], key: str, *, at_revision: int | None = None) -> Attempt | None: ...
    @overload
    def get_model(
        self, kind: Literal["plan_memory"], key: str, *, at_revision: int | None = None
    ) -> PlanMemory | None: ...
    @overload
    def get_model(
        self, kind: Literal["run_memory"], key: str, *, at_revision: int | None = None
    ) -> RunMemory | None: ...
    @overload
    def get_model(self, kind: Literal["ledger"], key: str, *, at_revision: int | None = None) -> LedgerEntry | None: ...
    @overload
    def get_model(self, kind: Literal["run"], key: str, *, at_revision: int | None = None) -> RunRecord | None: ...

    def get_model(self, kind: Kind, key: str, *, at_revision: int | None = None) -> Model | None:
        """Like ``get``, parsed as the kind's schema model (``Plan``, ``Trial``, ``PlanMemory``, ...)."""
        stored = self.get(kind, key, at_revision=at_revision)
        return stored.model() if stored else None

    def list(self, kind: Kind, *, at_revision: int | None = None) -> list[StoredDocument]:
        """Current versions of every ``kind`` document, in the order they were first written."""
        check_kind(kind)
        limit = "" if at_revision is None else " AND revision <= ?"
        args: tuple[Any, ...] = (kind,) if at_revision is None else (kind, at_revision)
        rows = self._conn.execute(
            f"SELECT d.kind, d.key, d.revision, d.document, d.digest FROM documents d JOIN "
            f"(SELECT MIN(seq) AS first, MAX(seq) AS last FROM documents WHERE kind = ?{limit} GROUP BY key) g "
            "ON d.seq = g.last ORDER BY g.first",
            args,
        ).fetchall()
        return [_document(row) for row in rows]

    def history(self, kind: Kind, key: str) -> builtins.list[StoredDocument]:
        """Every version ever written of ``kind``/``key``, oldest first."""
        check_kind(kind)
        rows = self._conn.execute(
            f"SELECT {_DOC_COLUMNS} FROM documents WHERE kind = ? AND key = ? ORDER BY seq", (kind, key)
        ).fetchall()
        return [_document(row) for row in rows]

    def events(self, *, since: int = 0) -> builtins.list[Event]:
        """Committed events with revision > ``since``, in revision order."""
        rows = self._conn.execute(
            "SELECT revision, kind, actor, subject, payload, payload_digest, at FROM events "
            "WHERE revision > ? ORDER BY revision",
            (since,),
        ).fetchall()
        return [Event(r[0], r[1], r[2], r[3], loads(r[4]), r[5], r[6]) for r in rows]

    def event(self, revision: int) -> Event | None:
        """The event committed as ``revision``, if it exists."""
        r = self._conn.execute(
            "SELECT revision, kind, actor, subject, payload, payload_digest, at FROM events WHERE revision = ?",
            (revision,),
        ).fetchone()
        return Event(r[0], r[1], r[2], r[3], loads(r[4]), r[5], r[6]) if r else None

    def operations(self) -> builtins.list[Operation]:
        """The operations log, oldest first."""
        rows = self._conn.execute(
            "SELECT seq, action, subject, details, revision, at FROM operations ORDER BY seq"
        ).fetchall()
        return [Operation(r[0], r[1], r[2], loads(r[3]), r[4], r[5]) for r in rows]

    @contextmanager
    def snapshot(self) -> Iterator[sqlite3.Connection]:
        """A read transaction: every query inside sees one committed revision, however writers proceed.

        Inside an open transition it simply yields (that transaction already is a snapshot).
        """
        if self._in_transaction or self._conn.in_transaction:
            yield self._conn
            return
        self._conn.execute("BEGIN DEFERRED")
        try:
            yield self._conn
        finally:
            self._conn.execute("COMMIT")
