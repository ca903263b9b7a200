"""The `ade` command as a user runs it: real subprocesses, typed one-line errors, no traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from ade_core.schemas import EXPORTED
from ade_core.testing import run_command

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"

ADE = [str(Path(sys.executable).with_name("ade"))]


def ade(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return run_command([*ADE, *args], idle_s=10, cwd=cwd)


def assert_clean_error(proc: subprocess.CompletedProcess[str], pattern: str) -> None:
    assert proc.returncode == 2, proc
    assert "Traceback" not in proc.stderr
    assert pattern in proc.stderr, proc.stderr


def test_version():
    proc = ade("--version")
    assert proc.returncode == 0 and "0.1.0" in proc.stdout


def test_plugins_json_lists_the_three_tasks():
    proc = ade("plugins", "--json")
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)["plugins"]
    by_task = {task: row for row in rows for task in row["tasks"]}
    assert {"data_selection", "reward_design", "curriculum"} <= set(by_task)
    ds = by_task["data_selection"]
    assert ds["distribution"] == "ade-task-data-selection" and ds["status"] == "loaded"
    assert "ade_strategy_interface" in ds["hooks"] and ds["version"] == "0.1.0"


def test_plugins_table():
    proc = ade("plugins")
    assert proc.returncode == 0
    assert proc.stdout.splitlines()[0].split() == ["TASK", "DISTRIBUTION", "VERSION", "STATUS", "HOOKS"]
    assert any(line.startswith("curriculum") for line in proc.stdout.splitlines())


def test_config_show_prints_digest_and_round_trips(tmp_path):
    proc = ade("config", "show", str(EXAMPLES / "tiny-data-selection.toml"), "--set", "budget.coordinators=3")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("# digest: sha256:")
    assert "# --set budget.coordinators=3" in proc.stdout and "coordinators = 3" in proc.stdout
    # the printed TOML is itself a valid config with the same digest
    shown = tmp_path / "shown.toml"
    shown.write_text(proc.stdout)
    again = ade("config", "show", str(shown))
    assert again.stdout.splitlines()[0] == proc.stdout.splitlines()[0]


def test_config_show_json_has_explicit_nulls():
    proc = ade("config", "show", str(EXAMPLES / "tiny-data-selection.toml"), "--format", "json")
    data = json.loads(proc.stdout)
    assert data["config"]["evaluation"]["decoding"]["reasoning_reserve_tokens"] is None
    assert data["config"]["operational"]["agents"]["backend"] == "offline"


def test_config_validate():
    proc = ade("config", "validate", str(EXAMPLES / "paper-curriculum-math.toml"), "--schema-only")
    assert proc.returncode == 0 and proc.stdout.startswith("valid: ")


def test_bad_config_is_one_clean_line(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text(f'extends = "{EXAMPLES / "tiny-data-selection.toml"}"\n[budget]\nplans_per_coordinatr = 2\n')
    assert_clean_error(ade("config", "validate", str(bad)), "did you mean 'plans_per_coordinator'")
    assert_clean_error(ade("config", "show", str(tmp_path / "missing.toml")), "ConfigError: config file not found")
    assert_clean_error(
        ade("config", "show", str(EXAMPLES / "tiny-data-selection.toml"), "--set", "task=curiculum"),
        "UnknownTaskError: unknown task 'curiculum' (did you mean 'curriculum'?)",
    )


def test_schema_export(tmp_path):
    listing = ade("schema")
    assert "plan" in listing.stdout.split() and "experiment-config" in listing.stdout.split()
    plan = json.loads(ade("schema", "plan").stdout)
    assert plan["title"] == "Plan" and "rejection_conditions" in plan["properties"]
    out = ade("schema", "--out", str(tmp_path / "schemas"))
    assert out.returncode == 0 and len(list((tmp_path / "schemas").glob("*.json"))) == len(EXPORTED)
    assert_clean_error(ade("schema", "plann"), "UnknownSchemaError: unknown schema 'plann' (did you mean 'plan'?)")


def test_failed_plugin_shows_as_failed(install_fake_plugin, tmp_path, monkeypatch):
    install_fake_plugin("ade-task-broken", "ade_task_broken", "raise ImportError('missing native lib')\n")
    site = next(p for p in sys.path if p.endswith("site"))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, (site, os.environ.get("PYTHONPATH")))))
    proc = ade("plugins", "--json")
    assert proc.returncode == 0
    (row,) = [r for r in json.loads(proc.stdout)["plugins"] if r["distribution"] == "ade-task-broken"]
    assert row["status"] == "failed" and "missing native lib" in row["error"]
    table = ade("plugins")
    assert "! ade-task-broken" in table.stderr and "missing native lib" in table.stderr


def test_duplicate_task_fails_ade_plugins(install_fake_plugin, monkeypatch):
    source = (
        "from ade_core import TaskSpec, hookimpl\n@hookimpl\ndef ade_register_tasks():\n"
        "    return [TaskSpec(name='curriculum', title='C', description='d', paradigm='rft',"
        " metric_order=('average_at_k',))]\n"
    )
    install_fake_plugin("ade-task-curriculum-fork", "ade_task_curriculum_fork", source, version="9.9")
    site = next(p for p in sys.path if p.endswith("site"))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, (site, os.environ.get("PYTHONPATH")))))
    proc = ade("plugins")
    assert proc.returncode == 2  # as `ade config validate` below: the installation needs fixing
    assert "conflict" in proc.stdout
    validate = ade("config", "validate", str(EXAMPLES / "paper-curriculum-math.toml"), "--schema-only")
    assert_clean_error(validate, "DuplicateTaskError: task 'curriculum' is registered by both")
    assert "ade-task-curriculum 0.1.0" in validate.stderr and "ade-task-curriculum-fork 9.9" in validate.stderr
