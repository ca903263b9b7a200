"""A task's judge service from 𝓑's ``[judge]`` table: the provider, the quotas, the ``ServiceSpec``.

Every task's judge goes through here (Data Selection's ``judge``; Curriculum's ``judge_batch`` and
Reward Design's process judge are meant to as well), so one config means one judge.
"""

from __future__ import annotations

from pathlib import Path

from ade_core.judging.core import AnswerCache, DisabledProvider, Judge, Provider
from ade_core.judging.offline import OfflineProvider
from ade_core.judging.openai_provider import JudgeEndpoint, OpenAIProvider
from ade_core.schemas.config import JudgeConfig
from ade_core.specs import ServiceSpec

DISABLED_REASON = "judge enrichment is disabled in this experiment ([judge].enabled = false)"


def judge_provider(settings: JudgeConfig, endpoint: JudgeEndpoint | None = None) -> Provider:
    """The provider ``[judge]`` names (a disabled judge answers every request ``unavailable``)."""
    if not settings.enabled:
        return DisabledProvider(DISABLED_REASON)
    if settings.provider == "offline":
        return OfflineProvider(settings.error_rate, settings.seed)
    assert settings.model is not None  # JudgeConfig requires it for 'openai'
    return OpenAIProvider(
        settings.model,
        temperature=settings.temperature,
        max_tokens=settings.max_tokens,
        attempts=settings.attempts,
        enable_thinking=settings.enable_thinking,
        endpoint=endpoint,
    )


def judge_service(
    settings: JudgeConfig,
    *,
    name: str = "judge",
    description: str,
    endpoint: JudgeEndpoint | None = None,
    cache_dir: str | Path | None = None,
) -> ServiceSpec:
    """The judge as a service a strategy awaits under ``name``, with ``[judge]``'s quotas."""
    handler = Judge(judge_provider(settings, endpoint), AnswerCache(cache_dir))
    return ServiceSpec(
        name=name,
        description=description,
        essential=settings.enabled,
        max_calls=settings.max_calls,
        max_items_per_call=settings.max_items_per_call,
        handler=handler,
    )
