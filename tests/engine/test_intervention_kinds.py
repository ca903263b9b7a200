"""A new RFT task brings its own intervention kind through a plugin: no core edit, and unknown kinds are refused.

The toy task ``hard_first`` fixes the problems of each GRPO step and keeps, per step, how many of
its rollouts were correct: both come from its registered kind, which the Engine asks, never names.
"""

from __future__ import annotations

import pytest
from engine_world import GRPO_TOML, build_world, make_job

from ade_core import (
    InterventionKind,
    PackageSchema,
    PluginError,
    RecordSpec,
    TaskSpec,
    TrainingTrace,
    UnknownInterventionKindError,
    hookimpl,
)
from ade_core.engine.attempt import run_attempt
from ade_core.engine.package import open_package
from ade_core.plugins import Candidate, load_plugins
from ade_core.schemas.artifact import INTERVENTION_KINDS, BoundCommand, Intervention

TASK = "hard_first"


def _step_outcomes(trace: TrainingTrace) -> dict[str, list[dict]]:
    return {
        "step_outcomes": [
            {
                "step": step,
                "problem_ids": list(ids),
                "correct": sum(r["outcome"] for r in trace.rollouts if r["step"] == step),
                "rollouts": sum(1 for r in trace.rollouts if r["step"] == step),
            }
            for step, ids in enumerate(trace.consumed)
        ]
    }


class HardFirstPlugin:
    """A whole RFT task plugin, registered with pluggy in the test: task, kind, binding, records."""

    def __init__(self, kind_name: str = "step_order", records=_step_outcomes, binds: str | None = None) -> None:
        self.kind_name, self.records, self.binds = kind_name, records, binds or kind_name

    @hookimpl
    def ade_register_tasks(self):
        return [
            TaskSpec(
                name=TASK,
                title="Hard problems first",
                description="Order the GRPO problems.",
                paradigm="rft",
                metric_order=("average_at_k", "pass_at_k"),
            )
        ]

    @hookimpl
    def ade_intervention_kinds(self):
        return [
            InterventionKind(
                name=self.kind_name,
                paradigm="rft",
                description="GRPO consumes the given problem ids, one list per step, in order.",
                tasks=(TASK,),
                prompt_schedule=lambda payload: payload["steps"],
                records=self.records,
            )
        ]

    @hookimpl
    def ade_bind(self, task, canonical_outputs):
        if task != TASK:
            return None
        (steps,) = canonical_outputs
        return Intervention(kind=self.binds, payload={"steps": steps}, summary=f"{len(steps)} steps")

    @hookimpl
    def ade_package_schema(self, task):
        if task != TASK:
            return None
        record = RecordSpec(name="step_outcomes", description="Correct rollouts per step.", readable_by=("analyzer",))
        return PackageSchema(task=TASK, records=(record,))


def registry_with(plugin: object, name: str = "hard-first"):
    return load_plugins([Candidate(name, plugin, f"ade-task-{name}", "0.1")])


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    return build_world(tmp_path_factory.mktemp("world"))


def test_a_plugin_kind_is_registered_beside_the_builtin_ones():
    registry = registry_with(HardFirstPlugin())
    assert {"sft_selection", "reward_module", "schedule", "step_order"} <= set(registry.intervention_kinds())
    task = registry.task(TASK)
    assert [k.name for k in task.intervention_kinds()] == ["step_order"]
    intervention = task.bind([[["q1", "q2"]]], "", None)
    assert intervention.kind == "step_order"
    data = {"kind": "step_order", "payload": {"steps": [["q1"]]}, "summary": "1 step"}
    assert registry.validate_intervention(data) == Intervention(**data)


def test_an_unknown_kind_is_refused_naming_the_registered_ones():
    registry = registry_with(HardFirstPlugin())
    with pytest.raises(
        UnknownInterventionKindError, match=r"'step_ordr' is not registered \(did you mean 'step_order'"
    ) as err:
        registry.validate_intervention({"kind": "step_ordr", "payload": {}, "summary": ""})
    assert {"reward_module", "schedule", "sft_selection", "step_order"} <= set(err.value.registered)
    assert "registered kinds: " in str(err.value) and "step_order" in str(err.value)
    command = {
        "task": TASK,
        "strategy_digest": "sha256:" + "0" * 64,
        "intervention": {"kind": "step_ordr", "payload": {}, "summary": ""},
        "config_digest": "sha256:" + "0" * 64,
        "seeds": {},
        "resources": {"device": "cpu"},
    }
    with pytest.raises(UnknownInterventionKindError):
        BoundCommand.model_validate(command, context={INTERVENTION_KINDS: tuple(registry.intervention_kinds())})


def test_a_task_cannot_bind_another_paradigms_kind():
    registry = registry_with(HardFirstPlugin(kind_name="sft_selection"), name="impostor")
    with pytest.raises(PluginError, match="'sft_selection' is registered by both ade-task-data-selection"):
        registry.intervention_kinds()
    registry = registry_with(HardFirstPlugin(binds="sft_selection"))
    with pytest.raises(UnknownInterventionKindError, match="does not apply to the rft task 'hard_first'") as err:
        registry.task(TASK).bind([[["q1"]]], "", None)
    assert "kinds 'hard_first' may bind to: step_order." in str(err.value)


def test_kind_records_may_not_replace_the_engines_records():
    registry = registry_with(HardFirstPlugin(records=lambda trace: {"training_rollouts": []}))
    task = registry.task(TASK)
    with pytest.raises(PluginError, match="none of the Engine's"):
        task.kind_records(task.intervention_kind("step_order"), TrainingTrace(payload={}, pool={}))
    broken = registry_with(HardFirstPlugin(records=lambda trace: 1 / 0)).task(TASK)
    with pytest.raises(PluginError, match=r"ade-task-hard-first 0\.1 raised ZeroDivisionError"):
        broken.kind_records(broken.intervention_kind("step_order"), TrainingTrace(payload={}, pool={}))


def test_the_engine_runs_a_plugin_kind_and_keeps_its_records(world, tmp_path):
    registry = registry_with(HardFirstPlugin())
    steps = [["q6", "q4"], ["q6", "q2"], ["q0", "q3"]]
    toml = GRPO_TOML.format(task=TASK, shuffle="false", estimator="grpo")
    job = make_job(world, toml, Intervention(kind="step_order", payload={"steps": steps}, summary="3x2"))
    package = open_package(run_attempt(job, tmp_path / "attempt", registry=registry))
    assert package.manifest.status == "completed"
    outcomes = package.records("step_outcomes")
    assert [r["problem_ids"] for r in outcomes] == steps  # consumed in the kind's order
    rollouts = package.records("training_rollouts")
    assert [r["rollouts"] for r in outcomes] == [8, 8, 8]
    assert sum(r["correct"] for r in outcomes) == sum(r["outcome"] for r in rollouts)
    readable = {r.name: r.readable_by for r in package.manifest.records}
    assert readable["step_outcomes"] == ("analyzer",)


def test_the_engine_refuses_an_unregistered_kind(world, tmp_path):
    toml = GRPO_TOML.format(task=TASK, shuffle="false", estimator="grpo")
    job = make_job(world, toml, Intervention(kind="step_ordr", payload={"steps": []}, summary="-"))
    with pytest.raises(UnknownInterventionKindError, match="did you mean 'step_order'"):
        run_attempt(job, tmp_path / "attempt", registry=registry_with(HardFirstPlugin()))
