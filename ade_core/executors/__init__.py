"""Executors run every Engine request for the Harness: ``local`` (subprocesses on this machine), ``simulated``
(dry runs), ``ray`` later. ``executors.base`` is the protocol, ``executors.factory`` picks one from the config.

Names are imported on first use, so a command that only needs ``executors.interpreter`` (every
``ade`` invocation) does not pay for the Engine modules the local executor imports.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

_EXPORTS = {
    "FAILURES": "ade_core.executors.base",
    "RETRYABLE_FAILURES": "ade_core.executors.base",
    "AttemptOutcome": "ade_core.executors.base",
    "EngineRequest": "ade_core.executors.base",
    "Executor": "ade_core.executors.base",
    "Lease": "ade_core.executors.base",
    "Resources": "ade_core.executors.base",
    "LocalExecutor": "ade_core.executors.local",
    "SimulatedExecutor": "ade_core.executors.simulated",
    "make_executor": "ade_core.executors.factory",
    "Slot": "ade_core.executors.slots",
    "slots_from_resources": "ade_core.executors.slots",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'ade_core.executors' has no attribute {name!r}")
    return getattr(import_module(_EXPORTS[name]), name)
