"""The Harness's notion of time: wall time for real runs, a virtual clock for dry runs.

Every wait the controller does goes through a ``Clock`` with a *key* (which chain of work is
waiting: a Coordinator, the Run-Memory writer) and, for timed work, an *anchor* (the clock
reading committed when that work began). With the wall clock work simply takes the time it
takes. With the virtual clock (``ade_core.harness.simulated``) a wait ends at exactly
``anchor + duration`` and ties wake in key order, so a dry run's interleaving is a function of
its committed state; after a crash, resumed work keeps its original anchors and the run
commits in the same order as one that never crashed.
"""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime
from typing import Protocol


class Clock(Protocol):
    """What the controller needs of time."""

    def now(self) -> float:
        """Seconds on this clock (epoch seconds for the wall clock, virtual seconds otherwise)."""
        ...

    def datetime(self) -> datetime:
        """The current reading as a UTC datetime (for records' ``started_at`` / ``ended_at``)."""
        ...

    async def pace(self, key: str, anchor: float, seconds: float) -> None:
        """Wait until work that began at ``anchor`` and took ``seconds`` is done on this clock."""
        ...

    async def checkpoint(self, key: str) -> None:
        """Yield to other chains at the current reading (ties are ordered by ``key``)."""
        ...


class WallClock:
    """Real time: work has already taken its time when it returns, so pacing only yields."""

    def now(self) -> float:
        return time.time()

    def datetime(self) -> datetime:
        return datetime.now(UTC)

    async def pace(self, key: str, anchor: float, seconds: float) -> None:
        await asyncio.sleep(0)

    async def checkpoint(self, key: str) -> None:
        await asyncio.sleep(0)
