"""Whether a controller is driving a run right now: it holds a lock on ``<run_dir>/controller.lock``.

The store alone cannot tell a Run in progress from one whose controller was interrupted (Ctrl-C,
SIGTERM, a killed machine): both stand at a non-final phase with the operator's ledger saying
"running". The kernel releases an ``flock`` when its holder dies however it dies, so a lock that
nobody holds means nobody is driving the run, and ``ade status`` can say "interrupted".
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ade_core.errors import StoreBusyError

LOCK_FILE = "controller.lock"
_ACQUIRE_S = 2.0  # a reader (`ade status`) holds the lock shared for microseconds; wait it out


@contextmanager
def controlling(run_dir: Path | str) -> Iterator[None]:
    """Hold the run's controller lock while the body drives it; refuse when another process holds it."""
    path = Path(run_dir) / LOCK_FILE
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)  # not inherited by Engine subprocesses (PEP 446)
    try:
        deadline = time.monotonic() + _ACQUIRE_S
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    holder = path.read_text(encoding="utf-8").strip() or "unknown"
                    raise StoreBusyError(
                        f"another process (pid {holder}) is driving the run in {run_dir}; one controller owns a "
                        "run — wait for it, or stop it and `ade resume` this run"
                    ) from None
                time.sleep(0.05)
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        yield
    finally:
        os.close(fd)  # releases the lock


def controller_running(run_dir: Path | str) -> bool:
    """Whether some process holds the run's controller lock now (reads only; creates nothing)."""
    try:
        fd = os.open(Path(run_dir) / LOCK_FILE, os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False
