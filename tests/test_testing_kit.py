"""The test kit's command runner: a time limit that detects a hang, and a failure that says what was running."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from ade_core import testing
from ade_core.testing import CommandHung, hang_limit, run_command

HANGS = """
import subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
open(sys.argv[1], "w").write(str(child.pid))
print("training step 3 of 52", flush=True)
print("waiting on a lock nobody releases", file=sys.stderr, flush=True)
time.sleep(600)
"""


def test_the_limit_is_a_generous_multiple_of_the_idle_time():
    assert hang_limit(150) == 10 * 150
    assert hang_limit(2) == testing.HANG_FLOOR_S  # a start-up on a loaded machine is never a hang


def test_a_finished_command_returns_its_output_and_exit_status(tmp_path):
    done = run_command([sys.executable, "-c", "import sys; print('out'); sys.exit(3)"], idle_s=1, cwd=tmp_path)
    assert (done.returncode, done.stdout, done.stderr) == (3, "out\n", "")
    echoed = run_command([sys.executable, "-c", "print(input()[::-1])"], idle_s=1, input="abc\n")
    assert echoed.stdout == "cba\n"


def test_a_hung_command_is_killed_with_its_children_and_named(tmp_path, monkeypatch):
    monkeypatch.setattr(testing, "HANG_FACTOR", 2)
    monkeypatch.setattr(testing, "HANG_FLOOR_S", 1.0)
    pid_file = tmp_path / "child.pid"
    started = time.monotonic()
    with pytest.raises(CommandHung) as hung:
        run_command([sys.executable, "-c", HANGS, str(pid_file)], idle_s=1)
    assert time.monotonic() - started < 30
    said = str(hung.value)
    assert "was still running after 2 s (2 x its 1 s on an idle 2-core machine)" in said
    assert HANGS.strip().splitlines()[0] in said  # the command itself
    assert "waiting on a lock nobody releases" in said  # the last lines it printed
    child = int(pid_file.read_text())
    deadline = time.monotonic() + 10
    while _running(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _running(child), "the hung command's child outlived it"


def _running(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z" and os.path.exists(f"/proc/{pid}")
