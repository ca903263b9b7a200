"""A digest of a run's committed research state, stable across crashes, recovery and machines.

Two runs that committed the same research (same Plans, Trial outcomes, memory versions, in the
same order) have the same digest even if one of them crashed and was recovered: recovery adds
attempts, operations, rejected deliveries and timestamps, and none of those are research state.

What is hashed, in commit order (entities in the order they were first written; each entity
by its current version):

- documents of kinds ``plan``, ``trial``, ``plan_memory``, ``run_memory``, ``run``, each as
  ``{"kind", "key", "document"}`` with the fields in ``EXCLUDED_FIELDS`` removed at every depth;
- the Run-Memory queue in FIFO order: ``commit_key``, ``plan_memory_ref``, ``status`` and
  ``run_memory_key`` of each entry.

What is not: the ``attempt`` kind (physical executions, App. C.10), the ``ledger`` kind (operator
actions; held-out results never feed search, Sec 3.4), the events table (audit: timestamps,
rejections, revision numbers), expectations and deliveries (agent outputs count through what the
Harness admitted from them), and the operations log (recovery actions, Sec 3.4).
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

from ade_core.schemas.common import canonical_json
from ade_core.store.records import loads

if TYPE_CHECKING:
    from ade_core.store.db import RunStore

DIGEST_FORMAT = 1

EXCLUDED_KINDS: frozenset[str] = frozenset({"attempt", "ledger"})

EXCLUDED_FIELDS: frozenset[str] = frozenset(
    {
        # Physical execution, not the logical experiment: a retry gets a fresh attempt and resources.
        "attempt_id",
        "attempts",
        "resources",
        # Wall-clock times and durations.
        "at",
        "started_at",
        "ended_at",
        "created_at",
        "updated_at",
        "timestamp",
        "timings",
        # Filesystem paths: the same run restored elsewhere has the same research state.
        "path",
        "paths",
        "run_dir",
        "workdir",
        "checkpoint_path",
        "selected_checkpoint",
        # A Trial's package reference: its manifest names the attempt and its timings, so a replayed
        # attempt writes a different package with the same scores (the scores are hashed).
        "package",
        # Commit positions: order is hashed, but numbers shift when audit-only transitions
        # (a recorded rejection) interleave, so a memory version's ``revision`` is left out.
        "revision",
        "basis_revision",
    }
)


def project(value: Any) -> Any:
    """``value`` with every mapping key in ``EXCLUDED_FIELDS`` removed, recursively."""
    if isinstance(value, dict):
        return {k: project(v) for k, v in value.items() if k not in EXCLUDED_FIELDS}
    if isinstance(value, list):
        return [project(item) for item in value]
    return value


def state_digest(store: RunStore) -> str:
    """``sha256:<hex>`` over the run's committed research state (see the module docstring for the fields)."""
    hasher = hashlib.sha256()

    def add(record: dict[str, Any]) -> None:
        hasher.update(canonical_json(record).encode("utf-8"))
        hasher.update(b"\n")

    add({"ade_state_digest": DIGEST_FORMAT})
    with store.snapshot() as conn:
        documents = conn.execute(
            "SELECT d.kind, d.key, d.document FROM documents d JOIN "
            "(SELECT MIN(seq) AS first, MAX(seq) AS last FROM documents GROUP BY kind, key) g "
            "ON d.seq = g.last ORDER BY g.first"
        ).fetchall()
        queue = conn.execute(
            "SELECT commit_key, plan_memory_ref, status, run_memory_key FROM run_memory_queue ORDER BY position"
        ).fetchall()
    for kind, key, document in documents:
        if kind not in EXCLUDED_KINDS:
            add({"kind": kind, "key": key, "document": project(loads(document))})
    for commit_key, plan_memory_ref, status, run_memory_key in queue:
        add({"queue": commit_key, "plan_memory_ref": plan_memory_ref, "status": status, "run_memory": run_memory_key})
    return "sha256:" + hasher.hexdigest()
