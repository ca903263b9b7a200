"""What a Ray task runs on a worker node: one Engine request as a subprocess, in the request's directory.

The Ray executor ships this function by reference (the worker imports ``ade_core`` from its own
installation). It writes the job where the Engine reads it, starts ``python -P -m ade_core.cli
<command>`` in its own process group, names that group in ``process.json`` (host and pid, for a
recovering controller on the same host), and kills the whole group when the task is cancelled —
Ray delivers a cancellation as ``KeyboardInterrupt`` — or when the command ends, so no Engine
process outlives its task; a worker killed outright takes its Engine with it (parent-death
signal). It returns the exit code, when the command started and ended (the executor's timeline records
the worker's own times, not when the driver noticed) and, for a sealed package, the manifest's digest,
which the driver checks against the package it opens from the shared directory.
"""

from __future__ import annotations

import hashlib
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from ade_core.executors.base import DIR_PLACEHOLDER, JOB_PLACEHOLDER
from ade_core.executors.interpreter import python_command

# On Linux the Engine gets SIGKILL when its worker dies (parent-death signal, kept across exec), so a worker
# killed outright (OOM killer, a lost driver) does not leave its Engine training on. util-linux's setpriv
# sets it without starting a Python (12 ms less per request); this trampoline does it where setpriv is missing.
_SETPRIV = shutil.which("setpriv")
_DIE_WITH_WORKER = (
    "import ctypes, os, signal, sys; ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL); "
    "os.execvp(sys.argv[1], sys.argv[1:])"
)
JOB_FILE = "job.json"
PROCESS_FILE = "process.json"
STDOUT_LOG = "engine.stdout.log"
STDERR_LOG = "engine.stderr.log"


def run_request(
    request_id: str,
    command: list[str],
    job_json: str,
    directory: str,
    env: dict[str, str],
    program: list[str] | None = None,
) -> dict[str, Any]:
    """Run ``ade <command>`` for ``request_id`` in ``directory``; its exit code, node and package digest.

    ``program`` replaces the ``ade`` invocation (tests run a stand-in Engine)."""
    import ray

    began = time.time()  # the slot is this request's from here: the timeline's start
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    job_file = out / JOB_FILE
    job_file.write_text(job_json, encoding="utf-8")
    filled = {JOB_PLACEHOLDER: str(job_file), DIR_PLACEHOLDER: str(out)}
    prefix = program or python_command("-m", "ade_core.cli", python=sys.executable)
    argv = [*prefix, *(filled.get(part, part) for part in command)]
    if sys.platform.startswith("linux"):
        trampoline = [_SETPRIV, "--pdeathsig", "KILL"] if _SETPRIV else [sys.executable, "-S", "-c", _DIE_WITH_WORKER]
        argv = [*trampoline, *argv]
    with open(out / STDOUT_LOG, "wb") as stdout, open(out / STDERR_LOG, "wb") as stderr:
        process = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=stdout,
            stderr=stderr,
            env={**os.environ, **env},
            start_new_session=True,
        )
    marker = {"request_id": request_id, "pid": process.pid, "host": socket.gethostname(), "worker": os.getpid()}
    (out / PROCESS_FILE).write_text(json.dumps(marker), encoding="utf-8")
    try:
        code = _wait(process)
    except BaseException:  # cancelled (KeyboardInterrupt) or the worker is shutting down: take the Engine along
        _kill_group(process.pid)
        process.wait()
        raise
    finally:
        _kill_group(process.pid)  # stragglers of a finished leader must not outlive the task
        (out / PROCESS_FILE).unlink(missing_ok=True)
    return {
        "exit_code": code,
        "began": began,  # wall-clock seconds: when the task began and ended on the worker
        "ended": time.time(),
        "node": ray.get_runtime_context().get_node_id(),
        "host": socket.gethostname(),
        "placement_group": _placement_group(),
        "package_digest": package_digest(out / STDOUT_LOG),
    }


def _wait(process: subprocess.Popen[bytes]) -> int:
    """The exit code as soon as the command ends, waited for in short steps: Ray raises a cancellation's
    KeyboardInterrupt between bytecodes, which a single blocking wait would not reach until the Engine
    ended. On Linux a pidfd wakes the wait the moment the process exits (no polling delay holds the
    task's resources); elsewhere ``Popen.wait`` polls."""
    try:
        pidfd = os.pidfd_open(process.pid)
    except (AttributeError, OSError):  # not Linux >= 5.3
        pidfd = None
    try:
        while True:
            if pidfd is not None:
                select.select([pidfd], [], [], 0.2)
            try:
                return process.wait(timeout=0 if pidfd is not None else 0.2)
            except subprocess.TimeoutExpired:
                continue
    finally:
        if pidfd is not None:
            os.close(pidfd)


def package_digest(stdout: Path) -> str | None:
    """sha256 of the manifest of the package the command printed last (None when it printed none)."""
    try:
        lines = stdout.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    for line in reversed(lines):
        try:
            printed = json.loads(line).get("package")
        except (ValueError, AttributeError):
            continue
        if printed:
            return manifest_digest(Path(printed))
    return None


def manifest_digest(package: Path) -> str | None:
    """sha256 of a sealed package's ``manifest.json`` (which lists every file's sha256); None if unreadable."""
    try:
        return "sha256:" + hashlib.sha256((package / "manifest.json").read_bytes()).hexdigest()
    except OSError:
        return None


def _placement_group() -> str | None:
    import ray

    group = ray.get_runtime_context().get_placement_group_id()
    return str(group) if group else None


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
