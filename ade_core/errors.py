"""Typed errors: every failure a user can act on names the value and the fix."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class AdeError(Exception):
    """Base of every error ADE raises on purpose; the CLI prints these without a traceback."""


class ConfigError(AdeError):
    """A configuration file or override is invalid."""


class PluginError(AdeError):
    """A plugin failed to load, broke a hook contract, or raised inside a hook."""


class PluginLoadError(PluginError):
    """An entry point in group ``ade`` could not be imported or registered."""


class DuplicateTaskError(PluginError):
    """Two distributions claim the same task name."""


class MissingHookError(PluginError):
    """The plugin that owns a task does not implement a hook the caller needs."""


class UnknownTaskError(AdeError):
    """A task name that no installed plugin registers."""


class UnknownInterventionKindError(AdeError):
    """An intervention kind that no installed plugin registers, or one the task cannot bind to."""

    def __init__(
        self, kind: str, registered: Iterable[str], why: str = "is not registered", listing: str = "registered kinds"
    ) -> None:
        known = sorted(registered)
        super().__init__(
            f"intervention kind {kind!r} {why}{did_you_mean(kind, known)}; {listing}: "
            f"{', '.join(known) or 'none'}. Install the plugin that declares it (hook ade_intervention_kinds) "
            "or fix the kind."
        )
        self.kind = kind
        self.registered = tuple(known)


class UnknownSchemaError(AdeError):
    """A schema name that ``ade schema`` does not export."""


class ScaffoldError(AdeError):
    """``ade new-task`` cannot render the requested package."""


class StoreError(AdeError):
    """The run store refused an operation, or found its files inconsistent."""


class NotARunError(StoreError):
    """A run command was pointed at something that is not an ADE run (a directory or a run id)."""


class SchemaVersionError(StoreError):
    """A run store was written by a newer ADE than the one opening it."""


class StoreBusyError(StoreError):
    """Another process held the run store's write lock for longer than the busy timeout."""


class TransitionError(StoreError):
    """A transition was used wrongly: nested, written outside its body, or with an invalid field."""


class InvalidDocumentError(StoreError):
    """A document does not validate against the schema of its kind, or is stored under a key it does not own."""


class ImmutableRecordError(StoreError):
    """A write tried to change an immutable record (a Plan, a memory version, a ledger entry)."""


class QueueError(StoreError):
    """The Run-Memory update queue refused an operation (unknown or conflicting commit key)."""


class QueueOrderError(QueueError):
    """A Run-Memory publication named a commit key that is not the head of the FIFO queue."""


class ObjectStoreError(StoreError):
    """The content-addressed object store refused a digest or could not find an object."""


class ObjectMissing(ObjectStoreError):
    """No object is stored under the requested digest."""


class ObjectCorrupt(ObjectStoreError):
    """A stored object's bytes no longer hash to the digest it is stored under."""


class DeliveryRejected(AdeError):
    """The Harness refused an agent delivery; the rejection itself is a recorded event.

    ``reason`` is one of ``stale | foreign | duplicate | malformed | unexpected``; ``revision`` is
    the revision of the event that recorded the rejection.
    """

    def __init__(self, reason: str, message: str, *, role: str, subject: str, revision: int) -> None:
        super().__init__(f"delivery rejected ({reason}): {message}")
        self.reason = reason
        self.role = role
        self.subject = subject
        self.revision = revision


def did_you_mean(value: str, known: Iterable[str]) -> str:
    """Return a " (did you mean 'x'?)" suffix for the closest known name, or ""."""
    matches = difflib.get_close_matches(value, list(known), n=1, cutoff=0.5)
    return f" (did you mean {matches[0]!r}?)" if matches else ""


class ExecutorError(AdeError):
    """An executor cannot be set up as asked (no slots, unknown CPUs, no visible GPUs)."""


class EnvironmentProblem(AdeError):
    """The machine lacks something the command needs (a local model or data folder, a system tool)."""


class StrategyFailure(AdeError):
    """A strategy failed or was found inadmissible; the message says why and where."""
