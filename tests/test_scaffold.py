"""`ade new-task`: the generated package installs into a fresh venv, registers, and passes its tests."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ade_core.errors import ScaffoldError
from ade_core.scaffold import render_task_package

REPO = Path(__file__).resolve().parents[1]
ADE = str(Path(sys.executable).with_name("ade"))


def run(cmd: list[str], **kwargs) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False, **kwargs)
    assert proc.returncode == 0, f"{cmd} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc


def test_round_trip_in_a_temporary_venv(tmp_path):
    created = run([ADE, "new-task", "prompt-filter", "--dir", str(tmp_path)])
    package = tmp_path / "ade-task-prompt-filter"
    assert f"created {package}" in created.stdout
    assert (package / "src" / "ade_task_prompt_filter" / "plugin.py").is_file()

    venv = tmp_path / "venv"
    run([sys.executable, "-m", "venv", str(venv)])
    python = venv / "bin" / "python"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    run(
        [str(python), "-m", "pip", "install", "--quiet", str(REPO / "sandbox"), str(REPO), str(package), "pytest"],
        env=env,
    )

    listing = json.loads(run([str(venv / "bin" / "ade"), "plugins", "--json"], env=env).stdout)["plugins"]
    (row,) = [r for r in listing if r["tasks"] == ["prompt_filter"]]
    assert row["distribution"] == "ade-task-prompt-filter" and row["status"] == "loaded"
    assert {r["distribution"] for r in listing} == {"ade-core", "ade-task-prompt-filter"}
    sandbox = run([str(venv / "bin" / "ade-sandbox"), "doctor", "--json"], env=env)
    assert json.loads(sandbox.stdout)["best_level"] in ("process", "process+lsm", "namespaces", "strict")

    tests = run([str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", str(package)], env=env, cwd=package)
    assert " passed" in tests.stdout and "failed" not in tests.stdout


def test_generated_plugin_module_holds_only_hookimpls(tmp_path):
    package = render_task_package("prompt_filter", tmp_path)
    source = (package / "src" / "ade_task_prompt_filter" / "plugin.py").read_text()
    functions = [line for line in source.splitlines() if line.startswith("def ")]
    assert functions and source.count("@hookimpl") == len(functions)
    from ade_core.hookspecs import REQUIRED_TASK_HOOKS

    for hook in REQUIRED_TASK_HOOKS:
        assert f"def {hook}(" in source, hook


def test_bad_names_and_existing_targets_leave_nothing_behind(tmp_path):
    with pytest.raises(ScaffoldError, match="invalid task name 'Prompt Filter'"):
        render_task_package("Prompt Filter", tmp_path)
    render_task_package("keep", tmp_path)
    with pytest.raises(ScaffoldError, match="already exists"):
        render_task_package("keep", tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ade-task-keep"]
    proc = subprocess.run([ADE, "new-task", "9lives", "--dir", str(tmp_path)], capture_output=True, text=True)
    assert proc.returncode == 2 and proc.stderr.startswith("ScaffoldError: invalid task name '9lives'")
    assert "Traceback" not in proc.stderr
