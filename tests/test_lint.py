"""The code base stays formatted and lint-clean (ruff, configured in pyproject.toml)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RUFF = str(Path(sys.executable).with_name("ruff"))


def test_ruff_check():
    proc = subprocess.run([RUFF, "check", "--no-cache", "."], cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_ruff_format():
    proc = subprocess.run([RUFF, "format", "--check", "--no-cache", "."], cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 0, "run: .venv/bin/ruff format .\n" + proc.stdout
