"""Process evidence for Reward Design: ``llm_judge(question_prompt, response_content)``.

A thin wrapper over the judge core: one request with a fixed process rubric we wrote (three
dimensions, levels 0 / 0.5 / 1), asked through the same ``Judge`` (provider, cache, call record)
as every other task's judge. The answer is ``ade.process_evidence.v1``::

    {"status": "available", "schema_version": "ade.process_evidence.v1",
     "dimensions": {"conclusion_support": 1.0, "derivation_soundness": 0.5, "substantive_relevance": 1.0}}

or ``{"status": "unavailable", "schema_version": ..., "dimensions": None, "reason": ...}``; after an
unavailable answer the Engine scores that row with the reward's fallback. The reward module
gets ``llm_judge`` as a global (the paper's six-parameter signatures stay exact).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ade_core.judging.answers import COMPLETED
from ade_core.judging.core import AnswerCache, Judge
from ade_core.judging.openai_provider import JudgeEndpoint
from ade_core.judging.rubric import parse_rubric
from ade_core.judging.service import judge_provider
from ade_core.schemas.config import JudgeConfig
from ade_core.specs import ServiceSpec
from ade_sandbox import InvalidServiceRequest

PROCESS_EVIDENCE_SCHEMA = "ade.process_evidence.v1"
PROCESS_SERVICE = "llm_judge"
PROCESS_SIGNATURE = ("question_prompt", "response_content")
PROCESS_DIMENSIONS = ("conclusion_support", "derivation_soundness", "substantive_relevance")
PROCESS_LEVELS = (0.0, 0.5, 1.0)
PROCESS_DESCRIPTION = (
    "await llm_judge(question_prompt, response_content) -> {status: 'available', schema_version: "
    f"'{PROCESS_EVIDENCE_SCHEMA}', dimensions: {{{', '.join(PROCESS_DIMENSIONS)}}} each in {{0, 0.5, 1}}}} or "
    "{status: 'unavailable', dimensions: null, reason}; a module global, not a parameter"
)

_CRITERIA = {
    "conclusion_support": (
        "Does the final answer follow from the last step of the working?",
        (
            "the final answer is missing or contradicts the working",
            "the answer is stated but only partly follows from the working",
            "the final answer is exactly what the last step of the working yields",
        ),
    ),
    "derivation_soundness": (
        "Is each step of the working valid arithmetic or algebra, as re-derived from the step before it?",
        (
            "most steps are invalid or there is no working",
            "some steps are valid and some are not",
            "every step checked is valid",
        ),
    ),
    "substantive_relevance": (
        "Does the working operate on the quantities the question gives, rather than on unrelated material?",
        (
            "the working ignores the question's quantities",
            "the working uses some of the question's quantities",
            "the working uses the question's quantities throughout",
        ),
    ),
}

# The paper authors' projection shape: id, criterion, weight, score levels with their standards.
PROCESS_RUBRIC: dict[str, Any] = {
    "projection": {
        "dimensions": [
            {
                "id": name,
                "criterion": criterion,
                "weight": 1 / len(PROCESS_DIMENSIONS),
                "score_levels": [
                    {"value": value, "standard": standard}
                    for value, standard in zip(PROCESS_LEVELS, standards, strict=True)
                ],
            }
            for name, (criterion, standards) in _CRITERIA.items()
        ]
    }
}
parse_rubric(PROCESS_RUBRIC)  # the fixed rubric is valid, checked at import


def process_evidence(answer: dict[str, Any]) -> dict[str, Any]:
    """A judge-core answer to the process rubric as ``ade.process_evidence.v1``."""
    if answer.get("status") == COMPLETED:
        scores = answer["scores_by_dimension"]
        return {
            "status": "available",
            "schema_version": PROCESS_EVIDENCE_SCHEMA,
            "dimensions": {name: float(scores[name]) for name in PROCESS_DIMENSIONS},
        }
    return {
        "status": "unavailable",
        "schema_version": PROCESS_EVIDENCE_SCHEMA,
        "dimensions": None,
        "reason": str(answer.get("reason") or "the judge gave no answer"),
    }


class ProcessJudge:
    """``llm_judge``'s handler: one ``{question_prompt, response_content}`` object in, evidence out."""

    def __init__(self, judge: Judge) -> None:
        self.judge = judge

    def __call__(self, request: Any) -> dict[str, Any]:
        return self.batch([request])[0]

    def batch(self, requests: list[Any]) -> list[dict[str, Any]]:
        """Evidence for many rollouts in one judge call (the Engine's path when group credit is on)."""
        asked = []
        for index, request in enumerate(requests):
            where = "arguments" if len(requests) == 1 else f"requests[{index}]"
            if not isinstance(request, dict) or sorted(request) != sorted(PROCESS_SIGNATURE):
                raise InvalidServiceRequest(where, f"llm_judge takes exactly ({', '.join(PROCESS_SIGNATURE)})")
            for name in PROCESS_SIGNATURE:
                if not isinstance(request[name], str):
                    got = type(request[name]).__name__
                    raise InvalidServiceRequest(f"{name}", f"must be a string (got {got}); pass the text itself")
            asked.append(
                {
                    "question": request["question_prompt"],
                    "response": request["response_content"],
                    "rubric": PROCESS_RUBRIC,
                }
            )
        return [process_evidence(answer) for answer in self.judge(asked)]


def process_judge(
    settings: JudgeConfig, *, endpoint: JudgeEndpoint | None = None, cache_dir: str | Path | None = None
) -> ProcessJudge:
    """The process judge ``[judge]`` configures (disabled: every answer unavailable)."""
    return ProcessJudge(Judge(judge_provider(settings, endpoint), AnswerCache(cache_dir)))


def process_judge_service(
    settings: JudgeConfig,
    *,
    max_calls: int,
    endpoint: JudgeEndpoint | None = None,
    cache_dir: str | Path | None = None,
    handler: ProcessJudge | None = None,
) -> ServiceSpec:
    """``llm_judge`` as a module service; ``max_calls`` is one per scored row the run may make."""
    return ServiceSpec(
        name=PROCESS_SERVICE,
        description=PROCESS_DESCRIPTION,
        essential=settings.enabled,
        max_calls=max_calls,
        max_items_per_call=len(PROCESS_SIGNATURE),
        handler=handler or process_judge(settings, endpoint=endpoint, cache_dir=cache_dir),
        signature=PROCESS_SIGNATURE,
    )
