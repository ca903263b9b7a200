"""Executors run Engine attempts for the Harness: ``local`` (subprocess slots) now, ``ray`` later."""

from ade_core.executors.base import FAILURES, RETRYABLE_FAILURES, AttemptOutcome, AttemptRequest, Executor
from ade_core.executors.local import LocalExecutor
from ade_core.executors.slots import Slot, slots_from_resources

__all__ = [
    "FAILURES",
    "RETRYABLE_FAILURES",
    "AttemptOutcome",
    "AttemptRequest",
    "Executor",
    "LocalExecutor",
    "Slot",
    "slots_from_resources",
]
