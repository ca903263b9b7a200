"""The run store's SQL schema and its ordered migrations, each applied in one transaction.

``meta.schema_version`` records the last migration applied. Opening a store runs every later
migration in order; a store written by a newer ADE (a version this code does not know) is
refused rather than guessed at.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ade_core.errors import SchemaVersionError, StoreError


def _append_only(table: str) -> tuple[str, ...]:
    """Triggers that make ``table`` append-only: any UPDATE or DELETE aborts the statement."""
    return (
        f"CREATE TRIGGER {table}_no_update BEFORE UPDATE ON {table} "
        f"BEGIN SELECT RAISE(ABORT, '{table} are append-only: UPDATE refused'); END",
        f"CREATE TRIGGER {table}_no_delete BEFORE DELETE ON {table} "
        f"BEGIN SELECT RAISE(ABORT, '{table} are append-only: DELETE refused'); END",
    )


_INITIAL: tuple[str, ...] = (
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    # One row per revision: the audit log of every committed transition.
    """CREATE TABLE events (
        revision INTEGER PRIMARY KEY CHECK (revision >= 1),
        kind TEXT NOT NULL CHECK (kind <> ''),
        actor TEXT NOT NULL CHECK (actor <> ''),
        subject TEXT NOT NULL CHECK (subject <> ''),
        payload TEXT NOT NULL,
        payload_digest TEXT NOT NULL,
        at TEXT NOT NULL
    )""",
    *_append_only("events"),
    # Revisions have no gaps: each event is exactly one more than the last.
    "CREATE TRIGGER events_contiguous BEFORE INSERT ON events "
    "WHEN NEW.revision <> (SELECT COALESCE(MAX(revision), 0) + 1 FROM events) "
    "BEGIN SELECT RAISE(ABORT, 'event revisions must be contiguous'); END",
    # Every version of every document; the current one is the latest row of its (kind, key).
    """CREATE TABLE documents (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        kind TEXT NOT NULL CHECK (kind IN ('plan', 'trial', 'attempt', 'plan_memory', 'run_memory', 'ledger')),
        key TEXT NOT NULL CHECK (key <> ''),
        revision INTEGER NOT NULL REFERENCES events (revision),
        document TEXT NOT NULL,
        digest TEXT NOT NULL
    )""",
    "CREATE INDEX documents_by_key ON documents (kind, key, seq)",
    "CREATE INDEX documents_by_revision ON documents (revision)",
    *_append_only("documents"),
    """CREATE TABLE expectations (
        expectation_id INTEGER PRIMARY KEY AUTOINCREMENT,
        role TEXT NOT NULL,
        subject TEXT NOT NULL CHECK (subject <> ''),
        basis_revision INTEGER NOT NULL CHECK (basis_revision >= 0),
        registered_revision INTEGER NOT NULL REFERENCES events (revision),
        status TEXT NOT NULL CHECK (status IN ('awaiting', 'fulfilled', 'withdrawn')),
        closed_revision INTEGER REFERENCES events (revision),
        CHECK ((status = 'awaiting') = (closed_revision IS NULL))
    )""",
    "CREATE UNIQUE INDEX expectations_one_awaiting ON expectations (role, subject) WHERE status = 'awaiting'",
    "CREATE INDEX expectations_by_subject ON expectations (subject, status)",
    "CREATE TRIGGER expectations_close_only BEFORE UPDATE ON expectations "
    "WHEN OLD.status <> 'awaiting' OR NEW.role IS NOT OLD.role OR NEW.subject IS NOT OLD.subject "
    "OR NEW.basis_revision IS NOT OLD.basis_revision OR NEW.registered_revision IS NOT OLD.registered_revision "
    "BEGIN SELECT RAISE(ABORT, 'an expectation can only be closed once'); END",
    "CREATE TRIGGER expectations_no_delete BEFORE DELETE ON expectations "
    "BEGIN SELECT RAISE(ABORT, 'expectations are never deleted'); END",
    """CREATE TABLE deliveries (
        expectation_id INTEGER PRIMARY KEY REFERENCES expectations (expectation_id),
        revision INTEGER NOT NULL REFERENCES events (revision),
        payload TEXT NOT NULL,
        digest TEXT NOT NULL
    )""",
    *_append_only("deliveries"),
    # The durable FIFO of Plan-Memory updates awaiting the single Run-Memory writer (App. C.7).
    """CREATE TABLE run_memory_queue (
        position INTEGER PRIMARY KEY AUTOINCREMENT,
        commit_key TEXT NOT NULL UNIQUE CHECK (commit_key <> ''),
        plan_memory_ref TEXT NOT NULL,
        enqueued_revision INTEGER NOT NULL REFERENCES events (revision),
        status TEXT NOT NULL CHECK (status IN ('pending', 'published')),
        published_revision INTEGER REFERENCES events (revision),
        run_memory_key TEXT,
        CHECK ((status = 'pending') = (published_revision IS NULL)),
        CHECK ((status = 'pending') = (run_memory_key IS NULL))
    )""",
    "CREATE TRIGGER run_memory_queue_publish_only BEFORE UPDATE ON run_memory_queue "
    "WHEN OLD.status <> 'pending' OR NEW.status <> 'published' OR NEW.commit_key IS NOT OLD.commit_key "
    "OR NEW.plan_memory_ref IS NOT OLD.plan_memory_ref OR NEW.enqueued_revision IS NOT OLD.enqueued_revision "
    "BEGIN SELECT RAISE(ABORT, 'a queue entry can only move from pending to published'); END",
    "CREATE TRIGGER run_memory_queue_head_only BEFORE UPDATE ON run_memory_queue "
    "WHEN EXISTS (SELECT 1 FROM run_memory_queue WHERE status = 'pending' AND position < OLD.position) "
    "BEGIN SELECT RAISE(ABORT, 'only the queue head may be published'); END",
    "CREATE TRIGGER run_memory_queue_no_delete BEFORE DELETE ON run_memory_queue "
    "BEGIN SELECT RAISE(ABORT, 'queue entries are never deleted'); END",
    # Recovery and operations actions: kept apart from events and from the state digest (Sec 3.4).
    """CREATE TABLE operations (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        action TEXT NOT NULL CHECK (action <> ''),
        subject TEXT NOT NULL,
        details TEXT NOT NULL,
        revision INTEGER NOT NULL,
        at TEXT NOT NULL
    )""",
    *_append_only("operations"),
)


@dataclass(frozen=True)
class Migration:
    """One schema step: SQL statements (run in order) or a callable given the open connection.

    Statements are a tuple rather than a script because ``executescript`` commits first, which
    would split a migration across transactions.
    """

    version: int
    description: str
    steps: tuple[str, ...] | Callable[[sqlite3.Connection], None]

    def apply(self, conn: sqlite3.Connection) -> None:
        """Run the migration on ``conn`` inside the caller's transaction."""
        if callable(self.steps):
            self.steps(conn)
        else:
            for statement in self.steps:
                conn.execute(statement)


def _documents_table(kinds: tuple[str, ...]) -> tuple[str, ...]:
    """The ``documents`` table for ``kinds``, with its indexes and append-only triggers."""
    allowed = ", ".join(f"'{kind}'" for kind in kinds)
    return (
        f"""CREATE TABLE documents (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        kind TEXT NOT NULL CHECK (kind IN ({allowed})),
        key TEXT NOT NULL CHECK (key <> ''),
        revision INTEGER NOT NULL REFERENCES events (revision),
        document TEXT NOT NULL,
        digest TEXT NOT NULL
    )""",
        "CREATE INDEX documents_by_key ON documents (kind, key, seq)",
        "CREATE INDEX documents_by_revision ON documents (revision)",
        *_append_only("documents"),
    )


# Migration 2: the ``run`` kind (the run record: frozen digests, phase, final selection). SQLite
# cannot widen a CHECK constraint in place, so the table is rebuilt with the same rows and seqs.
_RUN_KIND: tuple[str, ...] = (
    "ALTER TABLE documents RENAME TO documents_v1",
    "DROP INDEX documents_by_key",
    "DROP INDEX documents_by_revision",
    "DROP TRIGGER documents_no_update",
    "DROP TRIGGER documents_no_delete",
    *_documents_table(("plan", "trial", "attempt", "plan_memory", "run_memory", "ledger", "run")),
    "INSERT INTO documents (seq, kind, key, revision, document, digest) "
    "SELECT seq, kind, key, revision, document, digest FROM documents_v1 ORDER BY seq",
    "DROP TABLE documents_v1",
)

MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "events, documents, deliveries, queue, operations", _INITIAL),
    Migration(2, "the run document kind", _RUN_KIND),
)
SCHEMA_VERSION: int = MIGRATIONS[-1].version


def current_version(conn: sqlite3.Connection) -> int:
    """The schema version recorded in ``meta``; 0 for a store with no schema yet."""
    has_meta = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'meta'").fetchone()
    if not has_meta:
        return 0
    row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    return int(row[0]) if row else 0


def _check_order(migrations: Sequence[Migration]) -> None:
    versions = [m.version for m in migrations]
    if versions != list(range(1, len(versions) + 1)):
        raise StoreError(f"migrations must be numbered 1, 2, 3, ... in order (got {versions})")


def migrate(conn: sqlite3.Connection, path: Path | str, migrations: Sequence[Migration] = MIGRATIONS) -> int:
    """Bring the store on ``conn`` up to the last of ``migrations``; return the resulting version.

    Each migration runs in its own ``BEGIN IMMEDIATE`` transaction together with the update of
    ``meta.schema_version``, so a failure leaves the store at the previous version, whole. The
    version is re-read inside each transaction, so two processes opening one store migrate it once.
    ``conn`` must be in autocommit mode (``isolation_level=None``).
    """
    _check_order(migrations)
    known = migrations[-1].version if migrations else 0
    found = current_version(conn)
    if found > known:
        raise SchemaVersionError(
            f"run store {path} has schema version {found}, but this ADE knows versions up to {known}; "
            "upgrade ADE (pip install -U ade-core) to open it"
        )
    for migration in migrations[found:]:
        conn.execute("BEGIN IMMEDIATE")
        try:
            if current_version(conn) >= migration.version:
                conn.execute("COMMIT")
                continue
            migration.apply(conn)
            conn.execute(
                "INSERT INTO meta (key, value) VALUES ('schema_version', ?) "
                "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (str(migration.version),),
            )
            conn.execute("COMMIT")
        except BaseException as exc:
            conn.execute("ROLLBACK")
            if isinstance(exc, sqlite3.Error):
                raise StoreError(
                    f"migration {migration.version} ({migration.description}) of {path} failed: {exc}; "
                    f"the store is left at schema version {migration.version - 1}"
                ) from exc
            raise
    return current_version(conn)
