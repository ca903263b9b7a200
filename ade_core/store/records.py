"""What the run store holds: document kinds, their schemas and identities, and the rows it returns."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal, get_args

from pydantic import BaseModel, ValidationError

from ade_core.errors import InvalidDocumentError, TransitionError, did_you_mean
from ade_core.schemas import Attempt, LedgerEntry, Plan, PlanMemory, RunMemory, Trial
from ade_core.schemas.common import Model, canonical_json
from ade_core.schemas.run import RunRecord
from ade_core.specs import Role

Kind = Literal["plan", "trial", "attempt", "plan_memory", "run_memory", "ledger", "run"]
KINDS: tuple[str, ...] = get_args(Kind)

# Who causes a transition: an agent role whose delivery the Harness accepted, the Harness itself,
# or the human operator (ledger actions).
Actor = Literal[Role, "harness", "operator"]
ACTORS: tuple[str, ...] = get_args(Actor)

DeliveryReason = Literal["stale", "foreign", "duplicate", "malformed", "unexpected"]

KIND_MODELS: dict[str, type[Model]] = {
    "plan": Plan,
    "trial": Trial,
    "attempt": Attempt,
    "plan_memory": PlanMemory,
    "run_memory": RunMemory,
    "ledger": LedgerEntry,
    "run": RunRecord,
}

# Frozen once written (paper App. C.7: Plans are frozen at admission; memory versions are immutable;
# the operator ledger is append-only). Trials and attempts change status and may be rewritten.
IMMUTABLE_KINDS: frozenset[str] = frozenset({"plan", "plan_memory", "run_memory", "ledger"})


def natural_key(kind: str, model: Model) -> str:
    """The key a document of ``kind`` is stored under: its own identity, so a lookup never finds another entity.

    plan -> plan_id; trial -> trial_id; attempt -> attempt_id; plan_memory -> ``<plan_id>@v<version>``;
    run_memory -> ``v<version>``; ledger -> ``<sequence>``; run -> ``run`` (one per store).
    """
    data = model.model_dump()
    if kind == "plan":
        return data["plan_id"]
    if kind == "trial":
        return data["trial_id"]
    if kind == "attempt":
        return data["attempt_id"]
    if kind == "plan_memory":
        return f"{data['plan_id']}@v{data['version']}"
    if kind == "run_memory":
        return f"v{data['version']}"
    if kind == "run":
        return "run"
    return str(data["sequence"])


def check_kind(kind: str) -> str:
    """Return ``kind`` if it is a known document kind, else raise naming the closest one."""
    if kind not in KIND_MODELS:
        raise InvalidDocumentError(f"unknown document kind {kind!r}{did_you_mean(str(kind), KINDS)}; known: {KINDS}")
    return kind


def check_actor(actor: str) -> str:
    """Return ``actor`` if it may cause a transition, else raise naming the closest one."""
    if actor not in ACTORS:
        raise TransitionError(f"unknown actor {actor!r}{did_you_mean(str(actor), ACTORS)}; known: {ACTORS}")
    return actor


def validate_document(kind: str, key: str, document: BaseModel | Mapping[str, Any]) -> dict[str, Any]:
    """Validate ``document`` against its kind's schema and key; return its JSON form.

    A model of the wrong class, a mapping that does not validate, or a key other than the
    document's natural key raise ``InvalidDocumentError`` naming the value and the fix.
    """
    model_cls = KIND_MODELS[check_kind(kind)]
    if isinstance(document, BaseModel):
        if not isinstance(document, model_cls):
            raise InvalidDocumentError(
                f"a {kind!r} document must be a {model_cls.__name__} (got {type(document).__name__}); "
                f"pass the {model_cls.__name__} model or its JSON mapping"
            )
        model = document
    elif isinstance(document, Mapping):
        try:
            model = model_cls.model_validate(dict(document))
        except ValidationError as exc:
            raise InvalidDocumentError(f"{kind} {key!r} does not validate as {model_cls.__name__}: {exc}") from exc
    else:
        raise InvalidDocumentError(
            f"a {kind!r} document must be a {model_cls.__name__} or a mapping (got {type(document).__name__})"
        )
    expected = natural_key(kind, model)
    if key != expected:
        raise InvalidDocumentError(
            f"{kind} stored under key {key!r}, but its identity is {expected!r}; use {expected!r}"
        )
    return model.model_dump(mode="json")


def json_document(value: Any, what: str) -> str:
    """Canonical JSON of ``value``, or a ``TransitionError`` saying why it cannot be stored."""
    try:
        return canonical_json(value)
    except (TypeError, ValueError) as exc:
        raise TransitionError(f"{what} is not JSON-serializable ({exc}); pass plain JSON values") from exc


def utc_now() -> str:
    """ISO-8601 UTC timestamp with microseconds, as stored in every time column."""
    return datetime.now(UTC).isoformat(timespec="microseconds")


@dataclass(frozen=True)
class Event:
    """One committed transition: the append-only audit record of a revision."""

    revision: int
    kind: str
    actor: str
    subject: str
    payload: dict[str, Any]
    payload_digest: str
    at: str


@dataclass(frozen=True)
class StoredDocument:
    """A document as stored: its kind, key, the revision that wrote this version, and its digest."""

    kind: str
    key: str
    revision: int
    document: dict[str, Any]
    digest: str

    def model(self) -> Model:
        """The document parsed as its kind's schema model (``Plan``, ``Trial``, ...)."""
        return KIND_MODELS[self.kind].model_validate(self.document)


ExpectationStatus = Literal["awaiting", "fulfilled", "withdrawn"]


@dataclass(frozen=True)
class Expectation:
    """An awaited delivery: which role may deliver for which subject, from which basis revision."""

    expectation_id: int
    role: str
    subject: str
    basis_revision: int
    registered_revision: int
    status: ExpectationStatus
    closed_revision: int | None


@dataclass(frozen=True)
class Delivery:
    """An accepted delivery, bound to the expectation it fulfilled."""

    expectation_id: int
    role: str
    subject: str
    basis_revision: int
    revision: int
    payload: dict[str, Any]
    digest: str


QueueStatus = Literal["pending", "published"]


@dataclass(frozen=True)
class QueueEntry:
    """One Plan-Memory update waiting for (or merged into) Run Memory, under its persistent commit key."""

    position: int
    commit_key: str
    plan_memory_ref: str
    enqueued_revision: int
    status: QueueStatus
    published_revision: int | None
    run_memory_key: str | None


@dataclass(frozen=True)
class PublishResult:
    """Outcome of a Run-Memory publication: newly ``published``, or ``acknowledged`` as already merged."""

    status: Literal["published", "acknowledged"]
    entry: QueueEntry
    run_memory_key: str
    revision: int


@dataclass(frozen=True)
class Operation:
    """One recovery/operations action, logged apart from research state and events."""

    seq: int
    action: str
    subject: str
    details: dict[str, Any]
    revision: int
    at: str


def loads(text: str) -> Any:
    """Parse a JSON column."""
    return json.loads(text)
