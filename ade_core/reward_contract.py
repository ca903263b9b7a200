"""The paper's reward contract (Reward Design, and the Engine that trains a reward): JSON Schemas, then rules.

``compute_score`` and ``compute_fallback_score`` return ``ade.reward_result.v2``;
``assign_group_credit`` takes ``ade.group_credit_input.v3`` and returns
``ade.group_credit_output.v2``. A schema fixes the shape (exact keys, types, bounds; a bool is
not a number); the rules below it are what a schema cannot say: the outcome is returned
unchanged, the fallback pays the outcome, ``identity``/``abstained`` credit equals the outcomes,
every record is assigned exactly once, the lists are sorted.
"""

from __future__ import annotations

import math
from typing import Any

import jsonschema

from ade_core.judging.process import PROCESS_DIMENSIONS, PROCESS_EVIDENCE_SCHEMA
from ade_core.specs import OutputValidation

REWARD_RESULT_SCHEMA = "ade.reward_result.v2"
GROUP_INPUT_SCHEMA = "ade.group_credit_input.v3"
GROUP_OUTPUT_SCHEMA = "ade.group_credit_output.v2"
GROUP_TYPES = ("all_wrong", "mixed", "all_correct")
MODES = ("identity", "abstained", "shaped")
EVIDENCE_SOURCES = ("outcome", "process", "rule_based", "response_length")
ROW_PARAMETERS = (
    "question_prompt",
    "response_content",
    "extracted_answer",
    "outcome_score",
    "response_length_tokens",
    "max_response_length_tokens",
)

_UNIT = {"type": "number", "minimum": 0, "maximum": 1}

REWARD_RESULT = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": REWARD_RESULT_SCHEMA,
    "type": "object",
    "additionalProperties": False,
    "required": ["schema_version", "score", "outcome_score", "artifact_projection", "rule_evidence"],
    "properties": {
        "schema_version": {"const": REWARD_RESULT_SCHEMA},
        "score": _UNIT,
        "outcome_score": {"type": "number"},
        "artifact_projection": {"oneOf": [{"type": "null"}, _UNIT]},
        "rule_evidence": {
            "oneOf": [
                {
                    "type": "object",
                    "additionalProperties": False,
                    "required": ["status", "value"],
                    "properties": {"status": {"const": "available"}, "value": _UNIT},
                },
                {
                    "type": "object",
                    "additionalProperties": False,
                    "required": ["status", "value"],
                    "properties": {"status": {"const": "not_configured"}, "value": {"type": "null"}},
                },
            ]
        },
    },
}

GROUP_OUTPUT = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": GROUP_OUTPUT_SCHEMA,
    "type": "object",
    "additionalProperties": False,
    "required": ["schema_version", "decision", "assignments"],
    "properties": {
        "schema_version": {"const": GROUP_OUTPUT_SCHEMA},
        "decision": {
            "type": "object",
            "additionalProperties": False,
            "required": ["mode", "evidence_sources", "process_dimensions", "reason_code"],
            "properties": {
                "mode": {"enum": list(MODES)},
                "evidence_sources": {
                    "type": "array",
                    "minItems": 1,
                    "uniqueItems": True,
                    "items": {"enum": list(EVIDENCE_SOURCES)},
                },
                "process_dimensions": {
                    "type": "array",
                    "uniqueItems": True,
                    "items": {"enum": list(PROCESS_DIMENSIONS)},
                },
                "reason_code": {"type": "string", "pattern": "^[a-z][a-z0-9_]*$", "maxLength": 64},
            },
        },
        "assignments": {
            "type": "array",
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["record_id", "training_reward"],
                "properties": {"record_id": {"type": "integer", "minimum": 0}, "training_reward": _UNIT},
            },
        },
    },
}

_VALIDATORS = {
    name: jsonschema.Draft202012Validator(schema)
    for name, schema in ((REWARD_RESULT_SCHEMA, REWARD_RESULT), (GROUP_OUTPUT_SCHEMA, GROUP_OUTPUT))
}


def _schema_errors(schema: str, output: Any) -> list[str]:
    """Every violation of the declared schema, each naming where it is and what was found."""
    errors = sorted(_VALIDATORS[schema].iter_errors(output), key=lambda e: list(e.absolute_path))
    found = []
    for error in errors[:8]:
        where = "/".join(str(p) for p in error.absolute_path) or "(the output)"
        found.append(f"{schema} {where}: {error.message[:300]}")
    return found


def _nonfinite(value: Any, path: str = "") -> list[str]:
    """Paths of NaN / infinite numbers (a schema's bounds do not catch NaN)."""
    if isinstance(value, float) and not math.isfinite(value):
        return [path or "(the output)"]
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in _nonfinite(v, f"{path}/{k}" if path else str(k))]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in _nonfinite(v, f"{path}/{i}" if path else str(i))]
    return []


def _invalid(errors: list[str]) -> OutputValidation:
    return OutputValidation(ok=False, errors=tuple(errors))


def validate_reward_result(output: Any, arguments: dict[str, Any], *, fallback: bool = False) -> OutputValidation:
    """One row's ``ade.reward_result.v2``: the schema, finite numbers, the outcome unchanged; the
    fallback also returns no projection and a score equal to the outcome."""
    errors = _schema_errors(REWARD_RESULT_SCHEMA, output)
    errors += [f"{REWARD_RESULT_SCHEMA} {p}: must be a finite number" for p in _nonfinite(output)]
    if errors:
        return _invalid(errors)
    outcome = arguments["outcome_score"]
    if output["outcome_score"] != outcome:
        errors.append(f"outcome_score must be returned unchanged ({outcome!r}), got {output['outcome_score']!r}")
    if fallback and (output["artifact_projection"] is not None or output["score"] != outcome):
        errors.append(
            "compute_fallback_score must return artifact_projection = null and score = outcome_score "
            f"({outcome!r}); got score {output['score']!r}, projection {output['artifact_projection']!r}"
        )
    if errors:
        return _invalid(errors)
    return OutputValidation(
        ok=True,
        canonical=output,
        statistics={
            "score": float(output["score"]),
            "shaped": float(output["score"] != outcome),
            "projected": float(output["artifact_projection"] is not None),
        },
    )


def validate_group_credit(output: Any, group_input: dict[str, Any]) -> OutputValidation:
    """One group's ``ade.group_credit_output.v2``: the schema, then every record assigned exactly
    once, sorted source lists, process dimensions exactly when process is a source, and identity or
    abstained credit equal to the outcomes. The canonical form lists assignments by record id."""
    errors = _schema_errors(GROUP_OUTPUT_SCHEMA, output)
    errors += [f"{GROUP_OUTPUT_SCHEMA} {p}: must be a finite number" for p in _nonfinite(output)]
    if errors:
        return _invalid(errors)
    decision, assignments = output["decision"], output["assignments"]
    outcomes = {r["record_id"]: r["outcome_score"] for r in group_input["records"]}
    got = [a["record_id"] for a in assignments]
    if sorted(got) != sorted(outcomes):
        errors.append(f"assignments must cover record_id {sorted(outcomes)} exactly once, got {got}")
    for key in ("evidence_sources", "process_dimensions"):
        if decision[key] != sorted(decision[key]):
            errors.append(f"decision.{key} must be sorted: {sorted(decision[key])}, got {decision[key]}")
    if ("process" in decision["evidence_sources"]) != bool(decision["process_dimensions"]):
        errors.append(
            "decision.process_dimensions must be non-empty exactly when 'process' is among evidence_sources "
            f"(sources {decision['evidence_sources']}, dimensions {decision['process_dimensions']})"
        )
    if not errors and decision["mode"] in ("identity", "abstained"):
        changed = sorted(a["record_id"] for a in assignments if a["training_reward"] != outcomes[a["record_id"]])
        if changed:
            errors.append(
                f"mode {decision['mode']!r} must assign each record its outcome_score; records {changed} differ "
                "(use mode 'shaped' to change credit)"
            )
    if errors:
        return _invalid(errors)
    ordered = sorted(assignments, key=lambda a: a["record_id"])
    shaped = sum(a["training_reward"] != outcomes[a["record_id"]] for a in ordered)
    return OutputValidation(
        ok=True,
        canonical={**output, "assignments": ordered},
        statistics={f"mode_{decision['mode']}": 1, "shaped_records": shaped},
    )


def group_type(outcomes: list[float]) -> str:
    """``all_correct``, ``all_wrong`` or ``mixed``, from the verified outcomes of a group."""
    correct = [o == 1.0 for o in outcomes]
    return "all_correct" if all(correct) else ("all_wrong" if not any(correct) else "mixed")


def not_configured_process() -> dict[str, Any]:
    return {"status": "not_configured", "schema_version": PROCESS_EVIDENCE_SCHEMA, "dimensions": None}


def group_input(rows: list[dict[str, Any]], max_length: int) -> dict[str, Any]:
    """``ade.group_credit_input.v3`` for one prompt group.

    Each row: ``outcome_score``, ``pre_group_reward``, ``process`` (evidence or None for not
    configured), ``rule_evidence`` (the row reward's, or None), ``response_length_tokens``."""
    records = []
    for record_id, row in enumerate(rows):
        rule = row.get("rule_evidence") or {"status": "not_configured", "value": None}
        records.append(
            {
                "record_id": record_id,
                "is_correct": row["outcome_score"] == 1.0,
                "outcome_score": row["outcome_score"],
                "pre_group_reward": row["pre_group_reward"],
                "evidence": {
                    "outcome": {"status": "authoritative", "value": row["outcome_score"]},
                    "process": row.get("process") or not_configured_process(),
                    "rule_based": {"status": rule["status"], "value": rule["value"]},
                    "response_length": {
                        "status": "authoritative",
                        "value": row["response_length_tokens"],
                        "maximum": max_length,
                    },
                },
            }
        )
    return {
        "schema_version": GROUP_INPUT_SCHEMA,
        "group_type": group_type([r["outcome_score"] for r in rows]),
        "records": records,
    }
