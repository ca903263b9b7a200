"""`ade admit` for a task without frozen inputs: a typed error naming the missing hook."""

from __future__ import annotations

import os
from pathlib import Path

from click.testing import CliRunner

from ade_core.cli import main
from ade_core.executors.interpreter import SAFE_PATH_ENV
from ade_core.plugins import load_plugins

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"

# A task plugin with every hook admission needs but no ade_task_inputs: it can be admitted, never realized.
PARTIAL = """
from ade_core import (EntryPoint, Intervention, OutputValidation, PackageSchema, Parameter, ReferenceStrategy,
                      StrategyCall, StrategyInterface, TaskInputs, TaskSpec, hookimpl)


@hookimpl
def ade_register_tasks():
    return [TaskSpec(name="partial", title="P", description="d", paradigm="rft", metric_order=("average_at_k",))]


@hookimpl
def ade_strategy_interface(task):
    if task == "partial":
        point = EntryPoint(name="pick", is_async=False, returns="a list",
                           parameters=(Parameter(name="n", json_type="integer", description="n"),))
        return StrategyInterface(task="partial", entry_points=(point,), allowed_imports=())


@hookimpl
def ade_builder_dev_inputs(task):
    if task == "partial":
        return TaskInputs(calls=(StrategyCall(entry_point="pick", arguments={"n": 2}),), description="two")


@hookimpl
def ade_validate_output(task, output):
    if task == "partial":
        return OutputValidation(ok=True, canonical=output)


@hookimpl
def ade_bind(task, canonical_outputs):
    if task == "partial":
        return Intervention(kind="schedule", payload={"batches": []}, summary="none")


@hookimpl
def ade_package_schema(task):
    if task == "partial":
        return PackageSchema(task="partial", records=())


@hookimpl
def ade_reference_strategy(task):
    if task == "partial":
        return ReferenceStrategy(source="def pick(n):\\n    return list(range(n))\\n", account="the first n")
"""


def test_a_task_lacking_a_needed_hook_gets_a_typed_error_naming_it(tmp_path, install_fake_plugin):
    install_fake_plugin("ade-task-partial", "ade_task_partial", PARTIAL)
    task = load_plugins().task("partial")
    assert not task.has("ade_task_inputs")
    strategy = tmp_path / "reference.py"
    strategy.write_text(task.reference_strategy().source)
    config = tmp_path / "partial.toml"
    base = EXAMPLES / "base" / "tiny-rft.toml"
    config.write_text(f'extends = "{base}"\ntask = "partial"\nname = "partial"\n')
    # In-process, the CLI's PYTHONSAFEPATH (set for the Pythons it starts) must not outlive the call.
    runner = CliRunner(env={SAFE_PATH_ENV: os.environ.get(SAFE_PATH_ENV)})
    result = runner.invoke(main, ["admit", str(config), str(strategy)])
    assert result.exit_code == 2, result.output
    assert "MissingHookError" in result.output and "ade_task_inputs" in result.output
