"""The executor contract: how the Harness hands one Engine attempt to the machines that run it.

The Harness owns Trials; an executor owns physical attempts. It runs the frozen command of
one attempt, watches it, and answers with a typed outcome. Failures are data, not
exceptions (a failed attempt is a recorded status, never a traceback that stops the run),
and ``retryable`` says whether the failure is one of the declared physical faults that the
Harness may retry with a fresh attempt id within its recovery budget (issue 7, item 4).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Literal, Protocol

from ade_core.engine.job import EngineJob

AttemptStatus = Literal["succeeded", "failed", "fenced"]

# The failure taxonomy. Retryable ones are physical faults of one execution; the others are
# properties of the frozen command (re-running it would fail the same way) or decisions of
# the Harness itself.
RETRYABLE_FAILURES = frozenset({"crashed", "stalled", "killed", "bad_package"})
FAILURES = RETRYABLE_FAILURES | {"engine_error", "cancelled", "fenced"}


@dataclass(frozen=True)
class AttemptRequest:
    """One physical execution of a Trial's frozen command."""

    job: EngineJob
    attempt_dir: Path


@dataclass(frozen=True)
class AttemptOutcome:
    """What became of one attempt: a sealed package, or a typed failure with its explanation."""

    attempt_id: str
    status: AttemptStatus
    package: Path | None
    failure: str | None
    retryable: bool
    resources: dict[str, str]
    detail: str
    started_at: datetime
    ended_at: datetime
    exit_code: int | None = None
    log_paths: dict[str, str] = field(default_factory=dict)
    queued_at: datetime | None = None  # when the request reached the executor; started_at - queued_at is waiting

    @property
    def waited_s(self) -> float | None:
        """Seconds the attempt waited for a free slot (None when the executor did not say)."""
        if self.queued_at is None:
            return None
        return max(0.0, (self.started_at - self.queued_at).total_seconds())

    def __post_init__(self) -> None:
        if (self.status == "succeeded") != (self.package is not None and self.failure is None):
            raise ValueError(f"attempt {self.attempt_id}: a package comes with success and only with success")
        if self.failure is not None and self.failure not in FAILURES:
            raise ValueError(f"unknown attempt failure {self.failure!r}; known: {sorted(FAILURES)}")


class Executor(Protocol):
    """Runs Engine attempts on some pool of resources (local slots now, Ray later)."""

    async def run(self, request: AttemptRequest) -> AttemptOutcome:
        """Run one attempt to its end and report the outcome; waits for free resources first."""
        ...

    def fence(self, attempt_id: str) -> None:
        """Refuse this attempt's results from now on, and kill it if it is still running."""
        ...

    async def close(self) -> None:
        """Stop every running attempt (their outcomes say ``cancelled``) and release resources."""
        ...
