"""Hook implementations of the Data Selection task; the logic lives in ``task.py`` and ``judge.py``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ade_core import (
    AdmissionProbe,
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
)
from ade_task_data_selection import task as ds
from ade_task_data_selection.catalog import CATALOG
from ade_task_data_selection.intervention import SFT_SELECTION
from ade_task_data_selection.judge import judge_service

TASK = ds.TASK


PRESETS = Path(__file__).resolve().parent / "presets"


@hookimpl
def ade_presets() -> list[Preset]:
    """The task's tiny-world and paper configurations (the repository's examples/, shipped with the package)."""
    return Preset.shipped(PRESETS, task=TASK)


@hookimpl
def ade_register_tasks() -> list[TaskSpec]:
    return [ds.TASK_SPEC]


@hookimpl
def ade_intervention_kinds() -> list[InterventionKind]:
    return [SFT_SELECTION]


@hookimpl
def ade_strategy_interface(task: str) -> StrategyInterface | None:
    return ds.INTERFACE if task == TASK else None


@hookimpl
def ade_builder_dev_inputs(task: str) -> TaskInputs | None:
    return ds.development_inputs() if task == TASK else None


@hookimpl
def ade_task_services(task: str, config: Any) -> list[ServiceSpec] | None:
    return [judge_service(config)] if task == TASK else None


@hookimpl
def ade_validate_output(task: str, entry_point: str, output: Any, arguments: dict[str, Any]) -> OutputValidation | None:
    if task != TASK:
        return None
    return ds.validate_selection(output, arguments["candidate_inventory"], arguments["select_size"])


@hookimpl
def ade_bind(task: str, canonical_outputs: list[Any]) -> Intervention | None:
    return ds.bind_selection(canonical_outputs) if task == TASK else None


@hookimpl
def ade_package_schema(task: str) -> PackageSchema | None:
    return ds.PACKAGE_SCHEMA if task == TASK else None


@hookimpl
def ade_reference_strategy(task: str) -> ReferenceStrategy | None:
    return ds.REFERENCE if task == TASK else None


@hookimpl
def ade_strategy_catalog(task: str) -> list[StrategyFamily]:
    return list(CATALOG) if task == TASK else []


@hookimpl
def ade_task_inputs(task: str, config: Any, base_dir: str) -> TaskInputs | None:
    return ds.frozen_inputs(config, base_dir) if task == TASK else None


@hookimpl
def ade_admission_probes(task: str) -> list[AdmissionProbe]:
    return [ds.JUDGE_PROBE] if task == TASK else []
