"""Hook implementations of the Curriculum task; the logic lives in ``task.py``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ade_core import (
    Intervention,
    InterventionKind,
    OutputValidation,
    PackageSchema,
    Preset,
    ReferenceStrategy,
    ServiceSpec,
    StrategyInterface,
    TaskInputs,
    TaskSpec,
    hookimpl,
    judge_service,
)
from ade_task_curriculum import task as cl
from ade_task_curriculum.intervention import SCHEDULE

TASK = cl.TASK


PRESETS = Path(__file__).resolve().parent / "presets"


@hookimpl
def ade_presets() -> list[Preset]:
    """The task's tiny-world and paper configurations (the repository's examples/, shipped with the package)."""
    return Preset.shipped(PRESETS, task=TASK)


@hookimpl
def ade_register_tasks() -> list[TaskSpec]:
    return [cl.TASK_SPEC]


@hookimpl
def ade_intervention_kinds() -> list[InterventionKind]:
    return [SCHEDULE]


@hookimpl
def ade_strategy_interface(task: str) -> StrategyInterface | None:
    return cl.INTERFACE if task == TASK else None


@hookimpl
def ade_builder_dev_inputs(task: str) -> TaskInputs | None:
    return cl.development_inputs() if task == TASK else None


@hookimpl
def ade_task_services(task: str, config: Any) -> list[ServiceSpec] | None:
    """``judge_batch``: the judge core under 𝓑's ``[judge]`` (requests ``{question, response, rubric}``)."""
    if task != TASK:
        return None
    return [judge_service(config.judge, name="judge_batch", description=cl.JUDGE_BATCH_DESCRIPTION)]


@hookimpl
def ade_validate_output(task: str, output: Any, arguments: dict[str, Any]) -> OutputValidation | None:
    if task != TASK:
        return None
    return cl.validate_schedule(
        output, arguments["candidate_inventory"], arguments["total_steps"], arguments["prompts_per_step"]
    )


@hookimpl
def ade_bind(task: str, canonical_outputs: list[Any]) -> Intervention | None:
    return cl.bind_schedule(canonical_outputs) if task == TASK else None


@hookimpl
def ade_package_schema(task: str) -> PackageSchema | None:
    return cl.PACKAGE_SCHEMA if task == TASK else None


@hookimpl
def ade_reference_strategy(task: str) -> ReferenceStrategy | None:
    return cl.REFERENCE if task == TASK else None
