"""The local executor: Engine requests as subprocesses on this machine's cores and GPUs.

Each request waits (asyncio, first come first served) until the cores, GPUs, memory and custom
resources it declares are free and the resource policy lets it start, then runs ``ade <command>``
in its own process group pinned to the granted cores (CPU affinity, matching OpenMP/MKL and torch
thread counts) and GPUs (CUDA_VISIBLE_DEVICES). Liveness comes from the Engine's
``heartbeat.json``: a heartbeat that stops advancing for the request's lease means a wedged
process, and the whole group is killed. A fenced request (the Harness gave up on it) is killed and
its results are refused even if it finished, so a late package can never enter the run.

How an exit becomes a failure: the ``ade`` CLI prints a typed ``AdeError`` (EngineError,
ConfigError, ...) as one line and exits 2 (3 for a model or data file missing on this machine); those
are properties of the frozen command and its machine, and re-running it would fail the same way, so
exits 2 and 3 are ``engine_error``, not retryable. Any other nonzero exit (an unhandled exception:
out of memory, a CUDA fault) is ``crashed``; death by a signal we did not send (the OOM killer, an
operator) is ``killed``; both are retryable. Processes that leave the group on purpose (sandboxed
graders start their own session) are bounded by their own wall-clock limits, not by this executor.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
from collections.abc import Mapping, Sequence
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
    DIR_PLACEHOLDER,
    JOB_PLACEHOLDER,
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
from ade_core.executors.interpreter import python_command
from ade_core.executors.slots import Slot, cpu_list, usable_cpus, visible_gpus

JOB_FILE = "job.json"
PROCESS_FILE = "process.json"  # pid of a running request's process group: what recover() kills
STDOUT_LOG = "engine.stdout.log"
STDERR_LOG = "engine.stderr.log"
RESOURCES_ENV = "ADE_EXECUTOR_RESOURCES"  # what the request holds, as JSON: the Engine records it
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


@dataclass
class _Waiting:
    """A request queued for resources: what it needs and when it arrived."""

    request: EngineRequest
    need: Resources
    queued_at: datetime
    queued: float


class LocalExecutor:
    """Runs requests as subprocesses on this machine's cores and GPUs, first come first served.

    ``share`` is what a request that declares nothing gets (the per-attempt share of the
    configuration's [resources]); ``max_running`` caps concurrent requests. ``program`` replaces the
    ``ade`` invocation (a list prefix to which the request's command is appended); tests use it to run
    a stand-in Engine. One executor serves one event loop.
    """

    kind = "local"

    def __init__(
        self,
        cpus: Sequence[int] | None = None,
        gpus: Sequence[str] | None = None,
        *,
        share: Resources | None = None,
        max_running: int | None = None,
        memory_gb: float | None = None,
        custom: Mapping[str, float] | None = None,
        poll_s: float = 1.0,
        python: str = sys.executable,
        program: Sequence[str] | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        usable = usable_cpus()
        self._cpus = sorted(cpus) if cpus is not None else usable
        if not self._cpus:
            raise ExecutorError("the local executor needs at least one CPU core; check the process affinity")
        if not set(self._cpus) <= set(usable):
            raise ExecutorError(
                f"the local executor was given CPUs {sorted(set(self._cpus) - set(usable))} this process cannot use "
                f"(usable: {cpu_list(usable)})"
            )
        self._gpus = list(gpus) if gpus is not None else visible_gpus()
        self._share = share or Resources(cpus=len(self._cpus), gpus=0)
        if max_running is not None and max_running < 1:
            raise ExecutorError(f"max_running must be >= 1 (got {max_running})")
        if poll_s <= 0:
            raise ExecutorError(f"poll_s must be > 0 (got {poll_s})")
        self._max_running = max_running
        self._memory_gb = memory_gb if memory_gb is not None else machine_memory_gb()
        self._custom = dict(custom or {})
        self._poll_s = poll_s
        self._python = python
        self._program = list(program) if program else python_command("-m", "ade_core.cli", python=python)
        self._env = dict(env or {})
        self._free_cpus = set(self._cpus)
        self._free_gpus = list(self._gpus)
        self._memory_used = 0.0
        self._custom_used: dict[str, float] = {}
        self._waiting: list[_Waiting] = []
        self._changed = asyncio.Event()
        self._running: dict[str, _Running] = {}
        self._holding: dict[str, tuple[EngineRequest, Slot, Resources]] = {}
        self._submitted: dict[str, Submission] = {}
        self._finished: dict[str, AttemptOutcome] = {}
        self._fenced: set[str] = set()
        self._cancelled: set[str] = set()
        self._spans: list[Span] = []
        self._closed = False

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
            beat = _read_json(request.directory / HEARTBEAT)
            return RequestState(request_id, "running", request.kind, self._recorded(slot, need), beat)
        for waiting in self._waiting:
            if waiting.request.request_id == request_id:
                return RequestState(request_id, "queued", waiting.request.kind)
        if request_id in self._finished:
            outcome = self._finished[request_id]
            return RequestState(request_id, "done", outcome.kind, dict(outcome.resources))
        return RequestState(request_id, "unknown")

    def fence(self, request_id: str) -> None:
        """Refuse the request's results from now on; kill its process group if it is running."""
        self._fenced.add(request_id)
        self._stop(request_id, "fenced")

    def cancel(self, request_id: str) -> None:
        """Stop one queued or running request; its outcome says ``cancelled``."""
        if request_id in self._finished:
            return
        self._cancelled.add(request_id)
        self._stop(request_id, "cancelled")

    def recover(self, request_id: str, directory: Path) -> bool:
        """Kill the process group a dead controller left running for ``request_id``; True if one was.

        Requests run in their own session, so a SIGKILLed controller does not take its Engine with
        it. ``process.json`` names the process; it is killed only while it is still that request's
        (its command line names the request directory), so a recycled pid is left alone.
        """
        return kill_orphan(Path(directory), request_id)

    def timeline(self) -> list[Span]:
        return list(self._spans)

    async def close(self) -> None:
        """Kill every running request (outcome ``cancelled``); return once none holds resources."""
        self._closed = True
        self._changed.set()
        for running in list(self._running.values()):
            running.kill("cancelled")
        while self._holding:
            await asyncio.sleep(0.01)

    # --- observation -------------------------------------------------------------------------
    @property
    def max_running(self) -> int | None:
        """The cap on concurrent requests (None: only resources bound them)."""
        return self._max_running

    def active(self) -> dict[str, dict[str, str]]:
        """Requests holding resources now, with their physical assignment."""
        return {rid: self._recorded(slot, need) for rid, (_, slot, need) in self._holding.items()}

    def resolve(self, declared: Resources) -> Resources:
        """``declared`` with the per-attempt share filled in; refused when this machine can never grant it."""
        cpus = declared.cpus or self._share.cpus or len(self._cpus)
        gpus = declared.gpus if declared.gpus is not None else (self._share.gpus or 0)
        need = Resources(
            cpus=cpus,
            threads=declared.threads or self._share.threads or cpus,
            gpus=gpus,
            memory_gb=declared.memory_gb,
            custom=dict(declared.custom),
        )
        problems = []
        if cpus > len(self._cpus):
            problems.append(f"{cpus} CPU cores (this executor has {len(self._cpus)})")
        if gpus > len(self._gpus):
            problems.append(f"{gpus} GPUs (this executor has {len(self._gpus)}: {self._gpus})")
        if need.memory_gb is not None and need.memory_gb > self._memory_gb:
            problems.append(f"{need.memory_gb:g} GB of memory (this machine has {self._memory_gb:.1f})")
        for name, amount in need.custom.items():
            if amount > self._custom.get(name, 0.0):
                problems.append(
                    f"{amount:g} of custom resource {name!r} (this executor has {self._custom.get(name, 0.0):g})"
                )
        if problems:
            raise ExecutorError(
                "the local executor can never grant " + "; ".join(problems) + ": lower the request (the config's "
                "[resources]) or declare the capacity ([operational.executor] custom, CUDA_VISIBLE_DEVICES)"
            )
        return need

    # --- scheduling ----------------------------------------------------------------------------
    def _admissible(self, waiting: _Waiting) -> bool:
        """Whether the head of the queue may start now: its resources are free and the policy allows it."""
        need = waiting.need
        if self._max_running is not None and len(self._holding) >= self._max_running:
            return False
        if any(held.in_loop != waiting.request.in_loop for held, _, _ in self._holding.values()):
            return False  # an operator held-out evaluation never overlaps in-loop work
        if len(self._free_cpus) < (need.cpus or 0) or len(self._free_gpus) < (need.gpus or 0):
            return False
        if need.memory_gb is not None and self._memory_used + need.memory_gb > self._memory_gb:
            return False
        return all(self._custom_used.get(k, 0.0) + v <= self._custom[k] for k, v in need.custom.items())

    def _grant(self, waiting: _Waiting) -> Slot:
        need = waiting.need
        cpus = tuple(sorted(self._free_cpus)[: need.cpus])
        gpus = tuple(self._free_gpus[: need.gpus])
        self._free_cpus -= set(cpus)
        del self._free_gpus[: need.gpus]
        self._memory_used += need.memory_gb or 0.0
        for name, amount in need.custom.items():
            self._custom_used[name] = self._custom_used.get(name, 0.0) + amount
        name = ("gpu" + ",".join(gpus)) if gpus else ("cpu" + cpu_list(cpus))
        return Slot(name, cpus=cpus, gpus=gpus)

    def _release(self, slot: Slot, need: Resources) -> None:
        self._free_cpus |= set(slot.cpus)
        self._free_gpus = [g for g in self._gpus if g in set(self._free_gpus) | set(slot.gpus)]
        self._memory_used -= need.memory_gb or 0.0
        for name, amount in need.custom.items():
            self._custom_used[name] -= amount
        self._changed.set()

    async def _acquire(self, waiting: _Waiting) -> Slot | None:
        """Wait until ``waiting`` is first in line and admissible; None when it was stopped while queued."""
        self._waiting.append(waiting)
        rid = waiting.request.request_id
        try:
            while True:
                if self._closed or rid in self._fenced or rid in self._cancelled:
                    return None
                if self._waiting[0] is waiting and self._admissible(waiting):
                    return self._grant(waiting)
                self._changed.clear()
                await self._changed.wait()
        finally:
            self._waiting.remove(waiting)
            self._changed.set()  # the next in line may start now

    def _stop(self, request_id: str, reason: str) -> None:
        running = self._running.get(request_id)
        if running is not None and running.process.returncode is None:
            running.kill(reason)
        self._changed.set()

    @staticmethod
    def _recorded(slot: Slot, need: Resources) -> dict[str, str]:
        found = {"executor": "local", **slot.resources(), "threads": str(need.threads)}
        if need.memory_gb is not None:
            found["memory_gb"] = f"{need.memory_gb:g}"
        for name, amount in sorted(need.custom.items()):
            found[f"custom.{name}"] = f"{amount:g}"
        return found

    # --- one request ---------------------------------------------------------------------------
    async def _execute(self, request: EngineRequest, need: Resources) -> AttemptOutcome:
        rid = request.request_id
        waiting = _Waiting(request, need, _now(), time.monotonic())
        try:
            slot = await self._acquire(waiting)
            if slot is None:
                outcome = self._refused(request, {}, waiting.queued_at)
            else:
                self._holding[rid] = (request, slot, need)
                began = time.monotonic()
                try:
                    outcome = await self._run_on(slot, need, request, waiting.queued_at)
                finally:
                    del self._holding[rid]
                    self._release(slot, need)
                    self._spans.append(Span(rid, request.kind, slot.name, waiting.queued, began, time.monotonic()))
        finally:
            self._submitted.pop(rid, None)
        self._finished[rid] = outcome
        return outcome

    async def _run_on(self, slot: Slot, need: Resources, request: EngineRequest, queued_at: datetime) -> AttemptOutcome:
        rid, directory = request.request_id, Path(request.directory)
        started_at = _now()
        directory.mkdir(parents=True, exist_ok=True)
        (directory / HEARTBEAT).unlink(missing_ok=True)  # a stale beat must not pass for liveness
        job_file = directory / JOB_FILE
        job_file.write_text(request.job.model_dump_json(), encoding="utf-8")
        filled = {JOB_PLACEHOLDER: str(job_file), DIR_PLACEHOLDER: str(directory)}
        argv = [*self._program, *(filled.get(part, part) for part in request.command)]
        if slot.cpus and hasattr(os, "sched_setaffinity"):
            argv = [self._python, "-S", "-c", _PIN, ",".join(map(str, slot.cpus)), *argv]
        recorded = self._recorded(slot, need)
        env = {
            **os.environ,
            **self._env,
            **slot.environment(threads=need.threads),
            RESOURCES_ENV: json.dumps(recorded, sort_keys=True),
        }
        logs = {"stdout": str(directory / STDOUT_LOG), "stderr": str(directory / STDERR_LOG)}

        def outcome(
            failure: str | None,
            detail: str,
            package: Path | None = None,
            code: int | None = None,
            result: dict[str, Any] | None = None,
        ) -> AttemptOutcome:
            return self._outcome(request, recorded, started_at, failure, detail, package, code, logs, queued_at, result)

        with open(logs["stdout"], "wb") as stdout, open(logs["stderr"], "wb") as stderr:
            try:
                process = await asyncio.create_subprocess_exec(
                    *argv, stdin=asyncio.subprocess.DEVNULL, stdout=stdout, stderr=stderr, env=env,
                    start_new_session=True,
                )  # fmt: skip
            except OSError as exc:
                return outcome("engine_error", f"cannot start {argv[0]}: {exc}")
        (directory / PROCESS_FILE).write_text(json.dumps({"request_id": rid, "pid": process.pid}), encoding="utf-8")
        running = self._running[rid] = _Running(process)
        if self._closed or rid in self._fenced or rid in self._cancelled:  # stopped while the process was starting
            running.kill("fenced" if rid in self._fenced else "cancelled")
        try:
            await self._watch(running, directory / HEARTBEAT, rid, request.lease.stall_after_s)
        except asyncio.CancelledError:
            running.kill("cancelled")
            await asyncio.shield(process.wait())
            raise
        finally:
            self._running.pop(rid, None)
            _kill_group(process.pid)  # stragglers of a finished leader must not outlive the slot
            (directory / PROCESS_FILE).unlink(missing_ok=True)
        code = process.returncode
        assert code is not None
        tail = _tail(Path(logs["stderr"]))
        ours = {
            "stalled": f"no heartbeat progress for {request.lease.stall_after_s}s; process group killed",
            "cancelled": "cancelled; process group killed",
        }
        if running.killed_for in ours:
            return outcome(running.killed_for, f"{ours[running.killed_for]}\n{tail}".strip(), None, code)
        if code < 0:
            return outcome("killed", f"killed by {signal.Signals(-code).name}\n{tail}", None, code)
        if code in (exit_codes.USAGE, exit_codes.ENVIRONMENT):
            return outcome("engine_error", tail, None, code)
        if code != 0:
            return outcome("crashed", f"exit status {code}\n{tail}", None, code)
        if request.kind in PACKAGE_KINDS:
            assert isinstance(request.job, EngineJob)
            package, problem = await asyncio.to_thread(_check_package, Path(logs["stdout"]), directory, request.job)
            if package is None:
                return outcome("bad_package", problem, None, code)
            return outcome(None, problem, package, code)
        result = _last_json(Path(logs["stdout"]))
        if result is None:
            return outcome(
                "bad_package", f"`ade {request.command[0]} {request.command[1]}` printed no result", None, code
            )
        return outcome(None, f"{request.kind} result", None, code, result)

    async def _watch(self, running: _Running, beat_path: Path, request_id: str, stall_after_s: float | None) -> None:
        """Wait for the process to end; kill its group when the heartbeat stops advancing."""
        waiter = asyncio.ensure_future(running.process.wait())
        last_beat: Any = None
        last_progress = time.monotonic()
        try:
            while not (await asyncio.wait({waiter}, timeout=self._poll_s))[0]:
                if stall_after_s is None:
                    continue
                beat = _read_beat(beat_path, request_id)
                if beat is not None and beat != last_beat:
                    last_beat, last_progress = beat, time.monotonic()
                elif time.monotonic() - last_progress > stall_after_s and running.killed_for is None:
                    running.kill("stalled")
        finally:
            if not waiter.done():
                waiter.cancel()

    def _refused(self, request: EngineRequest, resources: dict[str, str], at: datetime) -> AttemptOutcome:
        rid = request.request_id
        failure = "fenced" if rid in self._fenced else "cancelled"
        return self._outcome(
            request, resources, at, failure, f"{request.kind} {failure} before it started", queued_at=at
        )

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
            ended_at=_now(),
            exit_code=code,
            log_paths=logs or {},
            queued_at=queued_at or started_at,
            kind=request.kind,
            result=result,
        )


def machine_memory_gb() -> float:
    """This machine's memory (``/proc/meminfo``; infinite where the OS does not say)."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) / 1024**2
    except (OSError, ValueError, IndexError):
        pass
    return float("inf")


def kill_orphan(directory: Path, request_id: str) -> bool:
    """Kill the process group a dead controller left running for ``request_id`` in ``directory``.

    ``process.json`` (or, for an Engine attempt, its heartbeat) names the process; it is killed only
    while its command line names the request directory, so a recycled pid is left alone.
    """
    for name in (PROCESS_FILE, HEARTBEAT):
        found = _read_json(directory / name)
        if not found or found.get("request_id", found.get("attempt_id")) != request_id:
            continue
        try:
            pid = int(found["pid"])
            command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if str(directory) in command:
            _kill_group(pid)
            return True
    return False


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        found = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return found if isinstance(found, dict) else None


def _last_json(stdout: Path) -> dict[str, Any] | None:
    """The last line of ``stdout`` that is a JSON object."""
    for line in reversed(_tail(stdout).splitlines()):
        try:
            found = json.loads(line)
        except ValueError:
            continue
        if isinstance(found, dict):
            return found
    return None


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
