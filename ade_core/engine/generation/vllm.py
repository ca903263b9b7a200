"""Generation with vLLM on GPUs (optional ``gpu`` extra); the argument builders work without it.

The builders are separate from :class:`VLLMGenerator` so the exact engine and sampling
arguments can be checked, and recorded, on machines without a GPU.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ade_core.engine.generation.base import (
    Conversation,
    FinishReason,
    Sample,
    SamplingParams,
    render_conversation,
    strip_suffix,
)
from ade_core.engine.grading.math import MissingDependencyError

# The vLLM releases TRL's GRPO integration accepts; pyproject's `gpu` extra pins the same range.
VLLM_RANGE = ">=0.22,<=0.31"


def vllm_engine_args(
    model_path: str | Path,
    *,
    tensor_parallel_size: int,
    dtype: str,
    max_model_len: int,
    seed: int,
    gpu_memory_utilization: float = 0.9,
) -> dict[str, Any]:
    """Keyword arguments for ``vllm.LLM(...)`` that load ``model_path`` for evaluation."""
    if tensor_parallel_size < 1:
        raise ValueError(f"tensor_parallel_size must be >= 1, got {tensor_parallel_size}")
    if not 0 < gpu_memory_utilization <= 1:
        raise ValueError(f"gpu_memory_utilization must be in (0, 1], got {gpu_memory_utilization}")
    if max_model_len < 1:
        raise ValueError(f"max_model_len must be >= 1, got {max_model_len}")
    return {
        "model": str(model_path),
        "tokenizer": str(model_path),
        "tensor_parallel_size": tensor_parallel_size,
        "dtype": dtype,
        "max_model_len": max_model_len,
        "seed": seed,
        "gpu_memory_utilization": gpu_memory_utilization,
    }


def vllm_sampling_args(params: SamplingParams) -> dict[str, Any]:
    """Keyword arguments for ``vllm.SamplingParams(...)`` matching ``params``.

    Special tokens are kept in the text because SFT models emit ``<think>``/``</think>`` as
    special tokens and graders need them.
    """
    return {
        "n": params.k,
        "temperature": params.temperature,
        "top_p": params.top_p,
        "max_tokens": params.max_new_tokens,
        "seed": params.seed,
        "skip_special_tokens": False,
    }


class VLLMGenerator:
    """A model served in-process by ``vllm.LLM``; conversation i is sampled with seed ``params.seed + i``."""

    def __init__(
        self,
        model_path: str | Path,
        *,
        tensor_parallel_size: int = 1,
        dtype: str = "bfloat16",
        max_model_len: int = 32768,
        seed: int = 0,
        gpu_memory_utilization: float = 0.9,
        chat_template_kwargs: Mapping[str, Any] | None = None,
    ) -> None:
        self.chat_template_kwargs = dict(chat_template_kwargs or {})
        engine_args = vllm_engine_args(
            model_path,
            tensor_parallel_size=tensor_parallel_size,
            dtype=dtype,
            max_model_len=max_model_len,
            seed=seed,
            gpu_memory_utilization=gpu_memory_utilization,
        )
        try:
            import vllm
        except ImportError:
            raise MissingDependencyError(
                f"backend 'vllm' needs vllm{VLLM_RANGE} and a GPU; install it with: pip install 'ade-core[gpu]' "
                "(or use backend 'hf', which runs on CPU)"
            ) from None
        self._vllm = vllm
        self.llm: Any = vllm.LLM(**engine_args)
        self.tokenizer: Any = self.llm.get_tokenizer()

    def generate(self, conversations: Sequence[Conversation], params: SamplingParams) -> list[list[Sample]]:
        """Sample ``params.k`` responses per conversation, returned in input order."""
        prompts = [
            render_conversation(self.tokenizer, conversation, self.chat_template_kwargs)
            for conversation in conversations
        ]
        base = vllm_sampling_args(params)
        per_prompt = [
            self._vllm.SamplingParams(**{**base, "seed": params.seed + index}) for index in range(len(prompts))
        ]
        outputs = self.llm.generate(prompts, per_prompt, use_tqdm=False)
        eos_text = [self.tokenizer.eos_token or ""]
        results = []
        for output in outputs:
            samples = []
            for completion in sorted(output.outputs, key=lambda item: item.index):
                # vLLM reports "stop" for eos and stop strings, "length" at max_tokens.
                finish: FinishReason = "length" if completion.finish_reason == "length" else "stop"
                text = strip_suffix(completion.text, eos_text)
                samples.append(Sample(text, len(completion.token_ids), finish))
            results.append(samples)
        return results

    def close(self) -> None:
        """Free the engine and its GPU memory; the generator is unusable afterwards."""
        import gc

        self.llm = None
        gc.collect()
        try:
            import torch

            if torch.cuda.is_available():
                torch.cuda.empty_cache()
        except ImportError:
            pass
