"""What every executor that runs real processes shares: the first-come-first-served queue with the paper's
resource policy, the protocol's bookkeeping (poll, fence, cancel, close, timeline) and how an exit becomes
a typed outcome.

Subclasses say what a request needs and where it runs: ``LocalExecutor`` grants this machine's cores
and GPUs and starts a subprocess; ``RayExecutor`` hands the request to a Ray cluster as a task.

How an exit becomes a failure: the ``ade`` CLI prints a typed ``AdeError`` (EngineError,
ConfigError, ...) as one line and exits 2 (3 for a model or data file missing on the machine); those
are properties of the frozen command and its machine, and re-running it would fail the same way, so
exits 2 and 3 are ``engine_error``, not retryable. Any other nonzero exit (an unhandled exception:
out of memory, a CUDA fault) is ``crashed``; death by a signal the executor did not send (the OOM
killer, an operator) is ``killed``; both are retryable.
"""

from __future__ import annotations

import asyncio
import json
import signal
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ade_core import exit_codes
from ade_core.engine.attempt import HEARTBEAT
from ade_core.engine.job import EngineJob
from ade_core.engine.package import open_package
from ade_core.errors import AdeError, ExecutorError
from ade_core.executors.base import (
    PACKAGE_KINDS,
    RETRYABLE_FAILURES,
    AttemptOutcome,
    AttemptStatus,
    EngineRequest,
    RequestState,
    Resources,
    Span,
    Submission,
)
from ade_core.executors.slots import Slot

STDOUT_LOG = "engine.stdout.log"
STDERR_LOG = "engine.stderr.log"
_DETAIL_CHARS = 2000


def now() -> datetime:
    return datetime.now(UTC)


@dataclass
class Waiting:
    """A request queued for resources: what it needs and when it arrived."""

    request: EngineRequest
    need: Resources
    queued_at: datetime
    queued: float


class QueuedExecutor(ABC):
    """The queue, the policy and the protocol's bookkeeping; subclasses grant resources and run requests."""

    kind = "queued"

    def __init__(self, *, max_running: int | None, poll_s: float) -> None:
        if max_running is not None and max_running < 1:
            raise ExecutorError(f"max_running must be >= 1 (got {max_running})")
        if poll_s <= 0:
            raise ExecutorError(f"poll_s must be > 0 (got {poll_s})")
        self._max_running = max_running
        self._poll_s = poll_s
        self._waiting: list[Waiting] = []
        self._changed = asyncio.Event()
        self._holding: dict[str, tuple[EngineRequest, Slot, Resources]] = {}
        self._submitted: dict[str, Submission] = {}
        self._finished: dict[str, AttemptOutcome] = {}
        self._fenced: set[str] = set()
        self._cancelled: set[str] = set()
        self._spans: list[Span] = []
        # When a request's process started and ended, where the executor learns them from its worker.
        self._began: dict[str, float] = {}
        self._ended: dict[str, float] = {}
        self._closed = False

    # --- what a subclass provides ----------------------------------------------------------------
    @abstractmethod
    def resolve(self, declared: Resources) -> Resources:
        """``declared`` with the executor's share filled in; an ExecutorError when it can never be granted."""

    @abstractmethod
    def _fits(self, need: Resources) -> bool:
        """Whether ``need`` can be granted now."""

    @abstractmethod
    def _grant(self, need: Resources) -> Slot:
        """Take ``need`` from what is free and name the grant (called only when ``_fits`` said yes)."""

    @abstractmethod
    def _release(self, slot: Slot, need: Resources) -> None:
        """Give back what ``_grant`` took."""

    @abstractmethod
    def _recorded(self, slot: Slot, need: Resources) -> dict[str, str]:
        """The grant as recorded with the outcome, in the package and by ``poll``."""

    @abstractmethod
    async def _run_on(self, slot: Slot, need: Resources, request: EngineRequest, queued_at: datetime) -> AttemptOutcome:
        """Run ``request`` on its grant to the end and judge the outcome."""

    @abstractmethod
    def _room(self, need: Resources) -> int:
        """How many grants of ``need`` fit in everything this executor has."""

    @abstractmethod
    def _stop(self, request_id: str, reason: str) -> None:
        """Kill a running request for ``reason`` (fenced, cancelled); nothing when it is not running."""

    # --- the Executor protocol ---------------------------------------------------------------
    def submit(self, request: EngineRequest) -> Submission:
        """Queue ``request``; it runs once its resources are free and no held-out/in-loop conflict holds."""
        rid = request.request_id
        if rid in self._submitted:
            raise ExecutorError(f"request {rid!r} is already submitted; every attempt needs a fresh id")
        need = self.resolve(request.resources)
        submission = Submission(request, asyncio.ensure_future(self._execute(request, need)))
        self._submitted[rid] = submission
        return submission

    def poll(self, request_id: str) -> RequestState:
        if request_id in self._holding:
            request, slot, need = self._holding[request_id]
            beat = read_json(request.directory / HEARTBEAT)
            return RequestState(request_id, "running", request.kind, self._recorded(slot, need), beat)
        for waiting in self._waiting:
            if waiting.request.request_id == request_id:
                return RequestState(request_id, "queued", waiting.request.kind)
        if request_id in self._finished:
            outcome = self._finished[request_id]
            return RequestState(request_id, "done", outcome.kind, dict(outcome.resources))
        return RequestState(request_id, "unknown")

    def fence(self, request_id: str) -> None:
        """Refuse the request's results from now on; kill it if it is running."""
        self._fenced.add(request_id)
        self._stop(request_id, "fenced")
        self._changed.set()

    def cancel(self, request_id: str) -> None:
        """Stop one queued or running request; its outcome says ``cancelled``."""
        if request_id in self._finished:
            return
        self._cancelled.add(request_id)
        self._stop(request_id, "cancelled")
        self._changed.set()

    def capacity(self, resources: Resources) -> int:
        room = max(1, self._room(self.resolve(resources)))
        return room if self._max_running is None else min(room, self._max_running)

    def timeline(self) -> list[Span]:
        return list(self._spans)

    async def close(self) -> None:
        """Kill every running request (outcome ``cancelled``); return once none holds resources."""
        self._closed = True
        self._changed.set()
        for request_id in list(self._holding):
            self._stop(request_id, "cancelled")
        while self._holding:
            await asyncio.sleep(0.01)

    # --- observation -------------------------------------------------------------------------
    @property
    def max_running(self) -> int | None:
        """The cap on concurrent requests (None: only resources bound them)."""
        return self._max_running

    def active(self) -> dict[str, dict[str, str]]:
        """Requests holding resources now, with their grant."""
        return {rid: self._recorded(slot, need) for rid, (_, slot, need) in self._holding.items()}

    # --- scheduling ----------------------------------------------------------------------------
    def _admissible(self, waiting: Waiting) -> bool:
        """Whether the head of the queue may start now: the policy allows it and its resources are free."""
        if self._max_running is not None and len(self._holding) >= self._max_running:
            return False
        if any(held.in_loop != waiting.request.in_loop for held, _, _ in self._holding.values()):
            return False  # an operator held-out evaluation never overlaps in-loop work
        return self._fits(waiting.need)

    async def _acquire(self, waiting: Waiting) -> Slot | None:
        """Wait until ``waiting`` is first in line and admissible; None when it was stopped while queued."""
        self._waiting.append(waiting)
        rid = waiting.request.request_id
        try:
            while True:
                if self._closed or rid in self._fenced or rid in self._cancelled:
                    return None
                if self._waiting[0] is waiting and self._admissible(waiting):
                    return self._grant(waiting.need)
                self._changed.clear()
                await self._changed.wait()
        finally:
            self._waiting.remove(waiting)
            self._changed.set()  # the next in line may start now

    async def _execute(self, request: EngineRequest, need: Resources) -> AttemptOutcome:
        rid = request.request_id
        waiting = Waiting(request, need, now(), time.monotonic())
        try:
            slot = await self._acquire(waiting)
            if slot is None:
                outcome = self._refused(request, waiting.queued_at)
            else:
                self._holding[rid] = (request, slot, need)
                began = time.monotonic()
                try:
                    outcome = await self._run_on(slot, need, request, waiting.queued_at)
                finally:
                    del self._holding[rid]
                    self._release(slot, need)
                    self._changed.set()
                    began, ended = self._began.pop(rid, began), self._ended.pop(rid, time.monotonic())
                    self._spans.append(Span(rid, request.kind, slot.name, waiting.queued, began, ended))
        finally:
            self._submitted.pop(rid, None)
        self._finished[rid] = outcome
        return outcome

    # --- outcomes ------------------------------------------------------------------------------
    def _refused(self, request: EngineRequest, at: datetime) -> AttemptOutcome:
        failure = "fenced" if request.request_id in self._fenced else "cancelled"
        return self._outcome(request, {}, at, failure, f"{request.kind} {failure} before it started", queued_at=at)

    def _judged(
        self,
        request: EngineRequest,
        resources: dict[str, str],
        started_at: datetime,
        queued_at: datetime,
        code: int,
        killed_for: str | None,
        ours: dict[str, str],
    ) -> AttemptOutcome:
        """The outcome of a request whose process exited with ``code`` (negative: by that signal).

        ``killed_for`` is why the executor killed it, if it did; ``ours`` explains each such reason.
        """
        directory = Path(request.directory)
        logs = {"stdout": str(directory / STDOUT_LOG), "stderr": str(directory / STDERR_LOG)}

        def outcome(
            failure: str | None, detail: str, package: Path | None = None, result: dict[str, Any] | None = None
        ) -> AttemptOutcome:
            return self._outcome(
                request, resources, started_at, failure, detail, package, code, logs, queued_at, result
            )

        tail = _tail(Path(logs["stderr"]))
        if killed_for in ours:
            return outcome(killed_for, f"{ours[killed_for]}\n{tail}".strip())
        if code < 0:
            return outcome("killed", f"killed by {signal.Signals(-code).name}\n{tail}")
        if code in (exit_codes.USAGE, exit_codes.ENVIRONMENT):
            return outcome("engine_error", tail)
        if code != 0:
            return outcome("crashed", f"exit status {code}\n{tail}")
        if request.kind in PACKAGE_KINDS:
            assert isinstance(request.job, EngineJob)
            package, problem = check_package(Path(logs["stdout"]), directory, request.job)
            if package is None:
                return outcome("bad_package", problem)
            return outcome(None, problem, package)
        result = last_json(Path(logs["stdout"]))
        if result is None:
            return outcome("bad_package", f"`ade {' '.join(request.command[:2])}` printed no result")
        return outcome(None, f"{request.kind} result", None, result)

    def _outcome(
        self,
        request: EngineRequest,
        resources: dict[str, str],
        started_at: datetime,
        failure: str | None,
        detail: str,
        package: Path | None = None,
        code: int | None = None,
        logs: dict[str, str] | None = None,
        queued_at: datetime | None = None,
        result: dict[str, Any] | None = None,
    ) -> AttemptOutcome:
        rid = request.request_id
        if rid in self._fenced:  # checked last: a fence that raced a finished request still wins
            failure, package, result = "fenced", None, None
            detail = f"{request.kind} fenced; its results are refused\n{detail}"
        elif rid in self._cancelled and failure is None:
            failure, package, result = "cancelled", None, None
        status: AttemptStatus
        if failure == "fenced":
            status = "fenced"
        else:
            status = "succeeded" if failure is None else "failed"
        return AttemptOutcome(
            attempt_id=rid,
            status=status,
            package=package,
            failure=failure,
            retryable=failure in RETRYABLE_FAILURES,
            resources=resources,
            detail=detail,
            started_at=started_at,
            ended_at=now(),
            exit_code=code,
            log_paths=logs or {},
            queued_at=queued_at or started_at,
            kind=request.kind,
            result=result,
        )


def read_json(path: Path) -> dict[str, Any] | None:
    try:
        found = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return found if isinstance(found, dict) else None


def read_beat(path: Path, request_id: str) -> tuple[Any, ...] | None:
    """The heartbeat's content, or None when absent, unreadable or another request's."""
    beat = read_json(path)
    if beat is None or beat.get("attempt_id") != request_id:
        return None
    return (beat.get("time"), beat.get("phase"), json.dumps(beat.get("detail"), sort_keys=True))


def last_json(stdout: Path) -> dict[str, Any] | None:
    """The last line of ``stdout`` that is a JSON object."""
    for line in reversed(_tail(stdout).splitlines()):
        try:
            found = json.loads(line)
        except ValueError:
            continue
        if isinstance(found, dict):
            return found
    return None


def _tail(path: Path) -> str:
    try:
        data = path.read_bytes()[-_DETAIL_CHARS:]
    except OSError:
        return ""
    return data.decode("utf-8", errors="replace").strip()


def check_package(stdout: Path, directory: Path, job: EngineJob) -> tuple[Path | None, str]:
    """The package the Engine printed, if it is sealed, inside the request dir and this attempt's own."""
    printed = (last_json(stdout) or {}).get("package")
    if not printed:
        return None, "the Engine exited 0 without printing a package path"
    package = Path(printed)
    if not package.resolve().is_relative_to(directory.resolve()):
        return None, f"package {package} lies outside the attempt directory {directory}"
    try:
        manifest = open_package(package).manifest
    except (AdeError, ValidationError) as exc:
        return None, f"package {package} does not open: {exc}"
    expected = (job.trial_id, job.attempt_id, job.command.digest())
    found = (manifest.trial_id, manifest.attempt_id, manifest.command_digest)
    if found != expected:
        return None, f"package {package} belongs to (trial, attempt, command) {found}, not {expected}"
    return package, f"package {package.name} ({manifest.status})"
