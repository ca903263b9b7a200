"""Forking a run store at a revision: a new store holding exactly what was committed up to it.

Rows are copied as they stood at that revision: events, document versions, deliveries and the
operations log up to it; expectations and queue entries that were closed or published later
are restored to awaiting / pending. Objects are hard-linked when the filesystem allows (they
are immutable), copied otherwise. The source is only read.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from ade_core.errors import StoreError
from ade_core.store.db import RunStore


def _link_or_copy(source: Path, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)


def fork_store(source: RunStore, revision: int, target_dir: Path | str) -> RunStore:
    """Create a store in ``target_dir`` equal to ``source`` as of ``revision``; return it open."""
    if isinstance(revision, bool) or not isinstance(revision, int) or not 1 <= revision <= source.revision:
        raise StoreError(
            f"cannot fork {source.run_dir} at revision {revision!r}; it has revisions 1..{source.revision}"
        )
    target_dir = Path(target_dir)
    if (target_dir / "state.sqlite").exists():
        raise StoreError(f"{target_dir} already holds a run store; fork into a new directory")
    with source.snapshot() as conn:
        events = conn.execute("SELECT * FROM events WHERE revision <= ? ORDER BY revision", (revision,)).fetchall()
        documents = conn.execute("SELECT * FROM documents WHERE revision <= ? ORDER BY seq", (revision,)).fetchall()
        expectations = conn.execute(
            "SELECT expectation_id, role, subject, basis_revision, registered_revision, "
            "CASE WHEN closed_revision IS NULL OR closed_revision > ?1 THEN 'awaiting' ELSE status END, "
            "CASE WHEN closed_revision > ?1 THEN NULL ELSE closed_revision END "
            "FROM expectations WHERE registered_revision <= ?1 ORDER BY expectation_id",
            (revision,),
        ).fetchall()
        deliveries = conn.execute("SELECT * FROM deliveries WHERE revision <= ?", (revision,)).fetchall()
        queue = conn.execute(
            "SELECT position, commit_key, plan_memory_ref, enqueued_revision, "
            "CASE WHEN published_revision > ?1 THEN 'pending' ELSE status END, "
            "CASE WHEN published_revision > ?1 THEN NULL ELSE published_revision END, "
            "CASE WHEN published_revision > ?1 THEN NULL ELSE run_memory_key END "
            "FROM run_memory_queue WHERE enqueued_revision <= ?1 ORDER BY position",
            (revision,),
        ).fetchall()
        operations = conn.execute("SELECT * FROM operations WHERE revision <= ? ORDER BY seq", (revision,)).fetchall()
    target = RunStore.open(target_dir)
    with target._write() as conn:  # one transaction: a half-made fork is never visible
        conn.executemany("INSERT INTO events VALUES (?, ?, ?, ?, ?, ?, ?)", events)
        conn.executemany("INSERT INTO documents VALUES (?, ?, ?, ?, ?, ?)", documents)
        conn.executemany("INSERT INTO expectations VALUES (?, ?, ?, ?, ?, ?, ?)", expectations)
        conn.executemany("INSERT INTO deliveries VALUES (?, ?, ?, ?)", deliveries)
        conn.executemany("INSERT INTO run_memory_queue VALUES (?, ?, ?, ?, ?, ?, ?)", queue)
        conn.executemany("INSERT INTO operations VALUES (?, ?, ?, ?, ?, ?)", operations)
    for digest in source.objects.digests():
        _link_or_copy(source.objects.path(digest, verify=False), target.objects.path_for(digest))
    return target
