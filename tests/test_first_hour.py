"""What a new user meets in the first hour, run as they would: the real `ade` in a subprocess, in a fresh
directory, asserting the exit code, the words of the message, no traceback, and nothing written where
nothing may be. (The `ade trial` comparison with Base runs in tests/e2e/test_tiny_run.py.)"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ade_core.exit_codes import ENVIRONMENT, FAILED, USAGE
from ade_core.harness.standalone import comparison_key, engine_code_digest
from ade_core.testing import run_command

REPO = Path(__file__).resolve().parents[1]
CONFIG = str(REPO / "examples" / "tiny-data-selection-ci.toml")
ADE = str(Path(sys.executable).with_name("ade"))

RAISES = """
async def select_trajectories(candidate_inventory, select_size, judge):
    chosen = []
    first = candidate_inventory[0]
    chosen.append(first["no_such_field"])
    return chosen
"""


def ade(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    import os

    return run_command([ADE, *args], idle_s=15, cwd=cwd, env={**os.environ, **(env or {})})


def clean(proc: subprocess.CompletedProcess[str], code: int, *words: str) -> str:
    """The combined output, after checking the exit code, the words and that no traceback leaked."""
    out = proc.stdout + proc.stderr
    assert proc.returncode == code, out[-3000:]
    assert "Traceback (most recent call last)" not in out, out[-3000:]
    for word in words:
        assert word in out, (word, out[-3000:])
    return out


def test_a_strategy_error_shows_its_own_file_line_and_code(tmp_path):
    strategy = tmp_path / "mine.py"
    strategy.write_text(RAISES)
    out = clean(ade("admit", CONFIG, str(strategy), cwd=tmp_path), FAILED, "KeyError: 'no_such_field'")
    assert f'File "{strategy}", line 5, in select_trajectories' in out
    assert 'chosen.append(first["no_such_field"])' in out
    assert "ade_sandbox" not in out and "bootstrap" not in out  # never the sandbox's own frames
    as_json = json.loads(ade("admit", CONFIG, str(strategy), "--json", cwd=tmp_path).stdout)
    (failed,) = [c for c in as_json["admission"]["checks"] if c["status"] == "failed"]
    assert "line 5, in select_trajectories" in failed["traceback"]


@pytest.mark.parametrize("command", ["admit", "trial", "sandbox"])
def test_a_strategy_that_is_not_utf8_is_a_typed_error_naming_the_byte(tmp_path, command):
    strategy = tmp_path / "latin1.py"
    strategy.write_bytes(b"def main():\n    return '\xe9t\xe9'\n")
    args = ["sandbox", "run", str(strategy), "--entrypoint", "main"] if command == "sandbox" else [command, CONFIG]
    if command != "sandbox":
        args.append(str(strategy))
    out = clean(ade(*args, cwd=tmp_path), FAILED if command != "sandbox" else USAGE, "not UTF-8", "byte 24 (line 2)")
    assert "UnicodeDecodeError" not in out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["latin1.py"]  # no trial directory, nothing else


def test_sandbox_limits_are_whole_sentences_configurable_and_shown(tmp_path):
    flood = tmp_path / "flood.py"
    flood.write_text("import time\ndef main():\n    time.sleep(6)\n    print('x' * 200000, flush=True)\n    return 1\n")
    proc = ade("sandbox", "run", str(flood), "--entrypoint", "main", "--limit", "max_output_bytes=1000", cwd=tmp_path)
    out = clean(proc, FAILED, "status: output_limit", "stdout or stderr exceeded the cap of 1000 bytes each")
    assert "running: 5 s elapsed (limit 60 s)" in out  # a silent strategy shows progress
    bad = ade("sandbox", "run", str(flood), "--entrypoint", "main", "--limit", "walltime=3", cwd=tmp_path)
    clean(bad, USAGE, "--limit 'walltime=3'", "wall_s")
    ok = tmp_path / "ok.py"
    ok.write_text("async def select_trajectories(candidate_inventory, select_size, judge):\n    return []\n")
    shown = ade("admit", CONFIG, str(ok), "--set", "sandbox.limits.memory_mb=512", cwd=tmp_path)
    clean(shown, FAILED, "strategy limits: 120 s per call on the development inputs", "512 MB memory")
    help_text = clean(ade("sandbox", "--help", cwd=tmp_path), 0, "Commands:", "doctor", "run")
    assert help_text.startswith("Usage: ade sandbox [OPTIONS] COMMAND [ARGS]...")


def test_a_paper_config_without_its_local_files_fails_early_naming_them(tmp_path):
    strategy = tmp_path / "s.py"
    strategy.write_text("async def select_trajectories(candidate_inventory, select_size, judge):\n    return []\n")
    paper = str(REPO / "examples" / "paper-data-selection-math.toml")
    for args in (("config", "validate", paper), ("admit", paper, str(strategy)), ("trial", paper, str(strategy))):
        out = clean(ade(*args, cwd=tmp_path), ENVIRONMENT, "[model].target", "models/target-base", "--schema-only")
        assert "PluginError" not in out and "Repo id" not in out
    clean(ade("config", "validate", paper, "--schema-only", cwd=tmp_path), 0, "valid:", "checked schema")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.py"]


def test_presets_are_listed_and_taken_wherever_a_config_is(tmp_path):
    listing = clean(ade("presets", cwd=tmp_path), 0, "tiny-data-selection", "paper-reward-design-math")
    names = {row["name"]: row for row in json.loads(ade("presets", "--json", cwd=tmp_path).stdout)}
    assert {"tiny-data-selection", "tiny-curriculum", "tiny-reward-design", "paper-curriculum-math"} <= set(names)
    assert names["tiny-curriculum"]["task"] == "curriculum" and "presets" in listing
    shown = json.loads(ade("config", "show", "tiny-data-selection-ci", "--format", "json", cwd=tmp_path).stdout)
    by_path = json.loads(ade("config", "show", CONFIG, "--format", "json", cwd=tmp_path).stdout)
    assert shown["digest"] == by_path["digest"]
    clean(
        ade("config", "validate", "tiny-data-selection-code", cwd=tmp_path),
        0,
        "checked schema, local paths and generation backends",
    )
    assert list(tmp_path.iterdir()) == []


def test_a_misplaced_override_is_named_with_the_key_it_meant(tmp_path):
    proc = ade("config", "validate", CONFIG, "--set", "select_size=5", cwd=tmp_path)
    out = clean(proc, USAGE, "--set 'select_size=5'", "is not a config key", "did you mean 'data.select_size'")
    assert "tiny-data-selection" not in out.split("did you mean")[0]  # the override is to blame, not the file
    misspelt = ade("config", "validate", CONFIG, "--set", "budget.plans_per_coordinatr=2", cwd=tmp_path)
    clean(misspelt, USAGE, "'budget.plans_per_coordinatr' is not a config key", "budget.plans_per_coordinator")


def test_new_task_refuses_a_name_that_shadows_an_installed_task(tmp_path):
    clean(ade("new-task", "data_selection", "--dir", str(tmp_path), cwd=tmp_path), USAGE, "already registered")
    clean(ade("new-task", "data-selection", "--dir", str(tmp_path), cwd=tmp_path), USAGE, "already registered")
    assert list(tmp_path.iterdir()) == []


def test_third_party_warnings_never_reach_the_terminal(tmp_path):
    script = (
        "import warnings, sys\n"
        "from ade_core.quiet import quiet_libraries\n"
        "quiet_libraries()\n"
        "import types\n"
        "lib = types.ModuleType('transformers.training_args')\n"
        "exec(\"import warnings\\ndef go():\\n    warnings.warn('old', FutureWarning)\", lib.__dict__)\n"
        "lib.go()\n"
        "warnings.warn_explicit('ours', UserWarning, 'x.py', 1, module='ade_core.x')\n"
    )
    proc = run_command([sys.executable, "-c", script], idle_s=10, cwd=tmp_path)
    assert "old" not in proc.stderr and "ours" in proc.stderr


def test_the_comparison_key_follows_the_engine_code_and_the_versions(tmp_path):
    engine = tmp_path / "engine"
    engine.mkdir()
    (engine / "attempt.py").write_text("STEPS = 1\n")
    before = engine_code_digest(engine)
    (engine / "attempt.py").write_text("STEPS = 2\n")
    assert engine_code_digest(engine) != before
    assert comparison_key("sha256:a", "0.1.0") != comparison_key("sha256:a", "0.2.0")
    assert comparison_key("sha256:a", "0.1.0") != comparison_key("sha256:b", "0.1.0")
    assert comparison_key("sha256:a", "0.1.0") == comparison_key("sha256:a", "0.1.0")


def test_a_strategy_failing_only_on_the_frozen_inputs_exits_1_and_keeps_its_passed_checks(tmp_path):
    strategy = tmp_path / "big.py"
    strategy.write_text(
        "async def select_trajectories(candidate_inventory, select_size, judge):\n"
        "    if len(candidate_inventory) > 1000:\n"
        "        raise ValueError(f'cannot handle {len(candidate_inventory)} groups')\n"
        "    return [r['trajectory_ids'][0] for r in candidate_inventory[:select_size]]\n"
    )
    out = clean(ade("admit", CONFIG, str(strategy), cwd=tmp_path), FAILED, "realization on the frozen inputs FAILED")
    assert "passed  static_check" in out and "passed  sandbox_run" in out and "passed  output_validation" in out
    assert "ValueError: cannot handle 2000 groups" in out and f'File "{strategy}", line 3' in out
