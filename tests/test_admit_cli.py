"""`ade admit` for a task without frozen inputs: a typed error naming the missing hook."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from ade_core.cli import main
from ade_core.plugins import load_plugins

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def test_a_task_lacking_a_needed_hook_gets_a_typed_error_naming_it(tmp_path):
    task = load_plugins().task("curriculum")
    assert not task.has("ade_task_inputs")
    strategy = tmp_path / "reference.py"
    strategy.write_text(task.reference_strategy().source)
    result = CliRunner().invoke(main, ["admit", str(EXAMPLES / "tiny-curriculum.toml"), str(strategy)])
    assert result.exit_code == 2, result.output
    assert "MissingHookError" in result.output and "ade_task_inputs" in result.output
