"""The local executor: Engine attempts as subprocesses on resource slots of this machine.

Each attempt waits (asyncio) for a free slot, then runs ``ade engine run`` in its own
process group with the slot's CPU affinity and CUDA_VISIBLE_DEVICES. Liveness comes from
the Engine's ``heartbeat.json``: a heartbeat that stops advancing for ``stall_after_s``
means a wedged process, and the whole group is killed. A fenced attempt (the Harness gave
up on it) is killed and its results are refused even if it finished, so a late package can
never enter the run (issue 7, item 4).

How an exit becomes a failure: the ``ade`` CLI prints a typed ``AdeError`` (EngineError,
ConfigError, ...) as one line and exits 2 (3 for a model or data file missing on this machine); those
are properties of the frozen command and its machine, and re-running it would fail the same way, so
exits 2 and 3 are ``engine_error``, not retryable. Any
other nonzero exit (an unhandled exception: out of memory, a CUDA fault) is ``crashed``;
death by a signal we did not send (the OOM killer, an operator) is ``killed``; both are
retryable. Processes that leave the group on purpose (sandboxed graders start their own
session) are bounded by their own wall-clock limits, not by this executor.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ade_core import exit_codes
from ade_core.engine.attempt import HEARTBEAT
from ade_core.engine.job import EngineJob
from ade_core.engine.package import open_package
from ade_core.errors import AdeError, ExecutorError
from ade_core.executors.base import RETRYABLE_FAILURES, AttemptOutcome, AttemptRequest, AttemptStatus
from ade_core.executors.interpreter import python_command
from ade_core.executors.slots import Slot, usable_cpus

JOB_FILE = "job.json"
STDOUT_LOG = "engine.stdout.log"
STDERR_LOG = "engine.stderr.log"
_DETAIL_CHARS = 2000
# Sets the CPU affinity, then becomes the real command: thread-safe, unlike preexec_fn in a
# controller that runs threads (SQLite, asyncio.to_thread).
_PIN = (
    "import os, sys; os.sched_setaffinity(0, [int(c) for c in sys.argv[1].split(',')]); "
    "os.execvp(sys.argv[2], sys.argv[2:])"
)


def _now() -> datetime:
    return datetime.now(UTC)


class _Running:
    """A started attempt: its process and why we killed it, if we did."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.killed_for: str | None = None

    def kill(self, reason: str) -> None:
        self.killed_for = self.killed_for or reason
        _kill_group(self.process.pid)


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass  # already gone


class LocalExecutor:
    """Runs attempts as subprocesses, at most one per slot at a time.

    ``command`` replaces the Engine invocation (a list prefix to which ``JOB --out DIR`` is
    appended); tests use it to run a stand-in Engine. One executor serves one event loop.
    """

    def __init__(
        self,
        slots: Sequence[Slot],
        *,
        stall_after_s: float = 120.0,
        poll_s: float = 1.0,
        python: str = sys.executable,
        command: Sequence[str] | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        if not slots:
            raise ExecutorError("the local executor needs at least one slot; see slots_from_resources()")
        names = [slot.name for slot in slots]
        if len(set(names)) != len(names):
            raise ExecutorError(f"slot names must be distinct (got {names})")
        usable = set(usable_cpus())
        for slot in slots:
            if not set(slot.cpus) <= usable:
                raise ExecutorError(
                    f"slot {slot.name!r} names CPUs {sorted(set(slot.cpus) - usable)} this process cannot use "
                    f"(usable: {sorted(usable)})"
                )
        if stall_after_s <= 0 or poll_s <= 0:
            raise ExecutorError(f"stall_after_s and poll_s must be > 0 (got {stall_after_s}, {poll_s})")
        self._slots = tuple(slots)
        self._stall_after_s = stall_after_s
        self._poll_s = poll_s
        self._python = python
        self._prefix = (
            list(command) if command else python_command("-m", "ade_core.cli", "engine", "run", python=python)
        )
        self._env = dict(env or {})
        self._free: asyncio.Queue[Slot] = asyncio.Queue()
        for slot in self._slots:
            self._free.put_nowait(slot)
        self._running: dict[str, _Running] = {}
        self._claimed: set[str] = set()
        self._queued: dict[str, datetime] = {}
        self._active: dict[str, dict[str, str]] = {}
        self._fenced: set[str] = set()
        self._busy: dict[str, list[tuple[float, float]]] = {slot.name: [] for slot in self._slots}
        self._closed = False

    # --- the Executor protocol ---------------------------------------------------------------
    async def run(self, request: AttemptRequest) -> AttemptOutcome:
        """Wait for a slot, run the attempt on it, and report a typed outcome."""
        attempt_id = request.job.attempt_id
        if attempt_id in self._claimed:
            raise ExecutorError(f"attempt {attempt_id!r} is already submitted; every attempt needs a fresh id")
        queued_at = _now()
        if attempt_id in self._fenced or self._closed:
            return self._refused(request, {}, queued_at)
        self._claimed.add(attempt_id)
        self._queued[attempt_id] = queued_at
        try:
            slot = await self._free.get()
        except BaseException:
            self._claimed.discard(attempt_id)
            raise
        began = time.monotonic()
        try:
            if attempt_id in self._fenced or self._closed:
                return self._refused(request, slot.resources(), queued_at)
            self._active[attempt_id] = slot.resources()
            return await self._run_on(slot, request)
        finally:
            self._claimed.discard(attempt_id)
            self._queued.pop(attempt_id, None)
            self._active.pop(attempt_id, None)
            self._busy[slot.name].append((began, time.monotonic()))
            self._free.put_nowait(slot)

    def fence(self, attempt_id: str) -> None:
        """Refuse the attempt's results from now on; kill its process group if it is running."""
        self._fenced.add(attempt_id)
        running = self._running.get(attempt_id)
        if running is not None and running.process.returncode is None:
            running.kill("fenced")

    async def close(self) -> None:
        """Kill every running attempt (outcome ``cancelled``); return once no attempt holds a slot."""
        self._closed = True
        for running in list(self._running.values()):
            running.kill("cancelled")
        while self._active:
            await asyncio.sleep(0.01)

    # --- observation -------------------------------------------------------------------------
    def busy_intervals(self) -> dict[str, list[tuple[float, float]]]:
        """Per slot, the (start, end) ``time.monotonic()`` spans it was held by an attempt."""
        return {name: list(spans) for name, spans in self._busy.items()}

    def active(self) -> dict[str, dict[str, str]]:
        """Attempts holding a slot now, with their physical assignment."""
        return {attempt: dict(resources) for attempt, resources in self._active.items()}

    # --- one attempt ---------------------------------------------------------------------------
    async def _run_on(self, slot: Slot, request: AttemptRequest) -> AttemptOutcome:
        job, directory = request.job, Path(request.attempt_dir)
        started_at = _now()
        directory.mkdir(parents=True, exist_ok=True)
        (directory / HEARTBEAT).unlink(missing_ok=True)  # a stale beat must not pass for liveness
        job_file = directory / JOB_FILE
        job_file.write_text(job.model_dump_json(), encoding="utf-8")
        argv = [*self._prefix, str(job_file), "--out", str(directory)]
        if slot.cpus and hasattr(os, "sched_setaffinity"):
            argv = [self._python, "-S", "-c", _PIN, ",".join(map(str, slot.cpus)), *argv]
        env = {**os.environ, **self._env, **slot.environment()}
        logs = {"stdout": str(directory / STDOUT_LOG), "stderr": str(directory / STDERR_LOG)}

        def outcome(
            failure: str | None, detail: str, package: Path | None = None, code: int | None = None
        ) -> AttemptOutcome:
            return self._outcome(request, slot.resources(), started_at, failure, detail, package, code, logs)

        with open(logs["stdout"], "wb") as stdout, open(logs["stderr"], "wb") as stderr:
            try:
                process = await asyncio.create_subprocess_exec(
                    *argv, stdin=asyncio.subprocess.DEVNULL, stdout=stdout, stderr=stderr, env=env,
                    start_new_session=True,
                )  # fmt: skip
            except OSError as exc:
                return outcome("engine_error", f"cannot start {argv[0]}: {exc}")
        running = self._running[job.attempt_id] = _Running(process)
        if self._closed or job.attempt_id in self._fenced:  # arrived while the process was starting
            running.kill("cancelled" if self._closed else "fenced")
        try:
            await self._watch(running, directory / HEARTBEAT, job.attempt_id)
        except asyncio.CancelledError:
            running.kill("cancelled")
            await asyncio.shield(process.wait())
            raise
        finally:
            self._running.pop(job.attempt_id, None)
            _kill_group(process.pid)  # stragglers of a finished leader must not outlive the slot
        code = process.returncode
        assert code is not None
        tail = _tail(Path(logs["stderr"]))
        ours = {
            "stalled": f"no heartbeat progress for {self._stall_after_s:g}s; process group killed",
            "cancelled": "the executor was closed; process group killed",
        }
        if running.killed_for in ours:
            return outcome(running.killed_for, f"{ours[running.killed_for]}\n{tail}".strip(), None, code)
        if code < 0:
            return outcome("killed", f"killed by {signal.Signals(-code).name}\n{tail}", None, code)
        if code in (exit_codes.USAGE, exit_codes.ENVIRONMENT):
            return outcome("engine_error", tail, None, code)
        if code != 0:
            return outcome("crashed", f"exit status {code}\n{tail}", None, code)
        package, problem = await asyncio.to_thread(_check_package, Path(logs["stdout"]), directory, job)
        if package is None:
            return outcome("bad_package", problem, None, code)
        return outcome(None, problem, package, code)

    async def _watch(self, running: _Running, beat_path: Path, attempt_id: str) -> None:
        """Wait for the process to end; kill its group when the heartbeat stops advancing."""
        waiter = asyncio.ensure_future(running.process.wait())
        last_beat: Any = None
        last_progress = time.monotonic()
        try:
            while not (await asyncio.wait({waiter}, timeout=self._poll_s))[0]:
                beat = _read_beat(beat_path, attempt_id)
                if beat is not None and beat != last_beat:
                    last_beat, last_progress = beat, time.monotonic()
                elif time.monotonic() - last_progress > self._stall_after_s and running.killed_for is None:
                    running.kill("stalled")
        finally:
            if not waiter.done():
                waiter.cancel()

    def _refused(self, request: AttemptRequest, resources: dict[str, str], at: datetime) -> AttemptOutcome:
        failure = "fenced" if request.job.attempt_id in self._fenced else "cancelled"
        return self._outcome(request, resources, at, failure, f"attempt {failure} before it started")

    def _outcome(
        self,
        request: AttemptRequest,
        resources: dict[str, str],
        started_at: datetime,
        failure: str | None,
        detail: str,
        package: Path | None = None,
        code: int | None = None,
        logs: dict[str, str] | None = None,
    ) -> AttemptOutcome:
        attempt_id = request.job.attempt_id
        if attempt_id in self._fenced:  # checked last: a fence that raced a finished attempt still wins
            failure, package = "fenced", None
            detail = f"attempt fenced; its results are refused\n{detail}"
        status: AttemptStatus
        if failure == "fenced":
            status = "fenced"
        else:
            status = "succeeded" if failure is None else "failed"
        return AttemptOutcome(
            attempt_id=attempt_id,
            status=status,
            package=package,
            failure=failure,
            retryable=failure in RETRYABLE_FAILURES,
            resources=resources,
            detail=detail,
            started_at=started_at,
            ended_at=_now(),
            exit_code=code,
            log_paths=logs or {},
            queued_at=self._queued.get(attempt_id, started_at),
        )


def kill_orphan(directory: Path, attempt_id: str) -> bool:
    """Kill the Engine process group a dead controller left running for ``attempt_id``; True if one was.

    Attempts run in their own session, so a SIGKILLed controller does not take its Engine with it.
    The heartbeat names the process; it is killed only while it is still that attempt's Engine
    (its command line names the attempt directory), so a recycled pid is left alone.
    """
    try:
        beat = json.loads((directory / HEARTBEAT).read_text(encoding="utf-8"))
        pid = int(beat["pid"])
        command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except (OSError, ValueError, KeyError, TypeError):
        return False
    if beat.get("attempt_id") != attempt_id or str(directory) not in command:
        return False
    _kill_group(pid)
    return True


def _read_beat(path: Path, attempt_id: str) -> tuple[Any, ...] | None:
    """The heartbeat's content, or None when absent, unreadable or another attempt's."""
    try:
        beat = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(beat, dict) or beat.get("attempt_id") != attempt_id:
        return None
    return (beat.get("time"), beat.get("phase"), json.dumps(beat.get("detail"), sort_keys=True))


def _tail(path: Path) -> str:
    try:
        data = path.read_bytes()[-_DETAIL_CHARS:]
    except OSError:
        return ""
    return data.decode("utf-8", errors="replace").strip()


def _check_package(stdout: Path, directory: Path, job: EngineJob) -> tuple[Path | None, str]:
    """The package the Engine printed, if it is sealed, inside the attempt dir and this attempt's own."""
    printed = None
    for line in reversed(_tail(stdout).splitlines()):
        try:
            printed = json.loads(line).get("package")
        except (ValueError, AttributeError):
            continue
        if printed:
            break
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
