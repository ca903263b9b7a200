"""Consistency checks of a run store, run by recovery before it resumes a run.

Each check names what is wrong; an empty list means the store is whole: SQLite's own integrity
and foreign keys hold, revisions have no gaps, every event's transition is fully present, and the
Run-Memory queue has merged each commit key exactly once, in FIFO order.
"""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING

from ade_core.store import memory_queue
from ade_core.store.records import loads

if TYPE_CHECKING:
    from ade_core.store.db import RunStore


def check_store(store: RunStore) -> list[str]:
    """Problems found in ``store``; empty when every invariant holds."""
    problems: list[str] = []
    with store.snapshot() as conn:
        integrity = [row[0] for row in conn.execute("PRAGMA integrity_check").fetchall()]
        if integrity != ["ok"]:
            problems.append(f"integrity_check: {integrity}")
        dangling = conn.execute("PRAGMA foreign_key_check").fetchall()
        if dangling:
            problems.append(f"foreign_key_check: {dangling}")

        revisions = [row[0] for row in conn.execute("SELECT revision FROM events ORDER BY revision")]
        if revisions != list(range(1, len(revisions) + 1)):
            problems.append(f"event revisions are not 1..{len(revisions)} without gaps")

        for revision, subject in conn.execute("SELECT revision, subject FROM events WHERE kind = 'delivery_accepted'"):
            rows = conn.execute(
                "SELECT e.subject, e.status, e.closed_revision FROM deliveries d "
                "JOIN expectations e USING (expectation_id) WHERE d.revision = ?",
                (revision,),
            ).fetchall()
            if rows != [(subject, "fulfilled", revision)]:
                problems.append(f"revision {revision} accepted a delivery for {subject!r} but stored {rows}")
        unmatched = conn.execute(
            "SELECT expectation_id FROM expectations WHERE status = 'fulfilled' "
            "AND expectation_id NOT IN (SELECT expectation_id FROM deliveries)"
        ).fetchall()
        if unmatched:
            problems.append(f"fulfilled expectations without a delivery: {[row[0] for row in unmatched]}")

        problems.extend(_queue_problems(conn))
    return problems


def _queue_problems(conn: sqlite3.Connection) -> list[str]:
    """FIFO and exactly-once: published entries are a prefix, each merged by one Run-Memory version."""
    problems: list[str] = []
    entries = memory_queue.entries(conn)
    statuses = [entry.status for entry in entries]
    if "pending" in statuses and "published" in statuses[statuses.index("pending") :]:
        problems.append(f"queue published out of FIFO order: {[(e.commit_key, e.status) for e in entries]}")
    published = [entry for entry in entries if entry.status == "published"]
    for entry in published:
        row = conn.execute(
            "SELECT document FROM documents WHERE kind = 'run_memory' AND key = ? AND revision = ?",
            (entry.run_memory_key, entry.published_revision),
        ).fetchone()
        if row is None:
            problems.append(
                f"commit key {entry.commit_key!r} is marked published at revision {entry.published_revision} "
                f"but Run Memory {entry.run_memory_key!r} was not written there"
            )
        event = conn.execute(
            "SELECT subject FROM events WHERE revision = ? AND kind = 'run_memory_published'",
            (entry.published_revision,),
        ).fetchone()
        if event != (entry.commit_key,):
            problems.append(f"no run_memory_published event for {entry.commit_key!r} at {entry.published_revision}")
    published_events = conn.execute("SELECT COUNT(*) FROM events WHERE kind = 'run_memory_published'").fetchone()[0]
    if published_events != len(published):
        problems.append(f"{published_events} run_memory_published events but {len(published)} published entries")
    latest = conn.execute(
        "SELECT document FROM documents WHERE kind = 'run_memory' ORDER BY seq DESC LIMIT 1"
    ).fetchone()
    merged = list(loads(latest[0]).get("commit_keys", [])) if latest else []
    if merged != [entry.commit_key for entry in published]:
        problems.append(
            f"latest Run Memory merged {merged}, but the queue published {[e.commit_key for e in published]}"
        )
    return problems
