"""The steps of the end-to-end Runs on the tiny world: the ``ade`` CLI, status, and a kill mid-training."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from ade_core.testing import hang_limit, run_command

REPO = Path(__file__).resolve().parents[2]
CONFIG = REPO / "examples" / "tiny-data-selection-ci.toml"
ADE = str(Path(sys.executable).with_name("ade"))
KILL_IN = "C1/P1/T1"  # SIGKILL once this search Trial is training


# How long each step takes on an idle 2-core machine (the hang detector allows ade_core.testing.HANG_FACTOR x).
RUN_TO_TRAINING_S = 60  # `ade run` of the CI preset until its first search Trial trains
RESUME_S = 150  # `ade resume` of the killed Run to completion
QUICK_S = 10  # status, admit, fork


def ade(*args: str, idle_s: float = QUICK_S, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return run_command([ADE, *args], idle_s=idle_s, cwd=REPO, env=env)


def status(run_dir: Path) -> dict:
    proc = ade("status", str(run_dir), "--json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def start_and_kill_mid_training(
    run_dir: Path, *options: str, resume: bool = False, kill_in: str = KILL_IN
) -> list[dict]:
    """Start `ade run` of the CI preset into ``run_dir`` (or, with ``resume``, `ade resume` of the run there)
    with JSON progress and ``options``; SIGKILL its process group once Trial ``kill_in`` reports a training
    step."""
    command = ["resume", str(run_dir)] if resume else ["run", str(CONFIG), "--run-dir", str(run_dir)]
    proc = subprocess.Popen(
        [ADE, *command, "--progress", "json", *options],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group: the Engine subprocess dies with it
    )
    events: list[dict] = []
    limit = hang_limit(RUN_TO_TRAINING_S)
    deadline = time.monotonic() + limit
    try:
        assert proc.stderr is not None
        for line in _lines_until(proc.stderr, deadline):
            if not line.startswith("{"):
                continue
            events.append(json.loads(line))
            trial = events[-1].get("trial") or {}
            if trial.get("trial_id") == kill_in and trial.get("stage") == "train":
                break
        else:
            if time.monotonic() >= deadline:
                pytest.fail(
                    f"`ade {command[0]}` had not started training {kill_in} after {limit:.0f} s (about "
                    f"{RUN_TO_TRAINING_S} s on an idle machine): hung? its last progress events: {events[-3:]}"
                )
            pytest.fail(
                f"`ade {command[0]}` ended before {kill_in} trained (exit {proc.wait()}); events: {events[-3:]}"
            )
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    return events


def _lines_until(stream, deadline: float):
    """The lines of ``stream`` as they come, until it ends or ``deadline`` (``time.monotonic()``) passes (a
    reader thread keeps a silent, hung command from blocking the test)."""
    lines: queue.Queue[str | None] = queue.Queue()

    def read() -> None:
        for line in stream:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=read, daemon=True).start()
    while (left := deadline - time.monotonic()) > 0:
        try:
            line = lines.get(timeout=left)
        except queue.Empty:
            return
        if line is None:
            return
        yield line


def engine_pid(run_dir: Path, attempt: str) -> int:
    """The pid of the Engine that wrote ``attempt``'s heartbeat."""
    beat = run_dir / "attempts" / attempt / "heartbeat.json"
    return int(json.loads(beat.read_text(encoding="utf-8"))["pid"])


def still_running(pid: int, run_dir: Path) -> bool:
    """Whether ``pid`` is alive and still a process of ``run_dir`` (not a recycled pid)."""
    try:
        return str(run_dir) in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return False


def revision_before(run_dir: Path, subject: str) -> int:
    """The last revision of ``run_dir`` before anything about ``subject`` (a Plan, e.g. "C1/P1") was committed."""
    from ade_core.store import RunStore

    with RunStore.open(run_dir) as store:
        return min(e.revision for e in store.events() if e.subject.startswith(subject)) - 1
