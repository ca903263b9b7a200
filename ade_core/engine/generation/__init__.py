"""Sampling k responses per prompt from the target model, on whichever backend the host offers.

``make_generator("hf", path)`` runs anywhere (CPU included), ``"vllm"`` needs the ``gpu``
extra, and ``"openai"`` talks to an already running OpenAI-compatible server. The Engine loads
the backend 𝓑 names ([engine.generation].backend) with :func:`load_generator`. Backends are
imported on first use, so importing this package never loads torch or vLLM.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

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

if TYPE_CHECKING:
    from ade_core.schemas.config import ExperimentConfig, GenerationSettings

BACKENDS = ("hf", "vllm", "openai")

__all__ = [
    "BACKENDS",
    "Conversation",
    "FinishReason",
    "GenerationError",
    "Generator",
    "Sample",
    "SamplingParams",
    "load_generator",
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


def load_generator(checkpoint: Path, config: ExperimentConfig, server: GenerationSettings | None = None) -> Generator:
    """The generator of 𝓑's [engine.generation].backend for ``checkpoint``; ``server`` is
    [operational.generation], where an ``"openai"`` backend's server is.

    The ``"openai"`` backend renders prompts with the checkpoint's own tokenizer, so the server sees
    exactly the text the model was trained on, and asks for the model named by the checkpoint's
    absolute path: a checkpoint is only ever scored by a server that serves that very directory.
    """
    backend = config.engine.generation.backend
    template = config.model.chat_template_kwargs
    if backend != "openai":
        return make_generator(backend, checkpoint, chat_template_kwargs=template)
    from ade_core.judging.openai_provider import LOCAL_SERVER_KEY

    if server is None or server.base_url is None:
        raise GenerationError(
            "[engine.generation].backend = 'openai' needs the server's API root in [operational.generation].base_url, "
            "e.g. 'http://127.0.0.1:8000/v1'"
        )
    return make_generator(
        "openai",
        str(Path(checkpoint).resolve()),
        base_url=server.base_url,
        api_key=os.environ.get(server.api_key_env) or LOCAL_SERVER_KEY,
        timeout=server.timeout_s,
        max_concurrency=server.max_concurrency,
        retries=server.max_retries,
        tokenizer_path=checkpoint,
        chat_template_kwargs=template,
    )
