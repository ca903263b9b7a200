"""One judge core for every task: rubrics, providers, batching, cache, call records (public API).

``await judge(requests)`` in a strategy takes one list of ``{question, response, rubric}``
requests and gets one answer per request: ``{status: "completed", scores_by_dimension,
projected_score, fallback: false}`` or ``{status: "unavailable", reason, fallback: true,
fallback_reason}`` — never a zero for a judge that could not answer. A malformed request is the
strategy's error: the call is refused with ``invalid_service_request: <field>: <fix>`` and the run
fails (see docs/judge.md).
"""

from __future__ import annotations

from ade_core.judging.answers import COMPLETED, UNAVAILABLE, completed, unavailable
from ade_core.judging.core import AnswerCache, DisabledProvider, Judge, JudgeCall, Provider, parse_requests
from ade_core.judging.offline import (
    DETECTORS,
    OfflineProvider,
    detect_conclusion_support,
    detect_derivation_soundness,
    detect_substantive_relevance,
    detector_for,
)
from ade_core.judging.openai_provider import JudgeEndpoint, OpenAIProvider, read_scores, render_messages
from ade_core.judging.process import (
    PROCESS_DESCRIPTION,
    PROCESS_DIMENSIONS,
    PROCESS_EVIDENCE_SCHEMA,
    PROCESS_LEVELS,
    PROCESS_RUBRIC,
    PROCESS_SERVICE,
    PROCESS_SIGNATURE,
    ProcessJudge,
    process_evidence,
    process_judge,
    process_judge_service,
)
from ade_core.judging.rubric import Dimension, JudgeRequest, Rubric, parse_request, parse_rubric
from ade_core.judging.service import DISABLED_REASON, judge_provider, judge_service
from ade_sandbox import InvalidServiceRequest

__all__ = [
    "COMPLETED",
    "DETECTORS",
    "DISABLED_REASON",
    "UNAVAILABLE",
    "AnswerCache",
    "Dimension",
    "DisabledProvider",
    "InvalidServiceRequest",
    "Judge",
    "JudgeCall",
    "JudgeEndpoint",
    "JudgeRequest",
    "OfflineProvider",
    "OpenAIProvider",
    "PROCESS_DESCRIPTION",
    "PROCESS_DIMENSIONS",
    "PROCESS_EVIDENCE_SCHEMA",
    "PROCESS_LEVELS",
    "PROCESS_RUBRIC",
    "PROCESS_SERVICE",
    "PROCESS_SIGNATURE",
    "ProcessJudge",
    "Provider",
    "Rubric",
    "completed",
    "detect_conclusion_support",
    "detect_derivation_soundness",
    "detect_substantive_relevance",
    "detector_for",
    "judge_provider",
    "judge_service",
    "parse_request",
    "parse_requests",
    "parse_rubric",
    "process_evidence",
    "process_judge",
    "process_judge_service",
    "read_scores",
    "render_messages",
    "unavailable",
]
