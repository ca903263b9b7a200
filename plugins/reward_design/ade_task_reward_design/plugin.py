"""Hook implementations of the Reward Design task; the logic lives in ``task.py`` and ``hacking.py``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ade_core import (
    AdmissionProbe,
    ExperimentConfig,
    Intervention,
    InterventionKind,
    OutputValidation,
    PackageSchema,
    Preset,
    ReferenceStrategy,
    RewardExploit,
    ServiceSpec,
    StrategyFamily,
    StrategyInterface,
    TaskInputs,
    TaskSpec,
    hookimpl,
    reward_admission_probes,
)
from ade_task_reward_design import hacking
from ade_task_reward_design import task as rd
from ade_task_reward_design.catalog import CATALOG
from ade_task_reward_design.intervention import REWARD_MODULE

TASK = rd.TASK


PRESETS = Path(__file__).resolve().parent / "presets"


@hookimpl
def ade_presets() -> list[Preset]:
    """The task's tiny-world and paper configurations (the repository's examples/, shipped with the package)."""
    return Preset.shipped(PRESETS, task=TASK)


@hookimpl
def ade_register_tasks() -> list[TaskSpec]:
    return [rd.TASK_SPEC]


@hookimpl
def ade_intervention_kinds() -> list[InterventionKind]:
    return [REWARD_MODULE]


@hookimpl
def ade_strategy_interface(task: str) -> StrategyInterface | None:
    return rd.INTERFACE if task == TASK else None


@hookimpl
def ade_builder_dev_inputs(task: str) -> TaskInputs | None:
    return rd.development_inputs() if task == TASK else None


@hookimpl
def ade_validate_output(task: str, entry_point: str, output: Any, arguments: dict[str, Any]) -> OutputValidation | None:
    return rd.validate(entry_point, output, arguments) if task == TASK else None


@hookimpl
def ade_task_services(task: str, config: ExperimentConfig) -> list[ServiceSpec] | None:
    """``llm_judge``: the judge core with the fixed process rubric, under 𝓑's ``[judge]``."""
    return rd.services(config) if task == TASK else None


@hookimpl
def ade_bind(task: str, source: str) -> Intervention | None:
    return rd.bind_reward_module(source) if task == TASK else None


@hookimpl
def ade_package_schema(task: str) -> PackageSchema | None:
    return rd.PACKAGE_SCHEMA if task == TASK else None


@hookimpl
def ade_reference_strategy(task: str) -> ReferenceStrategy | None:
    return rd.REFERENCE if task == TASK else None


@hookimpl
def ade_admission_probes(task: str) -> list[AdmissionProbe]:
    """The paper's reward probes: contract, judge usage, determinism, invariances, the sign guard."""
    return [*reward_admission_probes([TASK]), hacking.HACKING_PROBE] if task == TASK else []


@hookimpl
def ade_task_inputs(task: str, config: ExperimentConfig, base_dir: str) -> TaskInputs | None:
    return rd.frozen_inputs(config, base_dir) if task == TASK else None


@hookimpl
def ade_reward_exploits() -> list[RewardExploit]:
    """The reward-hacking bank: empty, format-only, multiple-boxed, malformed, spam, padding, hedges, babble."""
    return list(hacking.BANK)


@hookimpl
def ade_strategy_catalog(task: str) -> list[StrategyFamily]:
    """Reward families for the offline agent: step, process and sibling credit, format, length, two controls."""
    return list(CATALOG) if task == TASK else []
