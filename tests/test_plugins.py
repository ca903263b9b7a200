"""Plugin discovery, attribution of failures, and the typed task facade."""

from __future__ import annotations

import pytest

from ade_core import TaskSpec, hookimpl
from ade_core.errors import DuplicateTaskError, MissingHookError, PluginError, UnknownTaskError
from ade_core.plugins import Candidate, load_plugins

BUILTIN = {"data_selection", "reward_design", "curriculum"}

TASK_PLUGIN = """
from ade_core import TaskSpec, hookimpl

@hookimpl
def ade_register_tasks():
    return [TaskSpec(name="{task}", title="T", description="d", paradigm="sft",
                     metric_order=("pass_at_k",))]
"""


def test_builtin_tasks_are_registered_with_their_metric_order():
    registry = load_plugins()
    assert BUILTIN <= set(registry.task_names())
    assert registry.task("data_selection").spec.metric_order == ("pass_at_k", "average_at_k")
    assert registry.task("reward_design").spec.metric_order == ("average_at_k", "pass_at_k")
    assert registry.task("curriculum").spec.metric_order == ("average_at_k", "pass_at_k")
    owner = registry.task("data_selection").owner
    assert (owner.distribution, owner.status) == ("ade-task-data-selection", "loaded")


def test_load_env_restricts_plugins():
    registry = load_plugins(environ={"ADE_LOAD_PLUGINS": "ade-task-curriculum"})
    assert registry.task_names() == ["curriculum"]
    assert load_plugins(environ={"ADE_LOAD_PLUGINS": ""}).task_names() == []
    # the core's metrics and graders are always there
    assert set(load_plugins(environ={"ADE_LOAD_PLUGINS": ""}).graders()) >= {"boxed_exact", "math_verify"}


def test_unknown_task_suggests_the_closest_name():
    with pytest.raises(UnknownTaskError, match="did you mean 'data_selection'"):
        load_plugins().task("data_selecton")


def test_import_failure_is_reported_and_others_still_load(install_fake_plugin):
    install_fake_plugin("ade-task-broken", "ade_task_broken", "import definitely_not_a_module\n")
    registry = load_plugins()
    (broken,) = [p for p in registry.plugins if p.distribution == "ade-task-broken"]
    assert broken.status == "failed"
    assert "ModuleNotFoundError" in broken.error and "definitely_not_a_module" in broken.error
    assert BUILTIN <= set(registry.task_names())


def test_hookimpl_matching_no_spec_is_rejected(install_fake_plugin):
    install_fake_plugin(
        "ade-task-typo",
        "ade_task_typo",
        "from ade_core import hookimpl\n\n@hookimpl\ndef ade_register_task():\n    return []\n",
    )
    registry = load_plugins()
    (typo,) = [p for p in registry.plugins if p.distribution == "ade-task-typo"]
    assert typo.status == "failed"
    assert "'ade_register_task'" in typo.error and "did you mean 'ade_register_tasks'" in typo.error
    assert not any(impl.plugin_name == "ade_task_typo" for impl in registry.implementations("ade_register_tasks"))


def test_duplicate_task_name_names_both_distributions(install_fake_plugin):
    install_fake_plugin("ade-task-one", "ade_task_one", TASK_PLUGIN.format(task="twin"), version="1.0")
    install_fake_plugin("ade-task-two", "ade_task_two", TASK_PLUGIN.format(task="twin"), version="2.0")
    registry = load_plugins()
    with pytest.raises(DuplicateTaskError) as info:
        registry.task("twin")
    assert "ade-task-one 1.0" in str(info.value) and "ade-task-two 2.0" in str(info.value)
    assert BUILTIN <= set(registry.task_names())


def test_exception_in_hook_names_distribution_version_and_hook(install_fake_plugin):
    install_fake_plugin(
        "ade-task-raises",
        "ade_task_raises",
        TASK_PLUGIN.format(task="raiser")
        + "\n@hookimpl\ndef ade_strategy_interface(task):\n    raise RuntimeError('boom')\n",
        version="0.9.1",
    )
    registry = load_plugins()
    with pytest.raises(PluginError) as info:
        registry.task("raiser").interface()
    message = str(info.value)
    assert "ade-task-raises 0.9.1" in message and "ade_strategy_interface" in message and "boom" in message
    assert isinstance(info.value.__cause__, RuntimeError)


def test_exception_in_registration_hook_is_attributed(install_fake_plugin):
    install_fake_plugin(
        "ade-task-bad-register",
        "ade_task_bad_register",
        "from ade_core import hookimpl\n\n@hookimpl\ndef ade_register_tasks():\n    raise ValueError('nope')\n",
    )
    with pytest.raises(
        PluginError, match=r"ade-task-bad-register 1\.2\.3 raised ValueError in hook ade_register_tasks"
    ):
        load_plugins()


def test_wrong_return_type_is_a_plugin_error():
    class Wrong:
        @hookimpl
        def ade_register_tasks(self):
            return ["not a TaskSpec"]

    with pytest.raises(PluginError, match="expected TaskSpec"):
        load_plugins([Candidate("wrong", Wrong(), "ade-task-wrong", "0.1")], entry_points=False)


def test_missing_hook_is_typed_and_names_the_hook():
    class Minimal:
        @hookimpl
        def ade_register_tasks(self):
            return [
                TaskSpec(name="minimal", title="M", description="d", paradigm="rft", metric_order=("average_at_k",))
            ]

    registry = load_plugins([Candidate("minimal", Minimal(), "ade-task-minimal", "0.1")], entry_points=False)
    with pytest.raises(MissingHookError, match="ade_task_inputs"):
        registry.task("minimal").task_inputs(None)


def test_realization_check_falls_back_to_the_generic_rule():
    task = load_plugins().task("curriculum")
    assert not task.has("ade_realization_check")
    claim = {"statistic": "coverage", "comparator": ">=", "value": 0.9}
    assert task.realization_check({"coverage": 0.5}, [claim], []).reasons == ("declared coverage >= 0.9, realized 0.5",)
    assert task.realization_check({"coverage": 1.0}, [claim], ["ok"]).status == "verified"
    missing = task.realization_check({}, [claim], [])
    assert missing.status == "deviated" and "not reported" in missing.reasons[0]


def test_task_specific_hooks_answer_only_for_their_owner():
    class Intruder:
        @hookimpl
        def ade_reference_strategy(self, task):
            from ade_core import ReferenceStrategy

            return ReferenceStrategy(source="x = 1\n", account="hijack")

    registry = load_plugins([Candidate("intruder", Intruder(), "ade-task-intruder", "0.1")])
    reference = registry.task("data_selection").reference_strategy()
    assert reference.account != "hijack"


def test_unknown_ranking_metric_is_reported():
    class NoMetric:
        @hookimpl
        def ade_register_tasks(self):
            return [
                TaskSpec(name="ranked", title="R", description="d", paradigm="sft", metric_order=("coverage_at_k",))
            ]

    registry = load_plugins([Candidate("nm", NoMetric(), "ade-task-nm", "0.1")], entry_points=False)
    with pytest.raises(PluginError, match=r"ranks by \['coverage_at_k'\]"):
        registry.task("ranked").metrics()


def test_package_schema_adds_engine_records_and_refuses_redeclaring_them():
    from ade_core import PackageSchema, RecordSpec

    schema = load_plugins().task("reward_design").package_schema()
    names = [r.name for r in schema.records]
    assert names == [
        "executed_strategy",
        "training_rollouts",
        "step_diagnostics",
        "reward_health",
        "training_log",
        "checkpoint_scores",
        "eval_responses",
    ]
    pools = {p.name: p for p in load_plugins().task("curriculum").review_pools()}
    assert pools["training_rollouts"].min_coverage == 0.25 and pools["training_rollouts"].selections == ("groups",)
    sft = load_plugins().task("data_selection")
    assert [r.name for r in sft.package_schema().records][:2] == ["executed_strategy", "selected_examples"]

    class Redeclares:
        @hookimpl
        def ade_register_tasks(self):
            return [TaskSpec(name="redeclare", title="R", description="d", paradigm="sft", metric_order=("pass_at_k",))]

        @hookimpl
        def ade_package_schema(self, task):
            return PackageSchema(
                task=task,
                records=(RecordSpec(name="selected_examples", description="mine", readable_by=("analyzer",)),),
            )

    registry = load_plugins([Candidate("re", Redeclares(), "ade-task-re", "0.1")], entry_points=False)
    with pytest.raises(PluginError, match=r"redeclares Engine records \['selected_examples'\]"):
        registry.task("redeclare").package_schema()
