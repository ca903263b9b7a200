"""Generation with Hugging Face transformers: the backend that runs everywhere, CPU included."""

from __future__ import annotations

import threading
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

from ade_core.engine.generation.base import (
    Conversation,
    FinishReason,
    GenerationError,
    Sample,
    SamplingParams,
    render_conversation,
)
from ade_core.engine.generation.decode import sample_rows
from ade_core.errors import did_you_mean

DTYPES = ("float32", "bfloat16", "float16")
# Mixes the call's seed with the batch index into one torch seed; any odd constant above the
# largest batch count keeps (seed, batch) pairs from colliding.
_SEED_STRIDE = 1_000_003


def decode_completion(tokenizer: Any, token_ids: Sequence[int], *, stop_ids: Collection[int], pad_id: int) -> Sample:
    """Turn the new tokens of one sequence into a :class:`Sample`.

    The response ends at the first stop (eos) token, which counts toward ``num_tokens`` but is
    not part of the text; what follows it is padding. Special tokens are kept, because SFT
    models emit ``<think>``/``</think>`` as special tokens and graders need them. Pad tokens are
    dropped wherever they are: they carry no text.
    """
    ids = [int(token) for token in token_ids]
    end = next((index for index, token in enumerate(ids) if token in stop_ids), None)
    finish: FinishReason
    if end is None:
        kept, num_tokens, finish = ids, len(ids), "length"
    else:
        kept, num_tokens, finish = ids[:end], end + 1, "stop"
    kept = [token for token in kept if token != pad_id]
    text = tokenizer.decode(kept, skip_special_tokens=False, clean_up_tokenization_spaces=False)
    return Sample(text=text, num_tokens=num_tokens, finish_reason=finish)


class HFGenerator:
    """A causal LM loaded once with transformers, sampling in left-padded batches.

    ``batch_sequences`` counts sequences: a batch holds ``batch_sequences // k`` prompts (at
    least one) with their k samples each, so online evaluation at K=1 fills a batch as well as
    offline evaluation at K=4 (a small model's decode step costs about the same for 16 rows as
    for 64). Calls are serialised with a lock, because reproducibility rests on torch's global
    random state.
    """

    def __init__(
        self,
        model_path: str | Path,
        *,
        batch_sequences: int = 64,
        device: str = "cpu",
        dtype: str = "float32",
        chat_template_kwargs: Mapping[str, Any] | None = None,
    ) -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        if batch_sequences < 1:
            raise ValueError(f"batch_sequences must be >= 1, got {batch_sequences}")
        if dtype not in DTYPES:
            raise ValueError(f"unknown dtype {dtype!r}{did_you_mean(dtype, DTYPES)}; choose one of {DTYPES}")
        self.model_path = Path(model_path)
        self.batch_sequences = batch_sequences
        self.chat_template_kwargs = dict(chat_template_kwargs or {})
        self.device = torch.device(device)
        self._lock = threading.Lock()
        self.tokenizer = AutoTokenizer.from_pretrained(self.model_path)
        self.tokenizer.padding_side = "left"  # decoder-only models continue from the right edge
        self.model = AutoModelForCausalLM.from_pretrained(self.model_path, dtype=getattr(torch, dtype))
        self.model.to(self.device).eval()  # type: ignore[arg-type]  # transformers wraps .to with functools.wraps(nn.Module.to)
        self.stop_ids = self._stop_ids()
        if self.tokenizer.pad_token_id is None:
            # Base models often ship without a pad token; eos is the usual stand-in and is
            # cut off at the first stop anyway.
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.pad_id = int(self.tokenizer.pad_token_id)
        context = getattr(self.model.config, "max_position_embeddings", None)
        self.context_length: int | None = int(context) if context else None

    def _stop_ids(self) -> frozenset[int]:
        """Token ids that end a response: the tokenizer's eos plus any the model's generation config adds."""
        ids: set[int] = set()
        if self.tokenizer.eos_token_id is not None:
            ids.add(int(self.tokenizer.eos_token_id))
        configured = getattr(self.model.generation_config, "eos_token_id", None)
        if configured is not None:
            ids.update(int(token) for token in ([configured] if isinstance(configured, int) else configured))
        if not ids:
            raise GenerationError(
                f"model {str(self.model_path)!r} defines no eos token, so responses could never stop; "
                "set eos_token in its tokenizer_config.json"
            )
        return frozenset(ids)

    def render(self, conversation: Conversation) -> str:
        """The prompt text for one conversation, as the model's chat template renders it."""
        return render_conversation(self.tokenizer, conversation, self.chat_template_kwargs)

    def generate(self, conversations: Sequence[Conversation], params: SamplingParams) -> list[list[Sample]]:
        """Sample ``params.k`` responses per conversation, returned in input order."""
        return self.generate_texts([self.render(conversation) for conversation in conversations], params)

    def generate_texts(self, prompts: Sequence[str], params: SamplingParams) -> list[list[Sample]]:
        """Sample ``params.k`` continuations of already-rendered prompts, returned in input order.

        Prompts are sorted by length before batching so a batch pads little; the same call
        twice gives the same samples, because torch is seeded from ``params.seed`` and the
        batch index (so a prompt's samples also depend on which prompts share the call).
        """
        encoded = [self.tokenizer(prompt, add_special_tokens=False)["input_ids"] for prompt in prompts]
        for index, ids in enumerate(encoded):
            if self.context_length is not None and len(ids) >= self.context_length:
                raise GenerationError(
                    f"prompt {index} has {len(ids)} tokens, leaving no room to generate in the model's "
                    f"{self.context_length}-token context; shorten the prompt or truncate the problem"
                )
        # Longest first: a batch that does not fit in memory fails at once, not at the end.
        order = sorted(range(len(prompts)), key=lambda index: -len(encoded[index]))
        results: list[list[Sample]] = [[] for _ in prompts]
        per_batch = max(1, self.batch_sequences // (1 if params.greedy else params.k))
        with self._lock:
            for batch_index, start in enumerate(range(0, len(order), per_batch)):
                members = order[start : start + per_batch]
                samples = self._generate_batch([encoded[index] for index in members], params, batch_index)
                for index, prompt_samples in zip(members, samples, strict=True):
                    results[index] = prompt_samples
        return results

    def _generate_batch(self, batch: list[list[int]], params: SamplingParams, batch_index: int) -> list[list[Sample]]:
        """k samples for each prompt of one batch of token-id lists."""
        import torch

        inputs = self.tokenizer.pad({"input_ids": batch}, padding=True, return_tensors="pt").to(self.device)
        # Greedy decoding gives one answer per prompt; it is drawn once and repeated k times.
        returns = 1 if params.greedy else params.k
        # Each prompt's k rows sit next to each other, as with generate()'s num_return_sequences.
        input_ids = inputs["input_ids"].repeat_interleave(returns, dim=0)
        attention_mask = inputs["attention_mask"].repeat_interleave(returns, dim=0)
        seed = (params.seed * _SEED_STRIDE + batch_index) % 2**63
        rng_devices = [self.device.index or 0] if self.device.type == "cuda" else []
        with torch.random.fork_rng(devices=rng_devices), torch.inference_mode():
            torch.manual_seed(seed)
            new_tokens = sample_rows(
                self.model,
                input_ids,
                attention_mask,
                max_new_tokens=self._room(input_ids.shape[1], params.max_new_tokens),
                stop_ids=self.stop_ids,
                greedy=params.greedy,
                temperature=params.temperature,
                top_p=params.top_p,
            )
        decoded = [
            decode_completion(self.tokenizer, row, stop_ids=self.stop_ids, pad_id=self.pad_id) for row in new_tokens
        ]
        grouped = [decoded[row : row + returns] for row in range(0, len(decoded), returns)]
        return [group * params.k if params.greedy else group for group in grouped]

    def _room(self, prompt_tokens: int, max_new_tokens: int) -> int:
        """New tokens that fit after a batch's padded prompts.

        Like vLLM, a response that reaches the end of the context stops there with finish_reason
        "length" rather than failing the call. The limit follows the batch's longest prompt,
        which length-sorted batching keeps close to each prompt's own.
        """
        if self.context_length is None:
            return max_new_tokens
        return max(1, min(max_new_tokens, self.context_length - prompt_tokens))

    def close(self) -> None:
        """Free the model's memory; the generator is unusable afterwards.

        Dropping the reference frees the weights (the model holds no reference cycles: tested), so
        on the CPU no garbage collection runs here; an attempt that evaluates several checkpoints
        would otherwise pay a full collection (~0.2-0.4 s) per checkpoint. On CUDA the cache is
        emptied after a collection, so that the next checkpoint finds the memory free.
        """
        self.model = None  # type: ignore[assignment]  # a closed generator drops its model
        if self.device.type == "cuda":
            import gc

            import torch

            gc.collect()
            torch.cuda.empty_cache()
