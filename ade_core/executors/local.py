"""The local executor: Engine requests as subprocesses on this machine's cores and GPUs.

Each request waits (asyncio, first come first served, under the resource policy of
``executors.queued``) until the cores, GPUs, memory and custom resources it declares are free, then
runs ``ade <command>`` in its own process group pinned to the granted cores (CPU affinity, matching
OpenMP/MKL and torch thread counts) and GPUs (CUDA_VISIBLE_DEVICES). Liveness comes from the
Engine's ``heartbeat.json``: a heartbeat that stops advancing for the request's lease means a
wedged process, and the whole group is killed. A fenced request (the Harness gave up on it) is
killed and its results are refused even if it finished, so a late package can never enter the run.
Processes that leave the group on purpose (sandboxed graders start their own session) are bounded
by their own wall-clock limits, not by this executor.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from ade_core.engine.attempt import HEARTBEAT
from ade_core.engine.threads import RESOURCES_ENV
from ade_core.errors import ExecutorError
from ade_core.executors.base import DIR_PLACEHOLDER, JOB_PLACEHOLDER, AttemptOutcome, EngineRequest, Resources
from ade_core.executors.interpreter import python_command
from ade_core.executors.queued import STDERR_LOG, STDOUT_LOG, QueuedExecutor, now, read_beat, read_json
from ade_core.executors.slots import Slot, cpu_list, usable_cpus, visible_gpus

JOB_FILE = "job.json"
PROCESS_FILE = "process.json"  # pid of a running request's process group: what recover() kills
# Sets the CPU affinity, then becomes the real command: thread-safe, unlike preexec_fn in a
# controller that runs threads (SQLite, asyncio.to_thread).
_PIN = (
    "import os, sys; os.sched_setaffinity(0, [int(c) for c in sys.argv[1].split(',')]); "
    "os.execvp(sys.argv[2], sys.argv[2:])"
)


class _Running:
    """A started request: its process and why we killed it, if we did."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.killed_for: str | None = None

    def kill(self, reason: str) -> None:
        self.killed_for = self.killed_for or reason
        kill_group(self.process.pid)


def kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass  # already gone


class LocalExecutor(QueuedExecutor):
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
        super().__init__(max_running=max_running, poll_s=poll_s)
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
        self._memory_gb = memory_gb if memory_gb is not None else machine_memory_gb()
        self._custom = dict(custom or {})
        self._python = python
        self._program = list(program) if program else python_command("-m", "ade_core.cli", python=python)
        self._env = dict(env or {})
        self._free_cpus = set(self._cpus)
        self._free_gpus = list(self._gpus)
        self._memory_used = 0.0
        self._custom_used: dict[str, float] = {}
        self._running: dict[str, _Running] = {}

    def recover(self, request_id: str, directory: Path) -> bool:
        """Kill the process group a dead controller left running for ``request_id``; True if one was.

        Requests run in their own session, so a SIGKILLed controller does not take its Engine with
        it. ``process.json`` names the process; it is killed only while it is still that request's
        (its command line names the request directory), so a recycled pid is left alone.
        """
        return kill_orphan(Path(directory), request_id)

    # --- resources -----------------------------------------------------------------------------
    def resolve(self, declared: Resources) -> Resources:
        """``declared`` with the per-attempt share filled in; refused when this machine can never grant it."""
        need = fill_share(declared, self._share, len(self._cpus))
        problems = []
        if (need.cpus or 0) > len(self._cpus):
            problems.append(f"{need.cpus} CPU cores (this executor has {len(self._cpus)})")
        if (need.gpus or 0) > len(self._gpus):
            problems.append(f"{need.gpus} GPUs (this executor has {len(self._gpus)}: {self._gpus})")
        if need.memory_gb is not None and need.memory_gb > self._memory_gb:
            problems.append(f"{need.memory_gb:g} GB of memory (this machine has {self._memory_gb:.1f})")
        for name, amount in need.custom.items():
            have = self._custom.get(name, 0.0)
            if amount > have:
                problems.append(f"{amount:g} of custom resource {name!r} (this executor has {have:g})")
        if problems:
            raise ExecutorError(
                "the local executor can never grant " + "; ".join(problems) + ": lower the request (the config's "
                "[resources]) or declare the capacity ([operational.executor] custom, CUDA_VISIBLE_DEVICES)"
            )
        return need

    def _fits(self, need: Resources) -> bool:
        if len(self._free_cpus) < (need.cpus or 0) or len(self._free_gpus) < (need.gpus or 0):
            return False
        if need.memory_gb is not None and self._memory_used + need.memory_gb > self._memory_gb:
            return False
        return all(self._custom_used.get(k, 0.0) + v <= self._custom[k] for k, v in need.custom.items())

    def _room(self, need: Resources) -> int:
        counts = [int(self._custom.get(name, 0.0) // amount) for name, amount in need.custom.items()]
        if need.cpus:
            counts.append(len(self._cpus) // need.cpus)
        if need.gpus:
            counts.append(len(self._gpus) // need.gpus)
        if need.memory_gb:
            counts.append(int(self._memory_gb // need.memory_gb))
        return min(counts, default=1)

    def _grant(self, need: Resources) -> Slot:
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

    def _recorded(self, slot: Slot, need: Resources) -> dict[str, str]:
        return {"executor": "local", **slot.resources(), **declared(need)}

    def _stop(self, request_id: str, reason: str) -> None:
        running = self._running.get(request_id)
        if running is not None and running.process.returncode is None:
            running.kill(reason)

    # --- one request ---------------------------------------------------------------------------
    async def _run_on(self, slot: Slot, need: Resources, request: EngineRequest, queued_at: datetime) -> AttemptOutcome:
        rid, directory = request.request_id, Path(request.directory)
        started_at = now()
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
        with open(directory / STDOUT_LOG, "wb") as stdout, open(directory / STDERR_LOG, "wb") as stderr:
            try:
                process = await asyncio.create_subprocess_exec(
                    *argv, stdin=asyncio.subprocess.DEVNULL, stdout=stdout, stderr=stderr, env=env,
                    start_new_session=True,
                )  # fmt: skip
            except OSError as exc:
                return self._outcome(request, recorded, started_at, "engine_error", f"cannot start {argv[0]}: {exc}")
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
            kill_group(process.pid)  # stragglers of a finished leader must not outlive the slot
            (directory / PROCESS_FILE).unlink(missing_ok=True)
        code = process.returncode
        assert code is not None
        ours = {
            "stalled": f"no heartbeat progress for {request.lease.stall_after_s}s; process group killed",
            "cancelled": "cancelled; process group killed",
        }
        return await asyncio.to_thread(
            self._judged, request, recorded, started_at, queued_at, code, running.killed_for, ours
        )

    async def _watch(self, running: _Running, beat_path: Path, request_id: str, stall_after_s: float | None) -> None:
        """Wait for the process to end; kill its group when the heartbeat stops advancing."""
        waiter = asyncio.ensure_future(running.process.wait())
        last_beat: Any = None
        last_progress = time.monotonic()
        try:
            while not (await asyncio.wait({waiter}, timeout=self._poll_s))[0]:
                if stall_after_s is None:
                    continue
                beat = read_beat(beat_path, request_id)
                if beat is not None and beat != last_beat:
                    last_beat, last_progress = beat, time.monotonic()
                elif time.monotonic() - last_progress > stall_after_s and running.killed_for is None:
                    running.kill("stalled")
        finally:
            if not waiter.done():
                waiter.cancel()


def fill_share(asked: Resources, share: Resources, all_cpus: int) -> Resources:
    """``asked`` with what it leaves unset taken from ``share`` (threads default to one per CPU)."""
    cpus = asked.cpus or share.cpus or all_cpus
    return Resources(
        cpus=cpus,
        threads=asked.threads or share.threads or cpus,
        gpus=asked.gpus if asked.gpus is not None else (share.gpus or 0),
        memory_gb=asked.memory_gb,
        custom=dict(asked.custom),
    )


def declared(need: Resources) -> dict[str, str]:
    """The declared threads, memory and custom resources of a grant, as recorded."""
    found = {"threads": str(need.threads)}
    if need.memory_gb is not None:
        found["memory_gb"] = f"{need.memory_gb:g}"
    for name, amount in sorted(need.custom.items()):
        found[f"custom.{name}"] = f"{amount:g}"
    return found


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
        found = read_json(directory / name)
        if not found or found.get("request_id", found.get("attempt_id")) != request_id:
            continue
        try:
            pid = int(found["pid"])
        except (ValueError, KeyError, TypeError):
            continue
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:  # the leader is gone; its group may live on (no new process can take a live group's id)
            return _kill_remaining(pid)
        if not command.strip():  # a leader that exited and awaits reaping (a zombie has no command line)
            return _kill_remaining(pid)
        if str(directory) in command:
            kill_group(pid)
            return True
    return False


def _kill_remaining(pgid: int) -> bool:
    """Kill what is left of process group ``pgid`` whose leader has exited; True if a live member was."""
    if not _live_members(pgid):
        return False
    kill_group(pgid)
    return True


def _live_members(pgid: int) -> list[int]:
    """Processes of group ``pgid`` that still run (zombies excluded), from ``/proc``."""
    members = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if len(fields) > 2 and fields[0] != "Z" and fields[2] == str(pgid):
            members.append(int(stat.parent.name))
    return members
