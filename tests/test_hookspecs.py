"""Every hook: documented with a working example, listed in the docs, and exercised here.

The examples in the hookspec docstrings are executed as one real plugin ("prompt_filter")
and every hook is then called through the registry, so a broken example fails this file.
"""

from __future__ import annotations

import inspect
import json
import re
import types
from pathlib import Path

import pytest

from ade_core import InvalidServiceRequest, TrainingTrace, hookspecs
from ade_core.config import load_config
from ade_core.docs import hook_names
from ade_core.harness.static_policy import check_strategy_source
from ade_core.plugins import Candidate, load_plugins
from ade_core.testing import run_strategy_calls

REPO = Path(__file__).resolve().parents[1]
HOOKS = hook_names()


def example_source(hook: str) -> str:
    doc = inspect.getdoc(getattr(hookspecs, hook)) or ""
    _, marker, example = doc.partition("Example::")
    assert marker, f"{hook} has no Example:: block"
    return inspect.cleandoc(example)


@pytest.fixture
def example_registry(tmp_path):
    module = types.ModuleType("prompt_filter_example")
    module.__file__ = str(tmp_path / "prompt_filter_example.py")
    for hook in HOOKS:
        exec(compile(example_source(hook), f"<example {hook}>", "exec"), module.__dict__)
    (tmp_path / "pool.jsonl").write_text(
        "".join(json.dumps({"id": f"p{i}", "text": "w" * (i + 1)}) + "\n" for i in range(8))
    )
    (tmp_path / "tiny.toml").write_text(
        (REPO / "tests" / "data" / "prompt_filter.toml").read_text().replace("POOL", str(tmp_path / "pool.jsonl"))
    )
    return load_plugins([Candidate("prompt_filter", module, "ade-task-prompt-filter", "0.0.1")], entry_points=False)


def test_every_hook_has_a_docstring_with_an_hookimpl_example():
    assert len(HOOKS) == 19
    for hook in HOOKS:
        assert hook.startswith("ade_")
        assert "@hookimpl" in example_source(hook), hook


def test_hook_kinds_partition_the_hooks():
    kinds = (*hookspecs.REGISTRATION_HOOKS, *hookspecs.TASK_SPECIFIC_HOOKS, *hookspecs.COLLECTING_HOOKS)
    assert sorted(kinds) == sorted(HOOKS)


def test_every_hook_is_in_the_plugin_api_doc():
    text = (REPO / "docs" / "plugin-api.md").read_text()
    for hook in HOOKS:
        assert f"### `{hook}(" in text, f"{hook} missing from docs/plugin-api.md"


def test_every_hook_is_exercised_by_this_file():
    source = Path(__file__).read_text()
    body = source[source.index("# --- exercised hooks") :]
    for hook in HOOKS:
        assert re.search(rf"\b{hook}\b", body), f"no test exercises {hook}"


# --- exercised hooks ----------------------------------------------------------------
def test_examples_form_a_working_task(example_registry, tmp_path):
    registry = example_registry
    task = registry.task("prompt_filter")  # ade_register_tasks
    interface = task.interface()  # ade_strategy_interface
    assert interface.services == ("judge",)

    dev = task.builder_dev_inputs(None)  # ade_builder_dev_inputs
    reference = task.reference_strategy()  # ade_reference_strategy
    assert check_strategy_source(reference.source, interface) == []
    (result,) = run_strategy_calls(reference.source, interface, dev)
    verdict = task.validate_output("filter_prompts", result["value"], dev.calls[0].arguments)  # ade_validate_output
    assert verdict.ok and verdict.canonical == ["p1", "p2", "p3"]
    bad = task.validate_output("filter_prompts", ["p1", "nope", "p2"], dev.calls[0].arguments)
    assert not bad.ok and "unknown ids ['nope']" in bad.errors[0]

    presets = registry.presets()  # ade_presets
    assert [p.name for p, _ in presets] == ["tiny-prompt-filter"]
    config = load_config(presets[0][0].path).experiment
    inputs = task.task_inputs(config)  # ade_task_inputs
    assert len(inputs.calls[0].arguments["prompts"]) == 8

    (judge,) = task.services(config)  # ade_task_services
    assert judge.handler([{"text": "x" * 50}]) == [
        {"status": "completed", "scores_by_dimension": {"length": 0.5}, "projected_score": 0.5, "fallback": False}
    ]
    with pytest.raises(InvalidServiceRequest, match=r"^invalid_service_request: requests\[0\]\.text: must be"):
        judge.handler([{"txt": "x"}])

    verdict_ok = task.realization_check(  # ade_realization_check
        {"selected": 3}, [{"statistic": "selected", "comparator": "==", "value": 3}], ["completed"]
    )
    assert verdict_ok.status == "verified"
    deviated = task.realization_check({"selected": 3}, [{"statistic": "selected", "comparator": ">", "value": 3}], [])
    assert deviated.status == "deviated"
    assert task.realization_check({}, [], ["unavailable"]).status == "unverified"

    intervention = task.bind([verdict.canonical], reference.source, config)  # ade_bind
    assert intervention.payload == {"selected_ids": ["p1", "p2", "p3"]}
    kind = task.intervention_kind(intervention.kind)  # ade_intervention_kinds
    assert [k.name for k in task.intervention_kinds()] == ["prompt_selection"] and kind.paradigm == "sft"
    assert kind.training_examples is not None and kind.training_examples(intervention.payload) == ["p1", "p2", "p3"]
    examples = [{"trajectory_id": i, "tokens": n} for i, n in (("p1", 2), ("p2", 3), ("p3", 3))]
    trace = TrainingTrace(payload=intervention.payload, pool={}, examples=examples)
    assert task.kind_records(kind, trace) == {"prompt_lengths": [{"tokens": 2, "count": 1}, {"tokens": 3, "count": 2}]}
    records = [r.name for r in task.package_schema().records]  # ade_package_schema
    assert records == [
        "prompt_pool",
        "prompt_lengths",
        "selected_examples",
        "training_log",
        "checkpoint_scores",
        "eval_responses",
    ]


def test_collecting_examples(example_registry):
    task = example_registry.task("prompt_filter")
    (probe,) = task.admission_probes()  # ade_admission_probes
    assert probe.check({"source": "import socket"}).status == "failed"
    assert probe.check({"source": "x = 1"}).status == "passed"
    pools = {p.name: p for p in task.review_pools()}  # ade_review_pools
    assert pools["selected"].selections == ("all", "records")
    assert pools["eval_responses"].group_key == "problem_id"  # contributed by ade-core to every task
    assert pools["selected_examples"].selections == ("all", "records")  # the Engine's SFT record
    metrics = task.metrics()  # ade_metrics
    assert list(metrics)[:2] == ["pass_at_k", "average_at_k"]
    assert metrics["all_at_k"].compute([[True, True], [True, False]]) == 50.0
    (family,) = task.strategy_catalog()  # ade_strategy_catalog
    source = family.render(longest_first=True)
    assert check_strategy_source(source, task.interface()) == []
    (addition,) = task.prompt_additions("builder")  # ade_prompt_additions
    assert "ids" in addition.text and task.prompt_additions("analyzer") == []
    graders = example_registry.graders()  # ade_graders
    assert graders["exact"].grade(" 42 ", "42") and not graders["exact"].grade("41", "42")
    (exploit,) = example_registry.reward_exploits()  # ade_reward_exploits
    assert exploit.name == "bare_confidence" and "certain" in exploit.generate("6*7?", "42", "\\boxed{42}", 64)


def test_collecting_hooks_reach_builtin_tasks():
    registry = load_plugins([Candidate("addon", _addon_plugin(), "ade-addon-contamination", "0.1")])
    for name in ("data_selection", "reward_design", "curriculum"):
        probes = [p.name for p in registry.task(name).admission_probes()]
        assert probes[-1] == "contamination-scan" and probes.count("contamination-scan") == 1, name


def _addon_plugin() -> types.ModuleType:
    module = types.ModuleType("addon")
    exec(
        "from ade_core import AdmissionProbe, ProbeResult, hookimpl\n"
        "@hookimpl\n"
        "def ade_admission_probes(task):\n"
        "    return [AdmissionProbe(name='contamination-scan', description='Scans for benchmark text.',\n"
        "                           check=lambda context: ProbeResult(status='passed'))]\n",
        module.__dict__,
    )
    return module
