"""The import path of every Python process ADE starts: the installation, never the working directory.

``python -m`` and ``python -c`` put the working directory first on ``sys.path``, and
multiprocessing starts its fork server and spawned workers with ``-c``. A researcher's
``random.py`` (or ``json.py``, ``signal.py``) beside a config would then shadow the standard
library in the Engine and in its grading workers, and every evaluation would fail. So ADE starts
its interpreters with ``-P`` (Python 3.11's safe path), and a process that starts other Pythons
sets ``PYTHONSAFEPATH`` so that its children, and theirs, never import from the working directory.
Strategy code is not affected: the sandbox starts it with ``python -I`` in a scratch directory.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager

SAFE_PATH_ENV = "PYTHONSAFEPATH"


def python_command(*args: str, python: str = sys.executable) -> list[str]:
    """``[python, "-P", *args]``: an interpreter whose import path leaves out the working directory."""
    return [python, "-P", *args]


def _is_working_dir(entry: str) -> bool:
    try:
        return os.path.samefile(entry or os.curdir, os.curdir)
    except OSError:
        return False


def isolate_import_path() -> None:
    """Keep the working directory off this process's import path and that of every Python it starts.

    Drops the entry ``python -m``/``-c`` put first on ``sys.path`` when it is the working directory
    (a console script's first entry is its own directory, which stays), and sets
    ``PYTHONSAFEPATH`` for child interpreters. Entries the user put on ``PYTHONPATH`` stay.
    """
    os.environ[SAFE_PATH_ENV] = "1"
    if not sys.flags.safe_path and sys.path and _is_working_dir(sys.path[0]):
        del sys.path[0]


@contextmanager
def safe_path_children() -> Iterator[None]:
    """Within the block, interpreters this process starts leave the working directory off their path."""
    saved = os.environ.get(SAFE_PATH_ENV)
    os.environ[SAFE_PATH_ENV] = "1"
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop(SAFE_PATH_ENV, None)
        else:
            os.environ[SAFE_PATH_ENV] = saved
