"""The steps of the end-to-end Runs on the tiny world: the ``ade`` CLI, status, and a kill mid-training."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CONFIG = REPO / "examples" / "tiny-data-selection-ci.toml"
ADE = str(Path(sys.executable).with_name("ade"))
KILL_IN = "C1/P1/T1"  # SIGKILL once this search Trial is training


def ade(*args: str, timeout: float = 900, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([ADE, *args], capture_output=True, text=True, check=False, timeout=timeout, cwd=REPO, env=env)


def status(run_dir: Path) -> dict:
    proc = ade("status", str(run_dir), "--json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def start_and_kill_mid_training(run_dir: Path, *options: str) -> list[dict]:
    """Start `ade run` with JSON progress (and ``options``); SIGKILL its process group once KILL_IN reports
    a training step."""
    proc = subprocess.Popen(
        [ADE, "run", str(CONFIG), "--run-dir", str(run_dir), "--progress", "json", *options],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group: the Engine subprocess dies with it
    )
    events: list[dict] = []
    deadline = time.monotonic() + 600
    try:
        assert proc.stderr is not None
        for line in proc.stderr:
            if not line.startswith("{"):
                continue
            events.append(json.loads(line))
            trial = events[-1].get("trial") or {}
            if trial.get("trial_id") == KILL_IN and trial.get("stage") == "train":
                break
            assert time.monotonic() < deadline, "the run never reached training of the first search Trial"
        else:
            pytest.fail(f"`ade run` ended before {KILL_IN} trained (exit {proc.wait()}); events: {events[-3:]}")
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    return events


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
