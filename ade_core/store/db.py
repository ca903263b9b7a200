"""The run store: one SQLite file per run holding every committed research transition.

Only the Harness commits (paper Sec 3): each transition is one ``BEGIN IMMEDIATE`` transaction
that bumps the run's revision by one, appends an immutable event, and writes the state it
changes. Readers see whole revisions or nothing.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from ade_core.errors import (
    DeliveryRejected,
    InvalidDocumentError,
    NotARunError,
    QueueError,
    SchemaVersionError,
    StoreBusyError,
    StoreError,
    TransitionError,
)
from ade_core.schemas import RunMemory
from ade_core.schemas.common import canonical_json, sha256_digest
from ade_core.store import deliveries, memory_queue
from ade_core.store.objects import ObjectStore
from ade_core.store.reads import StoreReads
from ade_core.store.records import (
    Actor,
    Delivery,
    Event,
    Expectation,
    PublishResult,
    check_actor,
    json_document,
    loads,
    natural_key,
    utc_now,
)
from ade_core.store.schema import SCHEMA_VERSION, current_version, migrate
from ade_core.store.transition import Transition

STATE_FILE = "state.sqlite"


class _Refusal(Exception):
    """Internal: unwinds a delivery's transaction so its rejection can be recorded on its own."""

    def __init__(self, verdict: deliveries.Verdict):
        self.verdict = verdict


class RunStore(StoreReads):
    """Durable, transactional research state of one run (``<run_dir>/state.sqlite``) plus its object store.

    Durability: ``synchronous=FULL``. In WAL mode ``NORMAL`` survives a process crash but may lose
    the last commits on power loss or an OS crash; a lost commit would make the Harness re-ask an
    agent a question it had already answered and acted on (e.g. launched the Engine), which
    recovery must never do. Transitions are few (a handful per Trial, each minutes apart), so the
    extra fsync per commit costs nothing measurable.

    One controller process owns a run; other processes may open the store too (WAL lets readers
    run beside the writer, and ``busy_timeout`` serializes writers). A ``RunStore`` object belongs
    to the thread that opened it.
    """

    def __init__(self, conn: sqlite3.Connection, run_dir: Path, busy_timeout_s: float):
        self._conn = conn
        self.run_dir = run_dir
        self.path = run_dir / STATE_FILE
        self.busy_timeout_s = busy_timeout_s
        self.objects = ObjectStore(run_dir)
        self._in_transaction = False

    # -- lifecycle -----------------------------------------------------------------------------

    @classmethod
    def open(cls, run_dir: Path | str, *, busy_timeout_s: float = 30.0) -> RunStore:
        """Create or open the store in ``run_dir``, set its pragmas and apply pending migrations.

        Raises ``SchemaVersionError`` for a store written by a newer ADE, and ``StoreError`` when
        the file is not a database or the filesystem cannot hold a WAL journal.
        """
        run_dir = Path(run_dir)
        run_dir.mkdir(parents=True, exist_ok=True)
        path = run_dir / STATE_FILE
        conn = sqlite3.connect(path, isolation_level=None, timeout=busy_timeout_s)
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_s * 1000)}")
            mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                raise StoreError(
                    f"run store {path} cannot use WAL journaling (SQLite kept journal_mode={mode!r}); "
                    "put the run directory on a local filesystem"
                )
            conn.execute("PRAGMA synchronous = FULL")
            conn.execute("PRAGMA foreign_keys = ON")
            migrate(conn, path)
        except sqlite3.DatabaseError as exc:
            conn.close()
            raise StoreError(f"cannot open run store {path}: {exc}; is it an ADE run directory?") from exc
        except BaseException:
            conn.close()
            raise
        return cls(conn, run_dir, busy_timeout_s)

    @classmethod
    def open_read_only(cls, run_dir: Path | str, *, busy_timeout_s: float = 30.0) -> RunStore:
        """Open the existing store in ``run_dir`` for reading only (``ade status``, ``ade report``, fork sources).

        Nothing is created, migrated or changed, and every write fails. While another connection has the
        store open (its ``-wal`` file exists) this is a WAL reader (``mode=ro``), which shares SQLite's
        index files with the writer; with none open, every commit is in the main file and it is read as
        ``immutable``, so not even those index files appear. Raises ``StoreError`` when ``run_dir`` holds no
        store, and for a store whose schema version differs from this ADE's (a writing command migrates it).
        """
        run_dir = Path(run_dir)
        path = run_dir / STATE_FILE
        if not path.is_file():
            raise StoreError(f"{run_dir} holds no run store ({STATE_FILE})")
        live = path.with_name(f"{STATE_FILE}-wal").exists()
        uri = f"{path.resolve().as_uri()}?{'mode=ro' if live else 'immutable=1'}"
        conn = sqlite3.connect(uri, uri=True, isolation_level=None)
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_s * 1000)}")
            found = current_version(conn)
        except sqlite3.DatabaseError as exc:
            conn.close()
            raise StoreError(f"cannot read run store {path}: {exc}; is it an ADE run directory?") from exc
        if found == 0:
            conn.close()
            raise NotARunError(f"{path} is not an ADE run store (it has no ADE schema)")
        if found != SCHEMA_VERSION:
            conn.close()
            newer = found > SCHEMA_VERSION
            raise (SchemaVersionError if newer else StoreError)(
                f"run store {path} has schema version {found}, this ADE reads version {SCHEMA_VERSION}; "
                + ("upgrade ADE (pip install -U ade-core)" if newer else "`ade resume` upgrades it")
            )
        return cls(conn, run_dir, busy_timeout_s)

    def close(self) -> None:
        """Close the database connection (committed state is already durable)."""
        self._conn.close()

    def __enter__(self) -> RunStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- transitions ---------------------------------------------------------------------------

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One ``BEGIN IMMEDIATE`` transaction: committed if the body returns, rolled back if it raises."""
        if self._in_transaction or self._conn.in_transaction:
            raise TransitionError(
                f"a transition or read snapshot is already open on {self.path}; transitions do not nest — "
                "do the work inside the open one"
            )
        try:
            self._conn.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            raise StoreBusyError(
                f"run store {self.path} stayed locked by another writer for {self.busy_timeout_s}s ({exc}); "
                "one controller process owns a run — stop the other writer or raise busy_timeout_s"
            ) from exc
        self._in_transaction = True
        try:
            yield self._conn
            self._conn.execute("COMMIT")
        except BaseException:
            if self._conn.in_transaction:
                self._conn.execute("ROLLBACK")
            raise
        finally:
            self._in_transaction = False

    def _append_event(self, kind: str, actor: str, subject: str, payload: Mapping[str, Any]) -> Event:
        """Insert the next revision's event inside the open transaction."""
        data = loads(json_document(dict(payload), f"the payload of transition {kind!r}"))
        revision = self.revision + 1
        event = Event(revision, kind, actor, subject, data, sha256_digest(data), utc_now())
        self._conn.execute(
            "INSERT INTO events (revision, kind, actor, subject, payload, payload_digest, at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            (revision, kind, actor, subject, canonical_json(data), event.payload_digest, event.at),
        )
        return event

    @staticmethod
    def _check_transition(kind: str, actor: str, subject: str, payload: Any) -> None:
        if not isinstance(kind, str) or not kind:
            raise TransitionError(f"a transition needs a non-empty kind string (got {kind!r})")
        check_actor(actor)
        if not isinstance(subject, str) or not subject:
            raise TransitionError(f"transition {kind!r} needs a non-empty subject string (got {subject!r})")
        if not isinstance(payload, Mapping):
            raise TransitionError(f"the payload of transition {kind!r} must be a mapping (got {type(payload)})")

    @contextmanager
    def transition(
        self, kind: str, *, actor: Actor, subject: str, payload: Mapping[str, Any] | None = None
    ) -> Iterator[Transition]:
        """Open one transition: revision + 1, an event ``(kind, actor, subject, payload)``, and its writes.

        Everything done through the yielded ``Transition`` commits together when the block ends;
        if the block raises, nothing is committed and the revision does not move.
        """
        payload = {} if payload is None else payload
        self._check_transition(kind, actor, subject, payload)
        with self._write():
            tx = Transition(self, self._conn, self._append_event(kind, actor, subject, payload))
            try:
                yield tx
            finally:
                tx.close()

    # -- deliveries ----------------------------------------------------------------------------

    @contextmanager
    def delivery(
        self,
        role: str,
        subject: str,
        basis_revision: int,
        payload: BaseModel | Mapping[str, Any],
        *,
        model: type[BaseModel] | None = None,
        details: Mapping[str, Any] | None = None,
    ) -> Iterator[Transition]:
        """Accept ``role``'s delivery for ``subject`` and open the transition that commits what follows from it.

        The delivery is checked inside the transaction against the awaited expectations (see
        ``ade_core.store.deliveries``); when accepted, the expectation is fulfilled, the payload is
        stored, and the event ``delivery_accepted`` is appended — together with everything the body
        writes. When refused, nothing of it is written; instead a ``delivery_rejected`` event is
        committed in its own transaction and ``DeliveryRejected`` is raised with the reason.
        ``details`` (plain JSON) are added to the ``delivery_accepted`` event under ``"details"``,
        e.g. the Harness's clock reading; they are audit, not research state.
        """
        normalized = deliveries.normalize_payload(payload, model)
        try:
            with self._write():
                verdict = deliveries.check_form(role, subject, basis_revision, self.revision)
                if verdict is None and isinstance(normalized, deliveries.Verdict):
                    verdict = normalized
                found = verdict or deliveries.classify(self._conn, role, subject, basis_revision)
                if isinstance(found, deliveries.Verdict):
                    raise _Refusal(found)
                assert isinstance(normalized, dict)
                tx = self._accept(found, normalized, details)
                try:
                    yield tx
                finally:
                    tx.close()
        except _Refusal as refusal:
            raise self._reject(refusal.verdict, role, subject, basis_revision, payload) from None

    def _accept(
        self, expectation: Expectation, payload: dict[str, Any], details: Mapping[str, Any] | None = None
    ) -> Transition:
        digest = sha256_digest(payload)
        record: dict[str, Any] = {
            "expectation_id": expectation.expectation_id,
            "basis_revision": expectation.basis_revision,
            "payload_digest": digest,
        }
        if details:
            record["details"] = dict(details)
        event = self._append_event("delivery_accepted", expectation.role, expectation.subject, record)
        self._conn.execute(
            "UPDATE expectations SET status = 'fulfilled', closed_revision = ? WHERE expectation_id = ?",
            (event.revision, expectation.expectation_id),
        )
        self._conn.execute(
            "INSERT INTO deliveries (expectation_id, revision, payload, digest) VALUES (?, ?, ?, ?)",
            (expectation.expectation_id, event.revision, canonical_json(payload), digest),
        )
        accepted = Delivery(
            expectation_id=expectation.expectation_id,
            role=expectation.role,
            subject=expectation.subject,
            basis_revision=expectation.basis_revision,
            revision=event.revision,
            payload=payload,
            digest=digest,
        )
        return Transition(self, self._conn, event, accepted)

    def _reject(
        self, verdict: deliveries.Verdict, role: Any, subject: Any, basis_revision: Any, payload: Any
    ) -> DeliveryRejected:
        """Commit the ``delivery_rejected`` event and return the error to raise."""
        subject_name = subject if isinstance(subject, str) and subject else "(malformed)"
        details = deliveries.rejection_payload(verdict, role, subject, basis_revision, payload)
        with self.transition("delivery_rejected", actor="harness", subject=subject_name, payload=details) as tx:
            revision = tx.revision
        return DeliveryRejected(
            verdict.reason, verdict.message, role=str(role), subject=subject_name, revision=revision
        )

    def accept_delivery(
        self,
        role: str,
        subject: str,
        basis_revision: int,
        payload: BaseModel | Mapping[str, Any],
        *,
        model: type[BaseModel] | None = None,
        details: Mapping[str, Any] | None = None,
    ) -> Delivery:
        """Accept a delivery that needs no further writes; see ``delivery`` for the checks and rejections."""
        with self.delivery(role, subject, basis_revision, payload, model=model, details=details) as tx:
            assert tx.delivery is not None
            return tx.delivery

    def expect_delivery(self, role: str, subject: str) -> Expectation:
        """Await ``role``'s delivery for ``subject`` in a transition of its own; the basis is that revision."""
        with self.transition("delivery_awaited", actor="harness", subject=subject, payload={"role": role}) as tx:
            return tx.expect_delivery(role, subject)

    # -- Run-Memory queue ----------------------------------------------------------------------

    def publish_run_memory(
        self,
        commit_key: str,
        run_memory: RunMemory | Mapping[str, Any],
        *,
        actor: Actor = "run_summarizer",
        details: Mapping[str, Any] | None = None,
    ) -> PublishResult:
        """Publish the Run-Memory version that merges ``commit_key`` and dequeue it, in one transition.

        Refuses (``QueueOrderError``) unless ``commit_key`` is the queue head, and (``QueueError``)
        unless the version extends the latest one by exactly that key. A key already published —
        a replay after a crash — is acknowledged: nothing is merged again, the revision does not
        move, and the acknowledgement is logged as an operation. ``details`` (plain JSON) are added
        to the ``run_memory_published`` event under ``"details"``.
        """
        check_actor(actor)
        new = self._run_memory(run_memory)
        key = natural_key("run_memory", new)
        with self._write():
            entry = memory_queue.entry(self._conn, commit_key)
            if entry is None:
                head = memory_queue.head(self._conn)
                raise QueueError(
                    f"commit key {commit_key!r} was never enqueued (head: {head.commit_key if head else None!r}); "
                    "enqueue it in the transition that publishes its Plan-Memory version"
                )
            if entry.status == "pending":
                head = memory_queue.head(self._conn)
                if head is None or head.commit_key != commit_key:
                    raise memory_queue.not_head(commit_key, head)
                memory_queue.check_successor(self, commit_key, new)
                payload: dict[str, Any] = {
                    "commit_key": commit_key,
                    "plan_memory_ref": entry.plan_memory_ref,
                    "run_memory": key,
                }
                if details:
                    payload["details"] = dict(details)
                event = self._append_event("run_memory_published", actor, commit_key, payload)
                tx = Transition(self, self._conn, event)
                tx.put("run_memory", key, new)
                tx.close()
                published = memory_queue.mark_published(self._conn, commit_key, event.revision, key)
                return PublishResult("published", published, key, event.revision)
        assert entry.run_memory_key is not None and entry.published_revision is not None
        stored = self.get("run_memory", entry.run_memory_key)
        self.record_operation(
            "run_memory_acknowledged",
            subject=commit_key,
            details={
                "run_memory": entry.run_memory_key,
                "replayed_digest": new.digest(),
                "matches_published": stored is not None and stored.digest == new.digest(),
            },
        )
        return PublishResult("acknowledged", entry, entry.run_memory_key, entry.published_revision)

    @staticmethod
    def _run_memory(document: RunMemory | Mapping[str, Any]) -> RunMemory:
        if isinstance(document, RunMemory):
            return document
        try:
            return RunMemory.model_validate(dict(document))
        except (TypeError, ValueError) as exc:  # pydantic's ValidationError is a ValueError
            raise InvalidDocumentError(f"the Run-Memory version does not validate as RunMemory: {exc}") from exc

    # -- operations log ------------------------------------------------------------------------

    def record_operation(self, action: str, *, subject: str = "run", details: Mapping[str, Any] | None = None) -> int:
        """Log a recovery/operations action (not an event: the revision does not move); return its sequence.

        Operations are committed on their own, never inside a transition, so a transition that
        rolls back cannot take the record of a recovery action with it.
        """
        if self._in_transaction:
            raise TransitionError(f"operation {action!r} logged inside an open transition; log it after the block")
        if not isinstance(action, str) or not action:
            raise TransitionError(f"an operation needs a non-empty action string (got {action!r})")
        text = json_document(dict(details or {}), f"the details of operation {action!r}")
        with self._write():
            cursor = self._conn.execute(
                "INSERT INTO operations (action, subject, details, revision, at) VALUES (?, ?, ?, ?, ?)",
                (action, subject, text, self.revision, utc_now()),
            )
        return int(cursor.lastrowid or 0)
