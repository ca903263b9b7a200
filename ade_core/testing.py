"""Conformance kit that every task plugin's tests use (also a pytest plugin: fixture ``ade_registry``).

Usage in a plugin's tests::

    from ade_core.testing import TaskConformance

    class TestConformance(TaskConformance):
        task = "prompt_filter"

Each check runs against a fresh plugin registry. The reference strategy is executed in
ade-sandbox with every service answering
``{"status": "unavailable"}``, then its outputs go through the task's own validation.
Strategies run in ade-sandbox (at the best isolation level the machine reaches), never in
the test process.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import os
import signal
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from ade_core import hookspecs
from ade_core.harness.static_policy import check_strategy_source, defined_entry_points
from ade_core.plugins import COLLECTED_HOOKS, PluginRegistry, TaskHandle, load_plugins
from ade_core.specs import OutputValidation, StrategyInterface, TaskInputs
from ade_sandbox import Limits, Service, open_worker


class StrategyRunError(AssertionError):
    """A strategy did not return a result in the sandbox."""


# A command's time limit in a test detects a hang; it is not a speed target. The limit is this many times the
# command's duration on an idle 2-core machine: a suite on every core, next to another job, stays far inside it.
HANG_FACTOR = 10
HANG_FLOOR_S = 120.0


class CommandHung(AssertionError):
    """A command a test ran was still running long after it should have finished."""


def hang_limit(idle_s: float) -> float:
    """The seconds after which a command that takes ``idle_s`` on an idle machine is taken for hung."""
    return max(HANG_FACTOR * idle_s, HANG_FLOOR_S)


def run_command(
    argv: Sequence[str],
    *,
    idle_s: float,
    cwd: str | Path | None = None,
    env: Mapping[str, str] | None = None,
    input: str | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` to completion for a test and return what it printed (text), whatever its exit status.

    ``idle_s`` is how long the command takes on an idle 2-core machine. After ``hang_limit(idle_s)`` it is
    taken for hung: its process group is killed (the command and every child that did not start a session
    of its own), and ``CommandHung`` names the command, how long it ran against its idle time and the last
    lines it printed.
    """
    limit = hang_limit(idle_s)
    process = subprocess.Popen(
        list(argv),
        cwd=cwd,
        env=dict(env) if env is not None else None,
        stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # a process group of its own: a hang is stopped with its children
    )
    try:
        stdout, stderr = process.communicate(input, timeout=limit)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        try:
            stdout, stderr = process.communicate(timeout=30)
        except subprocess.TimeoutExpired:  # a process outside the group still holds the pipes
            stdout, stderr = "", ""
        shown = " ".join(str(part) for part in argv)
        tail = "\n".join((stderr or stdout or "").splitlines()[-20:])
        raise CommandHung(
            f"`{shown}` was still running after {limit:.0f} s ({HANG_FACTOR} x its {idle_s:.0f} s on an idle "
            f"2-core machine) and was killed with its process group; the last lines it printed:\n{tail}"
        ) from None
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


def _unavailable(requests: Any) -> Any:
    if isinstance(requests, list):
        return [{"status": "unavailable"} for _ in requests]
    return {"status": "unavailable"}


def run_strategy_calls(
    source: str, interface: StrategyInterface, inputs: TaskInputs, timeout: float = 60
) -> list[dict[str, Any]]:
    """Run each call of ``inputs`` against ``source`` in one ade-sandbox worker.

    Every service parameter is attached and answers ``{"status": "unavailable"}``. Returns one
    ``{"ok": True, "value": ...}`` or ``{"ok": False, "error": ...}`` per call; a call of an
    optional entry point the source does not define gets ``{"ok": True, "skipped": True}``.
    """
    absent = {e.name for e in interface.entry_points if not e.required} - defined_entry_points(source, interface)
    services = [
        Service(name, _unavailable, max_calls=1000, max_items_per_call=100_000, signature=interface.signature(name))
        for name in interface.services
    ]
    results: list[dict[str, Any]] = []
    with open_worker(source, services=services, limits=Limits(wall_s=timeout, cpu_s=timeout)) as worker:
        for call in inputs.calls:
            if call.entry_point in absent:
                results.append({"ok": True, "skipped": True})
                continue
            result = worker.call(call.entry_point, call.arguments)
            if result.status == "ok":
                results.append({"ok": True, "value": result.value})
            else:
                results.append({"ok": False, "error": f"{result.status}: {result.error}"})
    return results


def validate_reference(handle: TaskHandle) -> list[OutputValidation]:
    """Run the task's reference on its development inputs and validate every output."""
    interface = handle.interface()
    reference = handle.reference_strategy()
    inputs = handle.builder_dev_inputs(None)
    verdicts = []
    for call, result in zip(inputs.calls, run_strategy_calls(reference.source, interface, inputs), strict=True):
        if not result["ok"]:
            raise StrategyRunError(f"reference raised on {call.entry_point}: {result['error']}")
        if result.get("skipped"):
            continue
        verdicts.append(handle.validate_output(call.entry_point, result["value"], call.arguments))
    return verdicts


@pytest.fixture
def ade_registry() -> PluginRegistry:
    """A fresh plugin registry loaded from the installed entry points."""
    return load_plugins()


class TaskConformance:
    """Checks every task plugin must pass; subclass and set ``task``."""

    task: str = ""

    @pytest.fixture
    def handle(self, ade_registry: PluginRegistry) -> TaskHandle:
        assert self.task, "set the `task` class attribute to the task name under test"
        return ade_registry.task(self.task)

    def test_plugin_loaded_cleanly(self, handle: TaskHandle) -> None:
        assert handle.owner.status == "loaded", handle.owner.error

    def test_required_hooks_implemented(self, handle: TaskHandle) -> None:
        missing = handle.missing_hooks()
        assert not missing, f"task {self.task!r} does not implement {', '.join(missing)}: no Run of it can start"

    def test_intervention_kind_registered(self, handle: TaskHandle) -> None:
        kinds = [kind.name for kind in handle.intervention_kinds()]
        assert kinds, (
            f"no installed plugin registers an intervention kind the {handle.spec.paradigm} task {self.task!r} "
            "may bind to: implement ade_intervention_kinds, or the Engine cannot run its interventions"
        )

    def test_interface_well_formed(self, handle: TaskHandle) -> None:
        interface = handle.interface()
        assert interface.task == self.task
        inputs = handle.builder_dev_inputs(None)
        for call in inputs.calls:
            entry = interface.entry_point(call.entry_point)
            data_params = {p.name for p in entry.parameters if p.json_type != "service"}
            assert set(call.arguments) == data_params, (
                f"development inputs for {call.entry_point} give {sorted(call.arguments)}, "
                f"interface declares {sorted(data_params)}"
            )
            json.dumps(call.arguments, allow_nan=False)  # inputs cross the boundary as strict JSON

    def test_metric_order_defined(self, handle: TaskHandle) -> None:
        metrics = handle.metrics()
        assert list(metrics)[: len(handle.spec.metric_order)] == list(handle.spec.metric_order)
        for name in handle.spec.metric_order:
            assert metrics[name].compute([[True, False], [False, False]]) >= 0.0

    def test_reference_strategy_admissible(self, handle: TaskHandle) -> None:
        violations = check_strategy_source(handle.reference_strategy().source, handle.interface())
        assert violations == [], [str(v) for v in violations]

    def test_reference_strategy_passes_validation(self, handle: TaskHandle) -> None:
        verdicts = validate_reference(handle)
        assert verdicts and all(v.ok for v in verdicts), [v.errors for v in verdicts if not v.ok]

    def test_strategy_catalog_admissible(self, handle: TaskHandle) -> None:
        interface = handle.interface()
        for family in handle.strategy_catalog():
            first = {key: values[0] for key, values in family.parameters.items()}
            violations = check_strategy_source(family.render(**first), interface)
            assert violations == [], (family.name, [str(v) for v in violations])

    def test_collecting_hooks_well_typed(self, handle: TaskHandle, ade_registry: PluginRegistry) -> None:
        for hook in COLLECTED_HOOKS:
            kwargs = {"task": self.task}
            if hook == "ade_prompt_additions":
                kwargs["role"] = "builder"
            ade_registry.collect(hook, **kwargs)  # raises PluginError on a wrong type

    def test_hooks_documented(self, handle: TaskHandle) -> None:
        for hook in handle.owner.hooks:
            spec = getattr(hookspecs, hook, None)
            assert spec is not None, f"{hook} is not an ADE hook"
            doc = inspect.getdoc(spec) or ""
            assert "@hookimpl" in doc, f"hookspec {hook} lacks an @hookimpl example"
