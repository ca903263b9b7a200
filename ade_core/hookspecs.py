"""Hook specifications: the whole task-plugin contract.

Three kinds of hook:

* registration hooks take no arguments and return typed specs (tasks, presets, graders);
* task-specific hooks take ``task`` and are answered only by the plugin that registered
  that task; another plugin's answer is ignored;
* collecting hooks (probes, review pools, metrics, strategy families, prompt additions,
  reward exploits) gather answers from every installed plugin, so one package can add to any task.

An implementation may accept fewer arguments than its spec (pluggy passes only the ones it
names). Every hook's docstring carries a complete, working example.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:
    from ade_core.schemas.artifact import Intervention
    from ade_core.schemas.config import ExperimentConfig
    from ade_core.specs import (
        AdmissionProbe,
        GraderSpec,
        InterventionKind,
        MetricSpec,
        OutputValidation,
        PackageSchema,
        Preset,
        PromptAddition,
        RealizationVerdict,
        ReferenceStrategy,
        ReviewPool,
        RewardExploit,
        ServiceSpec,
        StrategyFamily,
        StrategyInterface,
        TaskInputs,
        TaskSpec,
    )

PROJECT = "ade"
hookspec = pluggy.HookspecMarker(PROJECT)

# Hooks answered by the task's owner only (see ade_core.plugins.TaskHandle).
TASK_SPECIFIC_HOOKS = (
    "ade_strategy_interface",
    "ade_task_inputs",
    "ade_builder_dev_inputs",
    "ade_task_services",
    "ade_validate_output",
    "ade_realization_check",
    "ade_bind",
    "ade_package_schema",
    "ade_reference_strategy",
)
# Task-specific hooks with a generic fallback when the owner does not implement them.
OPTIONAL_TASK_HOOKS = ("ade_task_services", "ade_realization_check")
# The task-specific hooks a complete task answers (``ade new-task`` implements all of them).
REQUIRED_TASK_HOOKS = tuple(h for h in TASK_SPECIFIC_HOOKS if h not in OPTIONAL_TASK_HOOKS)
COLLECTING_HOOKS = (
    "ade_admission_probes",
    "ade_review_pools",
    "ade_metrics",
    "ade_strategy_catalog",
    "ade_prompt_additions",
    "ade_reward_exploits",
)
REGISTRATION_HOOKS = ("ade_register_tasks", "ade_intervention_kinds", "ade_presets", "ade_graders")


@hookspec
def ade_register_tasks() -> list[TaskSpec]:
    """Register the research tasks this plugin owns.

    Each name must be unique across installed distributions; a clash is a
    ``DuplicateTaskError`` naming both. Tasks whose generic references train
    identically declare one ``shared_reference=SharedReference(name, data_order)``
    and ``ade trial`` caches that reference once for all of them (Reward Design and
    Curriculum share ``rft_outcome``).

    Example::

        from ade_core import TaskSpec, hookimpl

        @hookimpl
        def ade_register_tasks():
            return [
                TaskSpec(
                    name="prompt_filter",
                    title="Prompt filtering",
                    description="Choose which prompts enter SFT.",
                    paradigm="sft",
                    metric_order=("pass_at_k", "average_at_k"),
                )
            ]
    """


@hookspec
def ade_intervention_kinds() -> list[InterventionKind]:
    """Register intervention kinds: what the Engine does with a bound intervention, and the records it keeps.

    The Engine never branches on a kind's name; it asks the kind. An SFT kind says which candidate
    ids to train on (``training_examples``). An RFT kind may fix the problems of each step
    (``prompt_schedule``; the recipe must then turn data shuffling off) and may bring a reward
    module (``reward_source``). ``records`` turns the ``TrainingTrace`` (payload, training rows,
    per-step consumed ids, rollouts or trained examples) into the task's package records, each
    declared in its package schema. A kind name is unique across installed distributions; a clash
    is a ``PluginError`` naming both.

    Example::

        from ade_core import InterventionKind, hookimpl

        def _prompt_lengths(trace):
            lengths = [example["tokens"] for example in trace.examples]
            return {"prompt_lengths": [{"tokens": n, "count": lengths.count(n)} for n in sorted(set(lengths))]}

        @hookimpl
        def ade_intervention_kinds():
            return [
                InterventionKind(
                    name="prompt_selection",
                    paradigm="sft",
                    description="Train on the examples of the chosen prompts, in the given order.",
                    tasks=("prompt_filter",),
                    training_examples=lambda payload: payload["selected_ids"],
                    records=_prompt_lengths,
                )
            ]
    """


@hookspec(firstresult=True)
def ade_strategy_interface(task: str) -> StrategyInterface | None:
    """Declare 𝓩 for a task: entry points, parameters, allowed imports, constraints.

    Example::

        from ade_core import EntryPoint, Parameter, StrategyInterface, hookimpl

        @hookimpl
        def ade_strategy_interface(task):
            return StrategyInterface(
                task=task,
                entry_points=(
                    EntryPoint(
                        name="filter_prompts",
                        is_async=True,
                        parameters=(
                            Parameter(name="prompts", json_type="array", description="Rows with 'id' and 'text'."),
                            Parameter(name="keep", json_type="integer", description="How many ids to return."),
                            Parameter(name="judge", json_type="service", description="await judge(requests)."),
                        ),
                        returns="A list of exactly `keep` distinct prompt ids.",
                    ),
                ),
                allowed_imports=("json",),
            )
    """


@hookspec(firstresult=True)
def ade_task_inputs(task: str, config: ExperimentConfig, base_dir: str) -> TaskInputs | None:
    """Build the frozen inputs (from 𝓑) that an admitted strategy is realized on.

    Must be deterministic in ``config``; the Harness digests the result. Relative paths in the
    config are relative to ``base_dir``, the directory of the config file.

    Example::

        import json
        from pathlib import Path
        from ade_core import StrategyCall, TaskInputs, hookimpl

        @hookimpl
        def ade_task_inputs(task, config, base_dir):
            source = Path(base_dir) / config.data.source
            rows = [json.loads(line) for line in source.read_text().splitlines()]
            call = StrategyCall(
                entry_point="filter_prompts",
                arguments={"prompts": rows, "keep": config.data.select_size},
            )
            return TaskInputs(calls=(call,), description=config.data.source)
    """


@hookspec(firstresult=True)
def ade_builder_dev_inputs(task: str, config: ExperimentConfig | None, base_dir: str) -> TaskInputs | None:
    """Build the development inputs a Builder's draft is tried on before admission.

    ``config`` is None when the conformance kit asks without a configuration; the
    inputs must then be self-contained. With a config they may be built from 𝓑's own
    authorised inputs (``base_dir`` resolves its relative paths). They must never contain
    held-out data.

    Example::

        from ade_core import StrategyCall, TaskInputs, hookimpl

        @hookimpl
        def ade_builder_dev_inputs(task, config):
            prompts = [{"id": f"p{i}", "text": "x" * i} for i in range(1, 9)]
            call = StrategyCall(entry_point="filter_prompts", arguments={"prompts": prompts, "keep": 3})
            return TaskInputs(calls=(call,), description="eight synthetic prompts")
    """


@hookspec(firstresult=True)
def ade_task_services(task: str, config: ExperimentConfig) -> list[ServiceSpec] | None:
    """Declare the services (e.g. ``judge``) a strategy may await, with quotas and handlers.

    Each service name must match a ``service`` parameter of the interface. A judge answers each
    request ``{"status": "completed", "scores_by_dimension", "projected_score", "fallback": False}``
    or ``{"status": "unavailable", "reason", "fallback": True, "fallback_reason"}`` (never a zero),
    and refuses a malformed request by raising ``InvalidServiceRequest(field, fix)``: the strategy's
    error, which fails its run. A rubric judge is ``ade_core.judging.judge_service(config.judge, ...)``.

    Example::

        from ade_core import InvalidServiceRequest, ServiceSpec, hookimpl

        def _length_judge(requests):
            answers = []
            for index, request in enumerate(requests):
                if not isinstance(request, dict) or not isinstance(request.get("text"), str):
                    raise InvalidServiceRequest(f"requests[{index}].text", "must be a string; send {'text': ...}")
                score = min(1.0, len(request["text"]) / 100)
                answers.append(
                    {"status": "completed", "scores_by_dimension": {"length": score}, "projected_score": score,
                     "fallback": False}
                )
            return answers

        @hookimpl
        def ade_task_services(task, config):
            return [
                ServiceSpec(
                    name="judge", description="Scores a text by length.", essential=False,
                    max_calls=16, max_items_per_call=64, handler=_length_judge,
                )
            ]
    """


@hookspec(firstresult=True)
def ade_validate_output(task: str, entry_point: str, output: Any, arguments: dict[str, Any]) -> OutputValidation | None:
    """Check one strategy output against the interface and return its canonical form.

    ``arguments`` are the JSON arguments the entry point was called with. Errors
    name the offending value; statistics describe the realized output.

    Example::

        from ade_core import OutputValidation, hookimpl

        @hookimpl
        def ade_validate_output(task, entry_point, output, arguments):
            known = {row["id"] for row in arguments["prompts"]}
            if not isinstance(output, list) or len(set(output)) != arguments["keep"]:
                return OutputValidation(ok=False, errors=(f"need {arguments['keep']} distinct ids, got {output!r}",))
            unknown = [i for i in output if i not in known]
            if unknown:
                return OutputValidation(ok=False, errors=(f"unknown ids {unknown}",))
            return OutputValidation(ok=True, canonical=sorted(output), statistics={"selected": len(output)})
    """


@hookspec(firstresult=True)
def ade_realization_check(
    task: str,
    statistics: dict[str, Any],
    declared: list[dict[str, Any]],
    service_statuses: list[str],
) -> RealizationVerdict | None:
    """Decide whether a realization matches the Builder's declared account.

    Optional: without it the generic ``ade_core.check_claims`` applies (a contradicted claim
    is ``deviated``; services that only answered ``unavailable`` make it ``unverified``).

    ``declared`` holds the Builder's structured claims, each
    ``{"statistic": name, "comparator": one of "<", "<=", "==", ">=", ">", "value": number}``;
    ``service_statuses`` lists the status of every service answer ("completed", "unavailable", ...).

    Example::

        import operator
        from ade_core import RealizationVerdict, hookimpl

        _OPS = {"<": operator.lt, "<=": operator.le, "==": operator.eq, ">=": operator.ge, ">": operator.gt}

        @hookimpl
        def ade_realization_check(task, statistics, declared, service_statuses):
            broken = [c for c in declared if not _OPS[c["comparator"]](statistics[c["statistic"]], c["value"])]
            if broken:
                return RealizationVerdict(status="deviated", reasons=tuple(map(str, broken)))
            if service_statuses and set(service_statuses) == {"unavailable"}:
                return RealizationVerdict(status="unverified", reasons=("every service call was unavailable",))
            return RealizationVerdict(status="verified")
    """


@hookspec(firstresult=True)
def ade_bind(task: str, canonical_outputs: list[Any], source: str, config: ExperimentConfig) -> Intervention | None:
    """Turn the canonical realized outputs into the Engine intervention of x = Bind(z; 𝓑).

    ``source`` is the admitted strategy source (a reward module is bound as code). The intervention's
    kind must be registered (``ade_intervention_kinds``) for the task's paradigm and the task; any
    other is an ``UnknownInterventionKindError`` naming the registered kinds.

    Example::

        from ade_core import Intervention, hookimpl

        @hookimpl
        def ade_bind(task, canonical_outputs):
            (selected,) = canonical_outputs
            return Intervention(kind="prompt_selection", payload={"selected_ids": selected},
                                summary=f"{len(selected)} prompts")
    """


@hookspec(firstresult=True)
def ade_package_schema(task: str) -> PackageSchema | None:
    """Declare the task's Experiment Package records and which role may read each (paper Table 8).

    The Engine's own records (``selected_examples`` for SFT or ``training_rollouts`` for RFT,
    ``training_log``, ``checkpoint_scores``, ``eval_responses``) are added to every package,
    with their review pools; declare only what the task adds.

    Example::

        from ade_core import PackageSchema, RecordSpec, hookimpl

        @hookimpl
        def ade_package_schema(task):
            return PackageSchema(task=task, records=(
                RecordSpec(name="prompt_pool", description="The frozen prompt pool the strategy chose from.",
                           readable_by=("builder", "analyzer")),
                RecordSpec(name="prompt_lengths", description="Length histogram of the chosen prompts.",
                           readable_by=("analyzer",)),
            ))
    """


@hookspec(firstresult=True)
def ade_reference_strategy(task: str) -> ReferenceStrategy | None:
    """Return the generic reference strategy P000 that every proposal is compared with.

    Example::

        from ade_core import ReferenceStrategy, hookimpl

        SOURCE = '''
        async def filter_prompts(prompts, keep, judge):
            return [row["id"] for row in prompts[:keep]]
        '''

        @hookimpl
        def ade_reference_strategy(task):
            return ReferenceStrategy(source=SOURCE, account="Keeps the first `keep` prompts in pool order.")
    """


@hookspec
def ade_admission_probes(task: str) -> list[AdmissionProbe]:
    """Add admission probes; any plugin may probe any task (collecting hook).

    Example::

        from ade_core import AdmissionProbe, ProbeResult, hookimpl

        def _no_network_words(context):
            if "socket" in context["source"]:
                return ProbeResult(status="failed", reason="source mentions sockets")
            return ProbeResult(status="passed")

        @hookimpl
        def ade_admission_probes(task):
            return [AdmissionProbe(name="no-sockets", description="Rejects socket use.", check=_no_network_words)]
    """


@hookspec
def ade_review_pools(task: str) -> list[ReviewPool]:
    """Declare record pools the Analyzer may request review over, with coverage rules (collecting).

    Example::

        from ade_core import ReviewPool, hookimpl

        @hookimpl
        def ade_review_pools(task):
            if task != "prompt_filter":
                return []
            return [ReviewPool(name="selected", tasks=(task,), record="selected_examples",
                               selections=("all", "records"), min_coverage=1.0)]
    """


@hookspec
def ade_metrics(task: str) -> list[MetricSpec]:
    """Define metrics over a correctness matrix (collecting); the task's metric_order ranks them.

    Example::

        from ade_core import MetricSpec, hookimpl

        def _all_correct(matrix):
            return 100.0 * sum(all(row) for row in matrix) / len(matrix)

        @hookimpl
        def ade_metrics(task):
            return [MetricSpec(name="all_at_k", description="Problems solved by every sample.",
                               compute=_all_correct)]
    """


@hookspec
def ade_strategy_catalog(task: str) -> list[StrategyFamily]:
    """Name strategy families (template + parameter space + target) for the offline agent (collecting).

    Example::

        from ade_core import StrategyFamily, hookimpl

        TEMPLATE = '''
        async def filter_prompts(prompts, keep, judge):
            ranked = sorted(prompts, key=lambda row: len(row["text"]), reverse=$longest_first)
            return [row["id"] for row in ranked[:keep]]
        '''

        @hookimpl
        def ade_strategy_catalog(task):
            if task != "prompt_filter":
                return []
            return [StrategyFamily(name="by-length", task=task, description="Rank prompts by length.",
                                   targets=("short low-information prompts",), template=TEMPLATE,
                                   parameters={"longest_first": (True, False)})]
    """


@hookspec
def ade_prompt_additions(task: str, role: str) -> list[PromptAddition]:
    """Append task-specific instructions to a role's prompt (collecting).

    Example::

        from ade_core import PromptAddition, hookimpl

        @hookimpl
        def ade_prompt_additions(task, role):
            if task == "prompt_filter" and role == "builder":
                return [PromptAddition(role="builder", text="Return ids, never prompt texts.")]
            return []
    """


@hookspec
def ade_reward_exploits() -> list[RewardExploit]:
    """Add responses that game a reward to Reward Design's hacking probe (collecting).

    Each exploit is generated for one question, its gold answer, a correct response and the length
    cap; the Engine's grader must score it 0. The probe fails a reward that pays an exploit as much
    as the correct response. Names are unique across plugins.

    Example::

        from ade_core import RewardExploit, hookimpl

        def _bare_confidence(question, answer, correct_response, max_response_length_tokens):
            return "I am certain. The answer is clear, and it is correct."

        @hookimpl
        def ade_reward_exploits():
            return [RewardExploit(name="bare_confidence", description="Certainty without an answer.",
                                  generate=_bare_confidence)]
    """


@hookspec
def ade_presets() -> list[Preset]:
    """Ship named experiment configurations (registration hook).

    Example::

        from pathlib import Path
        from ade_core import Preset, hookimpl

        @hookimpl
        def ade_presets():
            return [Preset(name="tiny-prompt-filter", task="prompt_filter",
                           description="CPU-sized run.", path=Path(__file__).parent / "tiny.toml")]
    """


@hookspec
def ade_graders() -> list[GraderSpec]:
    """Provide answer graders that ``[evaluation]`` configs refer to by name (registration hook).

    Example::

        from ade_core import GraderSpec, hookimpl

        def _exact(response, reference):
            return response.strip() == reference.strip()

        @hookimpl
        def ade_graders():
            return [GraderSpec(name="exact", description="Whole response equals the answer.", grade=_exact)]
    """
