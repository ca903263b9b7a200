"""What a Run needs before it starts, checked before anything is written.

A Run that starts without a capability it needs fails later, half-written, with a traceback from
deep inside the controller (an offline Builder with no strategy catalog to render from, a task
without frozen inputs, a sandbox below the configured floor). ``init_run`` calls ``check_run``
first, so each of these is one typed error and no run directory appears.
"""

from __future__ import annotations

from ade_core.config import LoadedConfig, check_generation, check_local_paths
from ade_core.errors import EnvironmentProblem, MissingHookError
from ade_core.plugins import TaskHandle

# Hooks a dry run never calls: its simulated sandbox realizes no strategy on frozen task inputs.
NOT_NEEDED_DRY = ("ade_task_inputs",)


def check_task_complete(task: TaskHandle, *, dry_run: bool = False) -> None:
    """Every task-specific hook a Run calls is implemented by the task's owner."""
    missing = [hook for hook in task.missing_hooks() if not (dry_run and hook in NOT_NEEDED_DRY)]
    if missing:
        raise MissingHookError(
            f"task {task.name!r} (from {task.owner.label}) is incomplete: it does not implement "
            f"{', '.join(missing)}; add an @hookimpl for each to {task.owner.module} (`ade new-task` "
            "scaffolds them all) — `ade plugins` lists what each task lacks"
        )


def check_offline_builder(loaded: LoadedConfig, task: TaskHandle) -> None:
    """An offline Builder renders strategies from the task's catalog, so the task must have one."""
    from ade_core.agents.backends import role_endpoints
    from ade_core.harness.methods import method_policy

    one_session = method_policy(loaded.experiment).one_session
    if role_endpoints(loaded.operational, one_session=one_session)["builder"].backend != "offline":
        return
    if not task.strategy_catalog():
        raise MissingHookError(
            f"the offline agent builds strategies from the task's strategy catalog, and task {task.name!r} "
            f"(from {task.owner.label}) has none; add an ade_strategy_catalog hook to {task.owner.module}, "
            "or use an LLM Builder (--agent openai, see docs/agents.md)"
        )


def check_environment(loaded: LoadedConfig) -> None:
    """A real Run's local model, data files, generation backends and sandbox floor exist on this machine."""
    check_local_paths(loaded)
    check_generation(loaded.experiment, loaded.operational.generation)
    check_isolation(loaded.operational.sandbox.min_isolation)


def check_isolation(min_isolation: str) -> None:
    """The sandbox reaches the configured floor here (a missing bubblewrap below ``strict`` is the machine's)."""
    from ade_sandbox import IsolationUnavailable
    from ade_sandbox.runner import resolve_level

    try:
        resolve_level(min_isolation)
    except IsolationUnavailable as exc:
        raise EnvironmentProblem(
            f"{exc} ([operational.sandbox].min_isolation = {min_isolation!r}; `ade sandbox doctor` shows each layer)"
        ) from None


def check_run(loaded: LoadedConfig, task: TaskHandle, *, dry_run: bool) -> None:
    """Everything above that applies: a dry run needs no model, data or sandbox on this machine."""
    check_task_complete(task, dry_run=dry_run)
    check_offline_builder(loaded, task)
    if not dry_run:
        check_environment(loaded)
