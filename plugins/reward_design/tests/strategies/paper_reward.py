"""A reward written only from the paper's contract: outcome row reward, sibling-corroborated group credit.

All-wrong groups are shaped by process quality when at least half of the siblings are fully
eligible (process evidence available); in mixed groups quality is centred within the correct and
within the incorrect responses, so correct ones stay above incorrect ones.
"""

DIMENSIONS = ("conclusion_support", "derivation_soundness", "substantive_relevance")


def _result(outcome_score):
    return {
        "schema_version": "ade.reward_result.v2",
        "score": float(outcome_score),
        "outcome_score": outcome_score,
        "artifact_projection": None,
        "rule_evidence": {"status": "not_configured", "value": None},
    }


async def compute_score(
    question_prompt,
    response_content,
    extracted_answer,
    outcome_score,
    response_length_tokens,
    max_response_length_tokens,
):
    return _result(outcome_score)


def compute_fallback_score(
    question_prompt,
    response_content,
    extracted_answer,
    outcome_score,
    response_length_tokens,
    max_response_length_tokens,
):
    return _result(outcome_score)


def _quality(record):
    process = record["evidence"]["process"]
    if process["status"] != "available":
        return None
    return sum(process["dimensions"][d] for d in DIMENSIONS) / len(DIMENSIONS)


def _identity(records, mode, reason):
    return {
        "schema_version": "ade.group_credit_output.v2",
        "decision": {"mode": mode, "evidence_sources": ["outcome"], "process_dimensions": [], "reason_code": reason},
        "assignments": [{"record_id": r["record_id"], "training_reward": float(r["outcome_score"])} for r in records],
    }


def assign_group_credit(group_input):
    records = group_input["records"]
    quality = {r["record_id"]: _quality(r) for r in records}
    eligible = [rid for rid, q in quality.items() if q is not None]
    if group_input["group_type"] == "all_correct":
        return _identity(records, "identity", "all_correct_outcome")
    if 2 * len(eligible) < len(records):
        return _identity(records, "abstained", "too_few_eligible_siblings")
    assignments = []
    if group_input["group_type"] == "all_wrong":
        for r in records:
            q = quality[r["record_id"]]
            assignments.append({"record_id": r["record_id"], "training_reward": 0.0 if q is None else 0.2 * q})
    else:
        for correct in (True, False):
            members = [r for r in records if r["is_correct"] == correct]
            known = [quality[r["record_id"]] for r in members if quality[r["record_id"]] is not None]
            mean = sum(known) / len(known) if known else 0.0
            for r in members:
                q = quality[r["record_id"]]
                shift = 0.0 if q is None else 0.1 * (q - mean)
                base = 0.9 if correct else 0.05
                assignments.append({"record_id": r["record_id"], "training_reward": min(1.0, max(0.0, base + shift))})
    return {
        "schema_version": "ade.group_credit_output.v2",
        "decision": {
            "mode": "shaped",
            "evidence_sources": ["outcome", "process"],
            "process_dimensions": sorted(DIMENSIONS),
            "reason_code": "sibling_corroborated_process",
        },
        "assignments": assignments,
    }
