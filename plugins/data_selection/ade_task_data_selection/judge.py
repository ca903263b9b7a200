"""The Judge service of Data Selection: a thin wrapper over the judge core, ``ade_core.judging``.

A selector awaits ``judge(requests)`` with one list of ``{question, response, rubric}`` requests
and gets one answer per request: ``completed`` with per-dimension scores on the rubric's own levels
and their weighted sum, or ``unavailable`` with a reason. The answer is evidence, not a selection
decision (paper: Data Selection with Judge enrichment). Rubrics, providers, the cache, quotas and
the refusal of malformed requests are the core's; this module only names the service.
"""

from __future__ import annotations

from typing import Any

from ade_core import JUDGE_DISABLED_REASON as DISABLED_REASON
from ade_core import Judge, Rubric, ServiceSpec
from ade_core import OfflineJudgeProvider as OfflineProvider
from ade_core import judge_service as core_service

__all__ = ["DISABLED_REASON", "OfflineJudge", "Rubric", "judge_service"]

DESCRIPTION = (
    "Scores each {question, response, rubric} request per rubric dimension on the rubric's levels, with their "
    "weighted sum (status 'completed'); 'unavailable' answers carry a reason and no score; a malformed request "
    "is refused with invalid_service_request: <field>: <fix> and fails the run."
)


def OfflineJudge(error_rate: float, seed: int) -> Any:  # noqa: N802 - kept for callers of the former class
    """The core's judge over the offline provider (what ``[judge] provider = "offline"`` serves)."""
    return Judge(OfflineProvider(error_rate, seed))


def judge_service(config: Any) -> ServiceSpec:
    """The ``judge`` service of an experiment (an ``ExperimentConfig``), from its ``[judge]`` table."""
    return core_service(config.judge, name="judge", description=DESCRIPTION)
