"""Reward Design: a strategy scores each GRPO rollout and may redistribute credit within a group.

Row level: ``compute_score(...)`` returns an ``ade.reward_result.v2`` record that keeps the
final score apart from the externally verified outcome, an optional process projection and
rule evidence. Group level (optional): ``assign_group_credit(group_input)`` takes an
``ade.group_credit_input.v3`` group and returns ``ade.group_credit_output.v2`` rewards.
"""

from __future__ import annotations

import hashlib
import math
from typing import Any

from ade_core import (
    EntryPoint,
    Intervention,
    OutputValidation,
    PackageSchema,
    Parameter,
    RecordSpec,
    ReferenceStrategy,
    StrategyCall,
    StrategyInterface,
    TaskInputs,
    TaskSpec,
)

TASK = "reward_design"
REWARD_RESULT_SCHEMA = "ade.reward_result.v2"
GROUP_INPUT_SCHEMA = "ade.group_credit_input.v3"
GROUP_OUTPUT_SCHEMA = "ade.group_credit_output.v2"
GROUP_DECISIONS = ("identity", "shaped", "abstained")
GROUP_TYPES = ("all_correct", "all_wrong", "mixed")

TASK_SPEC = TaskSpec(
    name=TASK,
    title="Reward Design",
    description="Design the response reward and optional group credit used by GRPO.",
    paradigm="rft",
    metric_order=("average_at_k", "pass_at_k"),  # Appendix D.7: RFT ranks Average@K, then Pass@K
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

INTERFACE = StrategyInterface(
    task=TASK,
    entry_points=(
        EntryPoint(
            name="compute_score",
            is_async=False,
            parameters=_ROW_PARAMS,
            returns=f"{{schema_version: '{REWARD_RESULT_SCHEMA}', score in [0, 1], outcome_score (unchanged), "
            "artifact_projection (object or null), rule_evidence (list)}",
        ),
        EntryPoint(
            name="assign_group_credit",
            is_async=False,
            parameters=(
                Parameter(
                    name="group_input",
                    json_type="object",
                    description=f"{{schema_version: '{GROUP_INPUT_SCHEMA}', group_type in {list(GROUP_TYPES)}, "
                    "records: [{record_id, outcome_score, is_correct, score, "
                    "evidence: {process: {status, dimensions}}}]}",
                ),
            ),
            returns=f"{{schema_version: '{GROUP_OUTPUT_SCHEMA}', rewards: [{{record_id, reward in [0, 1]}}] for "
            f"every input record, decision in {list(GROUP_DECISIONS)}, signals: [str], reason: str}}",
            required=False,
        ),
    ),
    allowed_imports=("json", "math", "re"),
    constraints=(
        "Rewards stay in [0, 1] and are finite; outcome_score is returned unchanged.",
        "Group credit is deterministic within a prompt group and covers every record exactly once.",
        "Unavailable evidence is explicit (e.g. artifact_projection = null), never omitted.",
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
"""Generic reference: the reward is the verified outcome; no shaping, no redistribution."""


def compute_score(question_prompt, response_content, extracted_answer, outcome_score,
                  response_length_tokens, max_response_length_tokens):
    return {{
        "schema_version": "{REWARD_RESULT_SCHEMA}",
        "score": float(outcome_score),
        "outcome_score": outcome_score,
        "artifact_projection": None,
        "rule_evidence": [],
    }}


def assign_group_credit(group_input):
    records = group_input["records"]
    return {{
        "schema_version": "{GROUP_OUTPUT_SCHEMA}",
        "rewards": [{{"record_id": r["record_id"], "reward": float(r["outcome_score"])}} for r in records],
        "decision": "identity",
        "signals": ["outcome"],
        "reason": "outcome_only",
    }}
'''

REFERENCE = ReferenceStrategy(
    source=_REFERENCE_SOURCE,
    account="R(x, y) = O(x, y): the externally verified outcome, unchanged at row and group level (Appendix D.3).",
)


def _unit_interval(value: Any) -> bool:
    return (
        isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and 0.0 <= value <= 1.0
    )


def validate_reward_result(output: Any, arguments: dict[str, Any]) -> OutputValidation:
    """One row's reward record: exact keys, schema version, bounded score, unchanged outcome."""
    keys = {"schema_version", "score", "outcome_score", "artifact_projection", "rule_evidence"}
    if not isinstance(output, dict):
        return OutputValidation(ok=False, errors=(f"expected an object, got {type(output).__name__}",))
    errors = []
    if set(output) != keys:
        errors.append(
            f"keys must be {sorted(keys)}; missing {sorted(keys - set(output))}, extra {sorted(set(output) - keys)}"
        )
    if output.get("schema_version") != REWARD_RESULT_SCHEMA:
        errors.append(f"schema_version must be {REWARD_RESULT_SCHEMA!r}, got {output.get('schema_version')!r}")
    if not _unit_interval(output.get("score")):
        errors.append(f"score must be a finite number in [0, 1], got {output.get('score')!r}")
    if output.get("outcome_score") != arguments["outcome_score"]:
        errors.append(
            f"outcome_score must be returned unchanged ({arguments['outcome_score']!r}), "
            f"got {output.get('outcome_score')!r}"
        )
    if output.get("artifact_projection") is not None and not isinstance(output.get("artifact_projection"), dict):
        errors.append(f"artifact_projection must be an object or null, got {output.get('artifact_projection')!r}")
    if not isinstance(output.get("rule_evidence"), list):
        errors.append(f"rule_evidence must be a list, got {output.get('rule_evidence')!r}")
    if errors:
        return OutputValidation(ok=False, errors=tuple(errors))
    return OutputValidation(
        ok=True,
        canonical=output,
        statistics={"score": float(output["score"]), "shaped": float(output["score"] != arguments["outcome_score"])},
    )


def validate_group_credit(output: Any, group_input: dict[str, Any]) -> OutputValidation:
    """One group's credit: every record exactly once, bounded rewards, a known decision."""
    if not isinstance(output, dict):
        return OutputValidation(ok=False, errors=(f"expected an object, got {type(output).__name__}",))
    errors = []
    if output.get("schema_version") != GROUP_OUTPUT_SCHEMA:
        errors.append(f"schema_version must be {GROUP_OUTPUT_SCHEMA!r}, got {output.get('schema_version')!r}")
    if output.get("decision") not in GROUP_DECISIONS:
        errors.append(f"decision must be one of {list(GROUP_DECISIONS)}, got {output.get('decision')!r}")
    rewards = output.get("rewards")
    expected = [r["record_id"] for r in group_input["records"]]
    if not isinstance(rewards, list) or not all(isinstance(r, dict) for r in rewards):
        errors.append(f"rewards must be a list of {{record_id, reward}} objects, got {rewards!r:.200}")
    else:
        got = [r.get("record_id") for r in rewards]
        if sorted(map(str, got)) != sorted(map(str, expected)) or len(set(map(str, got))) != len(got):
            errors.append(f"rewards must cover records {expected} exactly once, got {got}")
        bad = [r for r in rewards if not _unit_interval(r.get("reward"))]
        if bad:
            errors.append(f"rewards must be finite numbers in [0, 1], got {bad[:5]}")
    if not isinstance(output.get("signals", []), list) or not isinstance(output.get("reason", ""), str):
        errors.append("signals must be a list of strings and reason a string")
    if errors:
        return OutputValidation(ok=False, errors=tuple(errors))
    by_id = {r["record_id"]: float(r["reward"]) for r in rewards}
    canonical = {**output, "rewards": [{"record_id": rid, "reward": by_id[rid]} for rid in expected]}
    return OutputValidation(ok=True, canonical=canonical, statistics={"decision_" + output["decision"]: 1})


def bind_reward_module(source: str) -> Intervention:
    """The Engine imports the admitted module itself (inside the sandbox) as the reward."""
    digest = hashlib.sha256(source.encode("utf-8")).hexdigest()
    return Intervention(
        kind="reward_module",
        payload={"source": source, "source_sha256": digest},
        summary=f"reward module {digest[:12]}",
    )


def development_inputs() -> TaskInputs:
    """Six scored rows and two groups (mixed, all wrong) with process evidence."""
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
            entry_point="compute_score",
            arguments={
                "question_prompt": q,
                "response_content": r,
                "extracted_answer": a,
                "outcome_score": o,
                "response_length_tokens": n,
                "max_response_length_tokens": 64,
            },
        )
        for q, r, a, o, n in rows
    ]

    def record(rid: str, outcome: float, dims: tuple[float, float, float]) -> dict[str, Any]:
        names = ("conclusion_support", "derivation_soundness", "substantive_relevance")
        return {
            "record_id": rid,
            "outcome_score": outcome,
            "is_correct": outcome == 1.0,
            "score": outcome,
            "evidence": {"process": {"status": "available", "dimensions": dict(zip(names, dims, strict=True))}},
        }

    groups = [
        {
            "schema_version": GROUP_INPUT_SCHEMA,
            "group_type": "mixed",
            "records": [
                record("g0-r0", 1.0, (1, 1, 1)),
                record("g0-r1", 0.0, (0.5, 0, 1)),
                record("g0-r2", 1.0, (0.5, 1, 1)),
                record("g0-r3", 0.0, (0, 0, 0.5)),
            ],
        },
        {
            "schema_version": GROUP_INPUT_SCHEMA,
            "group_type": "all_wrong",
            "records": [record("g1-r0", 0.0, (1, 1, 1)), record("g1-r1", 0.0, (0, 0.5, 1))],
        },
    ]
    calls += [StrategyCall(entry_point="assign_group_credit", arguments={"group_input": g}) for g in groups]
    return TaskInputs(calls=tuple(calls), description="six synthetic rollouts and two rollout groups")
