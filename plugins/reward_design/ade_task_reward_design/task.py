"""Reward Design: a strategy scores each GRPO rollout and may redistribute credit within a group.

The paper's contract (``ade_core.reward_contract``): ``async compute_score(...)`` and a synchronous
``compute_fallback_score(...)`` with the same six parameters return ``ade.reward_result.v2``,
which keeps the training score apart from the externally verified outcome, an optional process
projection and rule evidence; the optional synchronous ``assign_group_credit(group_input)`` takes
an ``ade.group_credit_input.v3`` group and returns ``ade.group_credit_output.v2``. The process
judge ``llm_judge(question_prompt, response_content)`` is a module global, not a parameter.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from ade_core import (
    GROUP_INPUT_SCHEMA,
    GROUP_OUTPUT_SCHEMA,
    PROCESS_DESCRIPTION,
    PROCESS_DIMENSIONS,
    PROCESS_EVIDENCE_SCHEMA,
    PROCESS_SERVICE,
    PROCESS_SIGNATURE,
    REWARD_RESULT_SCHEMA,
    ROW_PARAMETERS,
    EntryPoint,
    ExperimentConfig,
    Intervention,
    ModuleService,
    OutputValidation,
    PackageSchema,
    Parameter,
    RecordSpec,
    ReferenceStrategy,
    ServiceSpec,
    SharedReference,
    StrategyCall,
    StrategyInterface,
    TaskInputs,
    TaskSpec,
    group_input,
    process_judge_service,
    rft_pool,
    validate_group_credit,
    validate_reward_result,
)

TASK = "reward_design"

TASK_SPEC = TaskSpec(
    name=TASK,
    title="Reward Design",
    description="Design the response reward and optional group credit used by GRPO.",
    paradigm="rft",
    metric_order=("average_at_k", "pass_at_k"),  # Appendix D.7: RFT ranks Average@K, then Pass@K
    # Sec 4: the Curriculum shares this reference (its own is a random schedule under the same reward)
    shared_reference=SharedReference(name="rft_outcome", data_order="engine"),
)

_ROW_PARAMS = (
    Parameter(name="question_prompt", json_type="string", description="The problem as prompted."),
    Parameter(name="response_content", json_type="string", description="The sampled response text."),
    Parameter(
        name="extracted_answer", json_type="string", description="Final answer extracted by the grader ('' if none)."
    ),
    Parameter(
        name="outcome_score", json_type="number", description="Externally verified correctness O(x, y) in {0, 1}."
    ),
    Parameter(name="response_length_tokens", json_type="integer", description="Response length in tokens."),
    Parameter(name="max_response_length_tokens", json_type="integer", description="Response token limit."),
)
_RESULT = (
    f"{{schema_version: '{REWARD_RESULT_SCHEMA}', score: finite number in [0, 1], outcome_score: the argument "
    "unchanged, artifact_projection: null or a number in [0, 1], rule_evidence: {status: 'available', value in "
    "[0, 1]} or {status: 'not_configured', value: null}}"
)

INTERFACE = StrategyInterface(
    task=TASK,
    entry_points=(
        EntryPoint(name="compute_score", is_async=True, parameters=_ROW_PARAMS, returns=_RESULT),
        EntryPoint(
            name="compute_fallback_score",
            is_async=False,
            parameters=_ROW_PARAMS,
            returns=_RESULT + "; here artifact_projection is null and score equals outcome_score",
        ),
        EntryPoint(
            name="assign_group_credit",
            is_async=False,
            parameters=(
                Parameter(
                    name="group_input",
                    json_type="object",
                    description=f"{{schema_version: '{GROUP_INPUT_SCHEMA}', group_type: all_wrong | mixed | "
                    "all_correct, records: [{record_id: 0..n-1, is_correct, outcome_score, pre_group_reward, "
                    "evidence: {outcome: {status: 'authoritative', value}, process: {status: available | "
                    f"unavailable | not_configured, schema_version: '{PROCESS_EVIDENCE_SCHEMA}', dimensions}}, "
                    "rule_based: {status, value}, response_length: {status: 'authoritative', value, maximum}}}]}",
                ),
            ),
            returns=f"{{schema_version: '{GROUP_OUTPUT_SCHEMA}', decision: {{mode: identity | abstained | shaped, "
            "evidence_sources: sorted non-empty subset of [outcome, process, rule_based, response_length], "
            f"process_dimensions: sorted subset of {list(PROCESS_DIMENSIONS)}, non-empty exactly when process is "
            "a source, reason_code: lower_snake_case <= 64 chars}, assignments: [{record_id, training_reward in "
            "[0, 1]}] covering every record once (identity and abstained: training_reward = outcome_score)}",
            required=False,
        ),
    ),
    allowed_imports=("json", "math", "re", "statistics", "collections", "itertools", "functools"),
    constraints=(
        "Scores and training rewards are finite numbers in [0, 1] (a bool is not a number); outcome_score is "
        "returned unchanged.",
        "compute_fallback_score pays the outcome, with no projection, and never calls llm_judge.",
        "With judge enrichment on and no group credit, every valid path of compute_score awaits llm_judge exactly "
        "once; with group credit, compute_score returns the outcome and the Engine gathers process evidence.",
        "Group credit is deterministic and invariant to record order and record ids.",
        "Unavailable evidence is explicit (null projection, status 'unavailable'), never a zero.",
    ),
    module_services=(
        ModuleService(name=PROCESS_SERVICE, parameters=PROCESS_SIGNATURE, description=PROCESS_DESCRIPTION),
    ),
)

PACKAGE_SCHEMA = PackageSchema(
    task=TASK,
    records=(
        RecordSpec(
            name="executed_strategy",
            description="The admitted reward module and its probe results.",
            readable_by=("builder", "analyzer", "plan_summarizer"),
        ),
    ),
)


_REFERENCE_SOURCE = f'''\
"""Generic reference: the reward is the verified outcome; no shaping, no group credit."""


def _outcome(outcome_score):
    return {{
        "schema_version": "{REWARD_RESULT_SCHEMA}",
        "score": float(outcome_score),
        "outcome_score": outcome_score,
        "artifact_projection": None,
        "rule_evidence": {{"status": "not_configured", "value": None}},
    }}


async def compute_score(question_prompt, response_content, extracted_answer, outcome_score,
                        response_length_tokens, max_response_length_tokens):
    return _outcome(outcome_score)


def compute_fallback_score(question_prompt, response_content, extracted_answer, outcome_score,
                           response_length_tokens, max_response_length_tokens):
    return _outcome(outcome_score)
'''

REFERENCE = ReferenceStrategy(
    source=_REFERENCE_SOURCE,
    account="R(x, y) = O(x, y): the externally verified outcome, with no group credit (Appendix D.3).",
)


ADMISSION_JUDGE_CALLS = 4096  # llm_judge calls one admission may make: every probe and replay row


def services(config: ExperimentConfig) -> list[ServiceSpec]:
    """``llm_judge`` under 𝓑's ``[judge]``: one call per scored row, for admission or a whole GRPO run."""
    recipe = config.training.grpo
    rollouts = recipe.total_steps * recipe.prompts_per_step * recipe.rollouts_per_prompt if recipe else 0
    return [process_judge_service(config.judge, max_calls=max(ADMISSION_JUDGE_CALLS, rollouts))]


def validate(entry_point: str, output: Any, arguments: dict[str, Any]) -> OutputValidation:
    """The contract of ``entry_point``'s output (``ade_core.reward_contract``)."""
    if entry_point == "assign_group_credit":
        return validate_group_credit(output, arguments["group_input"])
    return validate_reward_result(output, arguments, fallback=entry_point == "compute_fallback_score")


def bind_reward_module(source: str) -> Intervention:
    """The Engine imports the admitted module itself (inside the sandbox) as the reward."""
    digest = hashlib.sha256(source.encode("utf-8")).hexdigest()
    return Intervention(
        kind="reward_module",
        payload={"source": source, "source_sha256": digest},
        summary=f"reward module {digest[:12]}",
    )


def development_inputs() -> TaskInputs:
    """Six scored rows (for the reward and its fallback) and three rollout groups with process evidence."""
    rows = [
        ("What is 6 * 7?", "<think>6*7=42</think>\\boxed{42}", "42", 1.0, 12),
        ("What is 6 * 7?", "<think>6*7=36</think>\\boxed{36}", "36", 0.0, 12),
        ("Solve x + 3 = 10.", "<think>x = 7</think>\\boxed{7}", "7", 1.0, 10),
        ("Solve x + 3 = 10.", "<think>x = 13</think>", "", 0.0, 8),
        ("What is 15 mod 4?", "<think>15 = 3*4 + 3</think>\\boxed{3}", "3", 1.0, 14),
        ("What is 15 mod 4?", "<think>loop loop loop loop", "", 0.0, 64),
    ]
    calls = [
        StrategyCall(
            entry_point=entry,
            arguments={
                "question_prompt": q,
                "response_content": r,
                "extracted_answer": a,
                "outcome_score": o,
                "response_length_tokens": n,
                "max_response_length_tokens": 64,
            },
        )
        for entry in ("compute_score", "compute_fallback_score")
        for q, r, a, o, n in rows
    ]

    def row(outcome: float, dims: tuple[float, float, float] | None, length: int) -> dict[str, Any]:
        process = (
            {"status": "unavailable", "schema_version": PROCESS_EVIDENCE_SCHEMA, "dimensions": None}
            if dims is None
            else {
                "status": "available",
                "schema_version": PROCESS_EVIDENCE_SCHEMA,
                "dimensions": dict(zip(PROCESS_DIMENSIONS, dims, strict=True)),
            }
        )
        return {
            "outcome_score": outcome,
            "pre_group_reward": outcome,
            "process": process,
            "rule_evidence": None,
            "response_length_tokens": length,
        }

    groups = [
        [row(1.0, (1, 1, 1), 20), row(0.0, (0.5, 0, 1), 30), row(1.0, (0.5, 1, 1), 25), row(0.0, (0, 0, 0.5), 64)],
        [row(0.0, (1, 1, 1), 22), row(0.0, (0, 0.5, 1), 40), row(0.0, None, 64), row(0.0, (1, 0.5, 1), 18)],
        [row(1.0, (1, 1, 1), 15), row(1.0, (1, 0.5, 1), 19), row(1.0, (1, 1, 0.5), 21), row(1.0, (1, 1, 1), 17)],
    ]
    calls += [
        StrategyCall(entry_point="assign_group_credit", arguments={"group_input": group_input(g, 64)}) for g in groups
    ]
    return TaskInputs(
        calls=tuple(calls),
        description="six synthetic rollouts (scored and by the fallback) and three rollout groups "
        "(mixed, all wrong with one process unavailable, all correct)",
    )


FROZEN_PROBLEMS = 8  # problems of the RFT pool the frozen inputs score (a correct and a wrong response each)


def _wrong_answer(answer: str) -> str:
    try:
        return str(int(answer) + 1)
    except ValueError:
        return f"not {answer}"


def frozen_inputs(config: ExperimentConfig, base_dir: str) -> TaskInputs:
    """Rows built on the first problems of 𝓑's RFT pool: a correct and a wrong response each, scored
    by the reward and by its fallback, and one mixed and one all-wrong group of the recipe's size."""
    from collections import Counter

    recipe = config.training.grpo
    if recipe is None:
        raise ValueError("reward_design trains with GRPO: set [training].paradigm = 'grpo' and [training.grpo]")
    pool = rft_pool(config, Path(base_dir))
    if len(pool) < FROZEN_PROBLEMS:
        raise ValueError(f"the RFT pool {config.data.source!r} has {len(pool)} problems; reward_design needs 8")
    problems = pool[:FROZEN_PROBLEMS]
    cap = recipe.max_response_tokens

    def arguments(problem: dict[str, Any], correct: bool, index: int) -> dict[str, Any]:
        answer = problem["reference_answer"] if correct else _wrong_answer(problem["reference_answer"])
        response = f"<think>Solving: {problem['question']}</think>\n\\boxed{{{answer}}}"
        values = (problem["question"], response, answer, float(correct), min(cap, 16 + 8 * index), cap)
        return dict(zip(ROW_PARAMETERS, values, strict=True))

    rows = [arguments(p, correct, i) for i, p in enumerate(problems) for correct in (True, False)]
    calls = [
        StrategyCall(entry_point=e, arguments=r) for e in ("compute_score", "compute_fallback_score") for r in rows
    ]
    size = recipe.rollouts_per_prompt
    for kind, problem in (("mixed", problems[0]), ("all_wrong", problems[1])):
        members = [arguments(problem, kind == "mixed" and i % 2 == 0, i) for i in range(size)]
        group = [
            {
                "outcome_score": m["outcome_score"],
                "pre_group_reward": m["outcome_score"],
                "process": None,
                "rule_evidence": None,
                "response_length_tokens": m["response_length_tokens"],
            }
            for m in members
        ]
        calls.append(
            StrategyCall(entry_point="assign_group_credit", arguments={"group_input": group_input(group, cap)})
        )
    subjects = Counter(p["subject"] for p in pool)
    return TaskInputs(
        calls=tuple(calls),
        description=f"{len(rows)} responses to {FROZEN_PROBLEMS} problems of the RFT pool {config.data.source!r} "
        "(scored and by the fallback) and two groups",
        statistics={
            "pool_problems": len(pool),
            "group_size": size,
            "max_response_tokens": cap,
            **{f"subject_{name}": count for name, count in sorted(subjects.items())},
        },
        sample=tuple(pool[:8]),
    )
