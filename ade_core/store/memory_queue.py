"""The durable FIFO of Plan-Memory updates and its single Run-Memory writer (paper App. C.7).

Exactly once: each completed Trial's Plan-Memory version is enqueued under a persistent commit
key (enqueuing a key twice is a no-op); only the queue head may change Run Memory; publication of
the new Run-Memory version and removal of the head are one transaction; a replayed publication of
a key already merged is acknowledged, never merged again.
"""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING

from ade_core.errors import QueueError, QueueOrderError
from ade_core.schemas import RunMemory
from ade_core.store.records import QueueEntry

if TYPE_CHECKING:
    from ade_core.store.db import RunStore

_COLUMNS = "position, commit_key, plan_memory_ref, enqueued_revision, status, published_revision, run_memory_key"


def _entry(row: tuple) -> QueueEntry:
    return QueueEntry(*row)


def entry(conn: sqlite3.Connection, commit_key: str) -> QueueEntry | None:
    """The queue entry stored under ``commit_key``, pending or published."""
    row = conn.execute(f"SELECT {_COLUMNS} FROM run_memory_queue WHERE commit_key = ?", (commit_key,)).fetchone()
    return _entry(row) if row else None


def head(conn: sqlite3.Connection) -> QueueEntry | None:
    """The oldest pending entry: the only one the Run-Memory writer may publish next."""
    row = conn.execute(
        f"SELECT {_COLUMNS} FROM run_memory_queue WHERE status = 'pending' ORDER BY position LIMIT 1"
    ).fetchone()
    return _entry(row) if row else None


def entries(conn: sqlite3.Connection, status: str | None = None) -> list[QueueEntry]:
    """Every entry in queue order, optionally only those with ``status``."""
    if status is None:
        rows = conn.execute(f"SELECT {_COLUMNS} FROM run_memory_queue ORDER BY position").fetchall()
    else:
        rows = conn.execute(
            f"SELECT {_COLUMNS} FROM run_memory_queue WHERE status = ? ORDER BY position", (status,)
        ).fetchall()
    return [_entry(row) for row in rows]


def enqueue(
    conn: sqlite3.Connection, store: RunStore, commit_key: str, plan_memory_ref: str, revision: int
) -> QueueEntry:
    """Append ``commit_key`` -> ``plan_memory_ref`` at ``revision``; idempotent on ``commit_key``."""
    if not isinstance(commit_key, str) or not commit_key:
        raise QueueError(f"a commit key must be a non-empty string (got {commit_key!r})")
    existing = entry(conn, commit_key)
    if existing is not None:
        if existing.plan_memory_ref != plan_memory_ref:
            raise QueueError(
                f"commit key {commit_key!r} is already queued for Plan Memory {existing.plan_memory_ref!r}, "
                f"not {plan_memory_ref!r}; a commit key names one Plan-Memory version for good — use a new key"
            )
        return existing
    if store.get("plan_memory", plan_memory_ref) is None:
        raise QueueError(
            f"Plan Memory {plan_memory_ref!r} is not stored; put the Plan-Memory version in this "
            "transition before enqueuing its Run-Memory update"
        )
    conn.execute(
        "INSERT INTO run_memory_queue (commit_key, plan_memory_ref, enqueued_revision, status) "
        "VALUES (?, ?, ?, 'pending')",
        (commit_key, plan_memory_ref, revision),
    )
    created = entry(conn, commit_key)
    assert created is not None
    return created


def check_successor(store: RunStore, commit_key: str, new: RunMemory) -> None:
    """Refuse a Run-Memory version that does not extend the current one by exactly ``commit_key``.

    The new version's parent must be the latest published version, and its ``commit_keys`` must
    be the parent's followed by ``commit_key``: a merge that skips, repeats or reorders updates
    is an error, not a new version.
    """
    latest = store.latest_run_memory()
    parent_version = latest.version if latest else None
    if new.parent != parent_version:
        fix = (
            "put Run Memory v0 (the empty memory) when the run starts"
            if latest is None
            else f"build the update on v{parent_version}"
        )
        raise QueueError(
            f"Run Memory v{new.version} names parent {new.parent!r}, but the latest stored version is "
            f"{'none' if latest is None else f'v{parent_version}'}; {fix}"
        )
    expected = (*(latest.commit_keys if latest else ()), commit_key)
    if new.commit_keys != expected:
        raise QueueError(
            f"Run Memory v{new.version} lists commit keys {list(new.commit_keys)}, expected {list(expected)} "
            f"(the parent's keys followed by {commit_key!r}, each merged exactly once)"
        )


def mark_published(conn: sqlite3.Connection, commit_key: str, revision: int, run_memory_key: str) -> QueueEntry:
    """Dequeue the head ``commit_key``: mark it published by ``run_memory_key`` at ``revision``."""
    current = head(conn)
    if current is None or current.commit_key != commit_key:
        raise not_head(commit_key, current)
    conn.execute(
        "UPDATE run_memory_queue SET status = 'published', published_revision = ?, run_memory_key = ? "
        "WHERE commit_key = ?",
        (revision, run_memory_key, commit_key),
    )
    published = entry(conn, commit_key)
    assert published is not None
    return published


def not_head(commit_key: str, current: QueueEntry | None) -> QueueOrderError:
    """The typed error for a publication that skips the FIFO order."""
    if current is None:
        return QueueOrderError(f"commit key {commit_key!r} is not the queue head: the queue has no pending update")
    return QueueOrderError(
        f"commit key {commit_key!r} is not the queue head; only the head may change Run Memory — "
        f"publish {current.commit_key!r} (position {current.position}) first"
    )
