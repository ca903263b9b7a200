"""A writer SIGKILLed at random points leaves whole revisions: nothing half-written, nothing merged twice."""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from ade_core.store import RunStore, check_store
from ade_core.store.records import loads

WORKER = Path(__file__).with_name("store_crash_worker.py")
KILLS = 5


def run_and_kill(run_dir: Path, delay_s: float) -> None:
    """Start the worker, let it write for ``delay_s`` after it is ready, then SIGKILL it."""
    proc = subprocess.Popen(
        [sys.executable, str(WORKER), str(run_dir)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stderr is not None
    try:
        line = proc.stdout.readline()
        assert line.strip() == "ready", f"worker did not start: {line!r}"
        time.sleep(delay_s)
        assert proc.poll() is None, "worker exited before it was killed"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        assert proc.returncode == -signal.SIGKILL
    except AssertionError as exc:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=10)
        raise AssertionError(f"{exc}\nworker stderr:\n{proc.stderr.read()}") from None
    finally:
        proc.stdout.close()
        proc.stderr.close()


def rows_at(conn: sqlite3.Connection, revision: int) -> dict[str, object]:
    """Everything that revision ``revision`` wrote, per table."""
    docs = sorted(conn.execute("SELECT kind, key FROM documents WHERE revision = ?", (revision,)).fetchall())
    registered = conn.execute(
        "SELECT role, subject FROM expectations WHERE registered_revision = ?", (revision,)
    ).fetchall()
    closed = conn.execute("SELECT subject, status FROM expectations WHERE closed_revision = ?", (revision,)).fetchall()
    delivered = conn.execute("SELECT COUNT(*) FROM deliveries WHERE revision = ?", (revision,)).fetchone()[0]
    enqueued = conn.execute(
        "SELECT commit_key FROM run_memory_queue WHERE enqueued_revision = ?", (revision,)
    ).fetchall()
    published = conn.execute(
        "SELECT commit_key, run_memory_key FROM run_memory_queue WHERE published_revision = ?", (revision,)
    ).fetchall()
    return {
        "docs": docs,
        "registered": registered,
        "closed": closed,
        "delivered": delivered,
        "enqueued": enqueued,
        "published": published,
    }


def expected_at(kind: str, subject: str, payload: dict, conn: sqlite3.Connection) -> dict[str, object]:
    """What a complete transition of this kind writes, per the worker's protocol."""
    nothing: dict[str, object] = {
        "docs": [],
        "registered": [],
        "closed": [],
        "delivered": 0,
        "enqueued": [],
        "published": [],
    }
    if kind == "run_started":
        return {**nothing, "docs": [("run_memory", "v0")]}
    if kind == "plan_admitted":
        trial_id = f"{subject}/T1"
        return {
            **nothing,
            "docs": sorted([("plan", subject), ("trial", trial_id)]),
            "registered": [("builder", trial_id)],
        }
    if kind == "delivery_accepted":
        return {**nothing, "docs": [("trial", subject)], "closed": [(subject, "fulfilled")], "delivered": 1}
    if kind == "plan_memory_published":
        return {**nothing, "docs": [("plan_memory", f"{subject}@v1")], "enqueued": [(f"{subject}/T1#pm1",)]}
    if kind == "run_memory_published":
        key = conn.execute("SELECT run_memory_key FROM run_memory_queue WHERE commit_key = ?", (subject,)).fetchone()
        return {**nothing, "docs": [("run_memory", key[0])], "published": [(subject, key[0])]}
    assert kind == "delivery_rejected", kind
    return nothing


def assert_whole(run_dir: Path) -> int:
    """Check every invariant of the store in ``run_dir``; return its revision."""
    with RunStore.open(run_dir) as store:
        assert check_store(store) == []
        assert store.objects.verify_all() == []
        revision = store.revision
    conn = sqlite3.connect(run_dir / "state.sqlite")
    try:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        events = conn.execute("SELECT revision, kind, subject, payload FROM events ORDER BY revision").fetchall()
        assert [e[0] for e in events] == list(range(1, len(events) + 1)), "revision gap"
        for revision_, kind, subject, payload in events:
            assert rows_at(conn, revision_) == expected_at(kind, subject, loads(payload), conn), (revision_, kind)
        # Exactly once: every queued key published at most once, in FIFO order, each by its own version.
        queue = conn.execute(
            "SELECT commit_key, status, run_memory_key FROM run_memory_queue ORDER BY position"
        ).fetchall()
        statuses = [status for _, status, _ in queue]
        assert statuses == sorted(statuses, key=lambda s: s != "published"), statuses
        assert len({key for key, _, _ in queue}) == len(queue)
        versions = [
            loads(doc)
            for (doc,) in conn.execute("SELECT document FROM documents WHERE kind = 'run_memory' ORDER BY seq")
        ]
        assert [v["version"] for v in versions] == list(range(len(versions)))
        published = [key for key, status, _ in queue if status == "published"]
        assert versions[-1]["commit_keys"] == published
        for previous, current in zip(versions, versions[1:], strict=False):
            assert current["commit_keys"][:-1] == previous["commit_keys"]
        assert not [k for k, c in Counter(published).items() if c > 1]
        # Each acknowledged replay refers to a key that was really published.
        for (details,) in conn.execute("SELECT details FROM operations WHERE action = 'run_memory_acknowledged'"):
            assert loads(details)["run_memory"] in {key for _, _, key in queue}
    finally:
        conn.close()
    return revision


def test_sigkill_at_random_points_leaves_whole_revisions(tmp_path):
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    run_dir = tmp_path / "run"
    revisions: list[int] = []
    replays = 0
    for _ in range(KILLS):
        if revisions:
            with RunStore.open(run_dir) as store:
                replays += bool(store.queue(status="published"))
        run_and_kill(run_dir, rng.uniform(0.05, 0.5))
        revisions.append(assert_whole(run_dir))
    assert revisions == sorted(revisions), f"seed {seed}: committed revisions went backwards {revisions}"
    assert revisions[-1] > 20, f"seed {seed}: the worker made too little progress to test anything ({revisions})"
    with RunStore.open(run_dir) as store:
        # Each restart that found a merged key replayed it and was acknowledged, not merged again.
        acknowledged = [op for op in store.operations() if op.action == "run_memory_acknowledged"]
        assert len(acknowledged) == replays
