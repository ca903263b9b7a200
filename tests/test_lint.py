"""The code base stays formatted, lint-clean (ruff) and type-clean (mypy), as configured in pyproject.toml."""

from __future__ import annotations

import re
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


def test_mypy():
    """mypy over ade_core, the sandbox and the task plugins ([tool.mypy] in pyproject.toml) finds no error."""
    proc = subprocess.run([sys.executable, "-m", "mypy"], cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


IGNORE = re.compile(r"#\s*type:\s*ignore\b")
EXPLAINED_IGNORE = re.compile(r"# type: ignore\[[a-z0-9_-]+(, ?[a-z0-9_-]+)*\]  # \S")


def test_type_ignores_name_a_code_and_a_reason():
    """Every ``# type: ignore`` names its error code(s) and ends in ``  # why it is needed``."""
    bare = [
        f"{path.relative_to(REPO)}:{number}: {line.strip()}"
        for top in ("ade_core", "sandbox", "plugins")
        for path in sorted((REPO / top).rglob("*.py"))
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if IGNORE.search(line) and not EXPLAINED_IGNORE.search(line)
    ]
    assert not bare, "write `# type: ignore[code]  # reason`:\n" + "\n".join(bare)
