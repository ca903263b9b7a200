"""The operator ledger 𝓛 (paper App. C.8): pause, resume, finish and cancel, appended by a human.

Operator actions are their own transitions (actor ``operator``) and never touch research state;
the controller reads the ledger at every step boundary:

- ``pause``: stop at the next boundary, leaving every Trial where it is; ``ade resume`` continues.
- ``finish``: start no new Plan or Trial; let in-flight Trials finish (memory included), then
  complete the run and make the final selection.
- ``cancel``: stop; an unfinished Trial ends ``cancelled`` (without memory updates), the run ends
  ``cancelled`` with no final selection.
"""

from __future__ import annotations

import getpass
from datetime import UTC, datetime
from typing import Any, Literal

from ade_core.errors import AdeError
from ade_core.schemas.ledger import LedgerEntry
from ade_core.store import RunStore

OperatorState = Literal["running", "paused", "finishing", "cancelled"]
ACTIONS = ("pause", "resume", "finish", "cancel")
HELD_OUT_ACTION = "held_out_evaluation"  # names the record under heldout/; never its benchmarks or scores


def ledger(store: RunStore) -> list[LedgerEntry]:
    """The ledger in sequence order."""
    entries = [LedgerEntry.model_validate(d.document) for d in store.list("ledger")]
    return sorted(entries, key=lambda e: e.sequence)


def operator_state(store: RunStore) -> OperatorState:
    """What the ledger asks of the controller now."""
    state: OperatorState = "running"
    finishing = False
    for entry in ledger(store):
        if entry.action == "cancel":
            return "cancelled"
        if entry.action == "finish":
            finishing = True
        elif entry.action == "pause":
            state = "paused"
        elif entry.action == "resume":
            state = "running"
    if state == "paused":
        return "paused"
    return "finishing" if finishing else "running"


def append_action(
    store: RunStore,
    action: str,
    *,
    operator: str | None = None,
    reason: str = "",
    details: dict[str, Any] | None = None,
) -> LedgerEntry:
    """Append ``action`` to the ledger in its own transition (``held_out_evaluation`` comes from ``ade heldout``)."""
    if action not in (*ACTIONS, HELD_OUT_ACTION):
        raise AdeError(f"unknown operator action {action!r}; one of {', '.join(ACTIONS)}")
    record = store.get_model("run", "run")
    if record is None:
        raise AdeError(f"{store.run_dir} holds no initialized run")
    if action in ACTIONS and record.phase in ("completed", "cancelled"):  # App. C.8: the ledger steers a live run
        raise AdeError(
            f"run {record.run_id} in {store.run_dir} is already {record.phase}; there is nothing to {action} "
            f"(`ade status {store.run_dir}` shows it; `ade fork {store.run_dir}@REV` continues an earlier revision)"
        )
    entry = LedgerEntry(
        sequence=len(ledger(store)) + 1,
        action=action,
        operator=operator or getpass.getuser(),
        at=datetime.now(UTC),
        reason=reason,
        details=details or {},
    )
    with store.transition(f"operator_{action}", actor="operator", subject="run", payload={"reason": reason}) as tx:
        tx.put("ledger", str(entry.sequence), entry)
    return entry
