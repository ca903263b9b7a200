"""The executor contract: how the Harness hands Engine work to the machines that run it.

The Harness owns Trials, Base and held-out evaluations; an executor owns physical executions.
Every Engine run is one ``EngineRequest``: its kind (a Trial attempt, the base-model evaluation,
the generic reference's attempt, a held-out evaluation, a sampling job), the ``ade`` command it
runs, the resources it declares and the lease that says when it counts as lost. One protocol
(``submit``, ``poll``, ``fence``, ``cancel``, ``recover``, ``close``) serves every executor kind,
so the Harness never knows which one runs its work.

Failures are data, not exceptions (a failed execution is a recorded status, never a traceback
that stops the run), and ``retryable`` says whether the failure is one of the declared physical
faults that the Harness may retry with a fresh attempt id within its recovery budget.

The resource policy (paper Appendix B) is part of the contract: requests of the in-loop kinds may
run side by side (one attempt trains while another evaluates its checkpoints), but an operator
held-out evaluation never overlaps in-loop work on the same executor.
"""

from __future__ import annotations

import asyncio
from collections.abc import Generator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Literal, Protocol

from pydantic import BaseModel

from ade_core.errors import ExecutorError

AttemptStatus = Literal["succeeded", "failed", "fenced"]
RequestKind = Literal["attempt", "base_eval", "reference", "heldout", "sampling"]
REQUEST_KINDS: tuple[RequestKind, ...] = ("attempt", "base_eval", "reference", "heldout", "sampling")
# Kinds whose results feed search. An operator held-out evaluation never runs beside one of them.
IN_LOOP_KINDS = frozenset({"attempt", "base_eval", "reference", "sampling"})
# Kinds whose Engine command seals an Experiment Package (checked against the request's job).
PACKAGE_KINDS = frozenset({"attempt", "reference"})

# The failure taxonomy. Retryable ones are physical faults of one execution; the others are
# properties of the frozen command (re-running it would fail the same way) or decisions of
# the Harness itself. ``bad_package`` also covers a command that printed no readable result.
# ``node_lost`` (the node running it died) and ``unscheduled`` (no node started it in time) come from a cluster.
RETRYABLE_FAILURES = frozenset({"crashed", "stalled", "killed", "bad_package", "node_lost", "unscheduled"})
FAILURES = RETRYABLE_FAILURES | {"engine_error", "cancelled", "fenced"}

JOB_PLACEHOLDER = "{job}"  # in a request's command: the path of its job file, written by the executor
DIR_PLACEHOLDER = "{dir}"  # in a request's command: its directory, where the executor keeps logs


@dataclass(frozen=True)
class Resources:
    """What one request declares it needs; ``None`` takes the executor's per-attempt share.

    ``threads`` is the number of torch/OpenMP threads the Engine uses (default: one per CPU), recorded
    in the package so that a result is reproduced with the same threads on any executor.
    """

    cpus: int | None = None
    threads: int | None = None
    gpus: int | None = None
    memory_gb: float | None = None
    custom: Mapping[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in ("cpus", "threads", "gpus"):
            value = getattr(self, name)
            if value is not None and value < (0 if name == "gpus" else 1):
                raise ExecutorError(f"resources.{name} = {value} is not a valid count; use a positive number")
        if self.memory_gb is not None and self.memory_gb <= 0:
            raise ExecutorError(f"resources.memory_gb = {self.memory_gb} must be > 0 (or None: not declared)")
        for name, amount in self.custom.items():
            if amount <= 0:
                raise ExecutorError(f"custom resource {name!r} = {amount} must be > 0")


@dataclass(frozen=True)
class Lease:
    """How long a running request may go without heartbeat progress before it is declared stalled.

    Only commands that beat (``ade engine run``) are held to it; ``None`` never declares a stall.
    """

    stall_after_s: float | None = 120.0

    def __post_init__(self) -> None:
        if self.stall_after_s is not None and self.stall_after_s <= 0:
            raise ExecutorError(f"lease.stall_after_s must be > 0 (got {self.stall_after_s})")


@dataclass(frozen=True)
class EngineRequest:
    """One Engine execution: ``ade <command>`` with its job, for a request of ``kind``.

    ``command`` holds the ``ade`` arguments; ``{job}`` stands for the job file and ``{dir}`` for
    ``directory``, both filled in by the executor (which writes the job where its worker reads it).
    """

    kind: RequestKind
    request_id: str
    command: tuple[str, ...]
    directory: Path
    job: BaseModel
    resources: Resources = field(default_factory=Resources)
    lease: Lease = field(default_factory=Lease)

    def __post_init__(self) -> None:
        if self.kind not in REQUEST_KINDS:
            raise ExecutorError(f"unknown request kind {self.kind!r}; known: {list(REQUEST_KINDS)}")
        if not self.command:
            raise ExecutorError(f"request {self.request_id!r} has no command")

    @property
    def in_loop(self) -> bool:
        return self.kind in IN_LOOP_KINDS


@dataclass(frozen=True)
class AttemptOutcome:
    """What became of one execution: a sealed package or a result, or a typed failure with its explanation."""

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
    kind: RequestKind = "attempt"
    result: dict[str, Any] | None = None  # the JSON line a non-package command printed last

    @property
    def waited_s(self) -> float | None:
        """Seconds the request waited for resources (None when the executor did not say)."""
        if self.queued_at is None:
            return None
        return max(0.0, (self.started_at - self.queued_at).total_seconds())

    def __post_init__(self) -> None:
        produced = self.package is not None or self.result is not None
        if (self.status == "succeeded") != (produced and self.failure is None):
            raise ValueError(f"attempt {self.attempt_id}: a package or result comes with success and only with it")
        if self.failure is not None and self.failure not in FAILURES:
            raise ValueError(f"unknown attempt failure {self.failure!r}; known: {sorted(FAILURES)}")


@dataclass(frozen=True)
class RequestState:
    """``poll``'s answer: where a request stands, what it holds, and its last heartbeat."""

    request_id: str
    state: Literal["queued", "running", "done", "unknown"]
    kind: RequestKind | None = None
    resources: dict[str, str] = field(default_factory=dict)
    heartbeat: dict[str, Any] | None = None


@dataclass(frozen=True)
class Span:
    """One request in an executor's timeline (``time.monotonic()`` seconds, or virtual ones)."""

    request_id: str
    kind: RequestKind
    slot: str
    queued: float
    started: float
    ended: float


class Submission:
    """A submitted request: await it for its outcome. Cancelling the awaiter cancels the execution."""

    def __init__(self, request: EngineRequest, task: asyncio.Task[AttemptOutcome]):
        self.request = request
        self.task = task

    async def outcome(self) -> AttemptOutcome:
        try:
            return await asyncio.shield(self.task)
        except asyncio.CancelledError:
            self.task.cancel()
            await asyncio.gather(self.task, return_exceptions=True)
            raise

    def __await__(self) -> Generator[Any, None, AttemptOutcome]:
        return self.outcome().__await__()


class Executor(Protocol):
    """Runs Engine requests on some pool of resources (this machine, a simulation, later a Ray cluster)."""

    kind: str

    def submit(self, request: EngineRequest) -> Submission:
        """Queue ``request``; it starts once its resources are free and the policy allows it."""
        ...

    def poll(self, request_id: str) -> RequestState:
        """Where a request stands (queued, running, done) with its resources and last heartbeat."""
        ...

    def fence(self, request_id: str) -> None:
        """Refuse this request's results from now on, and kill it if it is still running."""
        ...

    def cancel(self, request_id: str) -> None:
        """Stop one request (its outcome says ``cancelled``); a finished one is left as it is."""
        ...

    def recover(self, request_id: str, directory: Path) -> bool:
        """Stop what a dead controller left running for ``request_id`` in ``directory``; True if anything was.

        Does not fence the id: the Harness fences a lost attempt itself, and may resubmit an evaluation."""
        ...

    def capacity(self, resources: Resources) -> int:
        """How many requests declaring ``resources`` could run at once with nothing else running (at least 1)."""
        ...

    def timeline(self) -> list[Span]:
        """Every finished request's queued/started/ended times and the slot it held."""
        ...

    async def close(self) -> None:
        """Stop every running request (their outcomes say ``cancelled``) and release resources."""
        ...


async def run(executor: Executor, request: EngineRequest) -> AttemptOutcome:
    """Submit ``request`` and await its outcome."""
    return await executor.submit(request).outcome()
