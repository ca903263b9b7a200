"""Durable run state: the SQLite run store (transitions, deliveries, Run-Memory queue) and the object store.

Only the Harness writes here, and only through transitions: one transaction per revision, one
event per transition, all or nothing.
"""

from __future__ import annotations

from ade_core.store.checks import check_store
from ade_core.store.db import STATE_FILE, RunStore
from ade_core.store.digest import EXCLUDED_FIELDS, EXCLUDED_KINDS, state_digest
from ade_core.store.fork import fork_store
from ade_core.store.objects import ObjectStore
from ade_core.store.records import (
    ACTORS,
    KINDS,
    Actor,
    Delivery,
    DeliveryReason,
    Event,
    Expectation,
    Kind,
    Operation,
    PublishResult,
    QueueEntry,
    StoredDocument,
    natural_key,
)
from ade_core.store.schema import MIGRATIONS, SCHEMA_VERSION, Migration, migrate
from ade_core.store.transition import Transition

__all__ = [
    "ACTORS",
    "EXCLUDED_FIELDS",
    "EXCLUDED_KINDS",
    "KINDS",
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "STATE_FILE",
    "Actor",
    "Delivery",
    "DeliveryReason",
    "Event",
    "Expectation",
    "Kind",
    "Migration",
    "ObjectStore",
    "Operation",
    "PublishResult",
    "QueueEntry",
    "RunStore",
    "StoredDocument",
    "Transition",
    "check_store",
    "fork_store",
    "migrate",
    "natural_key",
    "state_digest",
]
