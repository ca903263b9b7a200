"""Sampling k responses per prompt from the target model, on whichever backend the host offers.

``make_generator("hf", path)`` runs anywhere (CPU included), ``"vllm"`` needs the ``gpu``
extra, and ``"openai"`` talks to an already running OpenAI-compatible server. Backends are
imported on first use, so importing this package never loads torch or vLLM.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ade_core.engine.generation.base import (
    Conversation,
    FinishReason,
    GenerationError,
    Generator,
    Sample,
    SamplingParams,
    render_conversation,
)
from ade_core.errors import did_you_mean

BACKENDS = ("hf", "vllm", "openai")

__all__ = [
    "BACKENDS",
    "Conversation",
    "FinishReason",
    "GenerationError",
    "Generator",
    "Sample",
    "SamplingParams",
    "make_generator",
    "render_conversation",
]


def make_generator(backend: str, model_path: str | Path, **options: Any) -> Generator:
    """Load a generator for ``model_path`` on ``backend``; ``options`` go to the backend's constructor.

    For ``"openai"``, ``model_path`` is the model name the server serves and ``base_url`` is
    required, e.g. ``make_generator("openai", "tiny", base_url="http://127.0.0.1:8000/v1")``.
    """
    if backend == "hf":
        from ade_core.engine.generation.hf import HFGenerator

        return HFGenerator(model_path, **options)
    if backend == "vllm":
        from ade_core.engine.generation.vllm import VLLMGenerator

        return VLLMGenerator(model_path, **options)
    if backend == "openai":
        from ade_core.engine.generation.openai_compat import OpenAIGenerator

        base_url = options.pop("base_url", None)
        if not base_url:
            raise ValueError(
                "backend 'openai' needs base_url, the server's API root, e.g. "
                "make_generator('openai', 'my-model', base_url='http://127.0.0.1:8000/v1')"
            )
        return OpenAIGenerator(base_url, str(model_path), **options)
    raise ValueError(f"unknown generation backend {backend!r}{did_you_mean(backend, BACKENDS)}; known: {BACKENDS}")
