"""Deciding whether an agent delivery is the one the Harness awaits (paper Sec 3, App. C.2).

A delivery names the role that produced it, the subject it is for, and the basis revision of the
view it was computed from. It is accepted only against an awaited expectation with the same role
and subject, and only if its basis is the revision that expectation's view was built at.
Otherwise the reason is, in the order checked:

- ``malformed``: the role is not a known role, the subject is not a non-empty string, the basis is
  not an int in [0, current revision], or the payload is not a JSON object (or fails its model);
- ``duplicate``: the expectation this delivery answers was already fulfilled (same role and
  subject, and either nothing is awaited now or the basis is that of a fulfilled expectation);
- ``stale``: the role and subject are awaited, but from a different basis revision (an older or
  superseded view);
- ``foreign``: the subject awaits a delivery, but from another role;
- ``unexpected``: nothing is awaited for this subject at all.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError

from ade_core.errors import did_you_mean
from ade_core.schemas.common import canonical_json, sha256_digest
from ade_core.specs import ROLES
from ade_core.store.records import DeliveryReason, Expectation

EXPECTATION_COLUMNS = "expectation_id, role, subject, basis_revision, registered_revision, status, closed_revision"


@dataclass(frozen=True)
class Verdict:
    """Why a delivery cannot be accepted; ``expectation_id`` names the expectation it was judged against."""

    reason: DeliveryReason
    message: str
    expectation_id: int | None = None


def expectation_from_row(row: tuple) -> Expectation:
    """Map an ``expectations`` row to its record."""
    return Expectation(*row)


def normalize_payload(payload: Any, model: type[BaseModel] | None) -> dict[str, Any] | Verdict:
    """The payload's JSON form, or a ``malformed`` verdict naming what is wrong with it."""
    if isinstance(payload, BaseModel):
        payload = payload.model_dump(mode="json")
    if not isinstance(payload, Mapping):
        return Verdict("malformed", f"the payload must be a JSON object (got {type(payload).__name__})")
    data = dict(payload)
    try:
        canonical_json(data)
    except (TypeError, ValueError) as exc:
        return Verdict("malformed", f"the payload is not JSON-serializable: {exc}")
    if model is not None:
        try:
            data = model.model_validate(data).model_dump(mode="json")
        except ValidationError as exc:
            return Verdict("malformed", f"the payload does not validate as {model.__name__}: {exc}")
    return data


def check_form(role: Any, subject: Any, basis_revision: Any, current_revision: int) -> Verdict | None:
    """A ``malformed`` verdict for a role, subject or basis that cannot name an expectation, else None."""
    if role not in ROLES:
        return Verdict("malformed", f"unknown role {role!r}{did_you_mean(str(role), ROLES)}; roles: {ROLES}")
    if not isinstance(subject, str) or not subject:
        return Verdict("malformed", f"the subject must be a non-empty string (got {subject!r})")
    if isinstance(basis_revision, bool) or not isinstance(basis_revision, int):
        return Verdict("malformed", f"the basis revision must be an int (got {basis_revision!r})")
    if not 0 <= basis_revision <= current_revision:
        return Verdict(
            "malformed",
            f"basis revision {basis_revision} does not exist (the store is at revision {current_revision}); "
            "a delivery must echo the revision of the view it was given",
        )
    return None


def classify(conn: sqlite3.Connection, role: str, subject: str, basis_revision: int) -> Expectation | Verdict:
    """The awaited expectation this delivery fulfils, or the verdict that rejects it."""
    rows = conn.execute(
        f"SELECT {EXPECTATION_COLUMNS} FROM expectations WHERE subject = ? ORDER BY expectation_id", (subject,)
    ).fetchall()
    mine = [expectation_from_row(row) for row in rows if row[1] == role]
    awaiting = next((e for e in mine if e.status == "awaiting"), None)
    fulfilled_same_basis = next(
        (e for e in reversed(mine) if e.status == "fulfilled" and e.basis_revision == basis_revision), None
    )
    if awaiting is not None and awaiting.basis_revision == basis_revision:
        return awaiting
    if fulfilled_same_basis is not None:
        return Verdict(
            "duplicate",
            f"{role} already delivered for {subject!r} from basis revision {basis_revision} "
            f"(accepted at revision {fulfilled_same_basis.closed_revision}); a delivery is accepted once",
            fulfilled_same_basis.expectation_id,
        )
    if awaiting is not None:
        return Verdict(
            "stale",
            f"{role} delivered for {subject!r} from basis revision {basis_revision}, but the awaited view "
            f"was built at revision {awaiting.basis_revision}; compute the delivery from the current view",
            awaiting.expectation_id,
        )
    if mine and mine[-1].status == "fulfilled":
        last = mine[-1]
        return Verdict(
            "duplicate",
            f"{role}'s delivery for {subject!r} was already accepted at revision {last.closed_revision} "
            f"(basis {last.basis_revision}); nothing more is awaited from {role} for it",
            last.expectation_id,
        )
    others = sorted({row[1] for row in rows if row[5] == "awaiting"})
    if others:
        return Verdict(
            "foreign",
            f"{subject!r} awaits a delivery from {', '.join(others)}, not from {role}; "
            "a role may deliver only for the subject it was called for",
        )
    return Verdict(
        "unexpected",
        f"nothing is awaited for {subject!r} (no open call for any role); "
        "a delivery answers a call the Harness registered",
    )


def rejection_payload(verdict: Verdict, role: Any, subject: Any, basis_revision: Any, payload: Any) -> dict[str, Any]:
    """The JSON payload of a ``delivery_rejected`` event: the claim as made, and why it was refused."""

    def plain(value: Any) -> Any:
        return value if isinstance(value, str | int) and not isinstance(value, bool) else repr(value)

    try:
        digest: str | None = sha256_digest(
            payload.model_dump(mode="json") if isinstance(payload, BaseModel) else payload
        )
    except (TypeError, ValueError):
        digest = None
    return {
        "reason": verdict.reason,
        "detail": verdict.message,
        "role": plain(role),
        "subject": plain(subject),
        "basis_revision": plain(basis_revision),
        "expectation_id": verdict.expectation_id,
        "payload_digest": digest,
    }
