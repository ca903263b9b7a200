"""The prompt of 𝓑: one rendering for training rollouts and every evaluation (paper Appendix D.5)."""

from __future__ import annotations

from ade_core.schemas.config import ExperimentConfig


def conversation(config: ExperimentConfig, problem: str) -> list[dict[str, str]]:
    """System instruction (when configured) and the problem in the configured template."""
    messages = []
    if config.evaluation.system_prompt:
        messages.append({"role": "system", "content": config.evaluation.system_prompt})
    messages.append({"role": "user", "content": config.evaluation.prompt_template.replace("{problem}", problem)})
    return messages
