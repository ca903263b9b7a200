"""A process-shaped row reward: one llm_judge call per row, the outcome kept as the main signal."""


async def compute_score(
    question_prompt,
    response_content,
    extracted_answer,
    outcome_score,
    response_length_tokens,
    max_response_length_tokens,
):
    evidence = await llm_judge(question_prompt, response_content)
    if evidence["status"] != "available":  # the Engine scores this row with the fallback anyway
        return compute_fallback_score(
            question_prompt,
            response_content,
            extracted_answer,
            outcome_score,
            response_length_tokens,
            max_response_length_tokens,
        )
    quality = sum(evidence["dimensions"].values()) / 3
    return {
        "schema_version": "ade.reward_result.v2",
        "score": 0.8 * outcome_score + 0.2 * quality,
        "outcome_score": outcome_score,
        "artifact_projection": quality,
        "rule_evidence": {"status": "not_configured", "value": None},
    }


def compute_fallback_score(
    question_prompt,
    response_content,
    extracted_answer,
    outcome_score,
    response_length_tokens,
    max_response_length_tokens,
):
    return {
        "schema_version": "ade.reward_result.v2",
        "score": float(outcome_score),
        "outcome_score": outcome_score,
        "artifact_projection": None,
        "rule_evidence": {"status": "not_configured", "value": None},
    }
