"""The deterministic research policy under its Harness name (dry runs and tests).

The policy lives in ``ade_core.agents.offline`` (the ``offline`` backend); ``ScriptedBackend`` is
the same class, kept so Harness code and tests can name it without knowing about backends.
"""

from __future__ import annotations

from ade_core.agents.offline import DEFAULT_LATENCY, OfflinePolicy, format_direction, parse_direction

ScriptedBackend = OfflinePolicy

__all__ = ["DEFAULT_LATENCY", "ScriptedBackend", "format_direction", "parse_direction"]
