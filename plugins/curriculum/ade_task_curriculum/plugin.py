"""Hook implementations of the Curriculum task; the logic lives in ``task.py``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ade_core import (
    ExperimentConfig,
    Intervention,
    InterventionKind,
    OutputValidation,
    PackageSchema,
    Preset,
    ReferenceStrategy,
    ServiceSpec,
    StrategyFamily,
    StrategyInterface,
    TaskInputs,
    TaskSpec,
    hookimpl,
    judge_service,
)
from ade_task_curriculum import task as cl
from ade_task_curriculum.catalog import CATALOG
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
def ade_builder_dev_inputs(task: str, config: ExperimentConfig | None, base_dir: str) -> TaskInputs | None:
    """With a config, 𝓑's own inventory and schedule shape (the pool is authorised input); without one
    (the conformance kit), self-contained synthetic problems."""
    if task != TASK:
        return None
    return cl.development_inputs() if config is None else cl.frozen_inputs(config, base_dir)


@hookimpl
def ade_task_inputs(task: str, config: ExperimentConfig, base_dir: str) -> TaskInputs | None:
    return cl.frozen_inputs(config, base_dir) if task == TASK else None


@hookimpl
def ade_task_services(task: str, config: Any) -> list[ServiceSpec] | None:
    """``judge_batch``: the judge core under 𝓑's ``[judge]`` (requests ``{question, response, rubric}``)."""
    if task != TASK:
        return None
    return [judge_service(config.judge, name="judge_batch", description=cl.JUDGE_BATCH_DESCRIPTION)]


@hookimpl
def ade_validate_output(task: str, entry_point: str, output: Any, arguments: dict[str, Any]) -> OutputValidation | None:
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


@hookimpl
def ade_strategy_catalog(task: str) -> list[StrategyFamily]:
    """Schedulers for the offline agent: frontier, level-matched, easy-to-hard, round-robin, band cycling, a control."""
    return list(CATALOG) if task == TASK else []
