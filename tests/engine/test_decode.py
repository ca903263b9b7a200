"""The transformers backend's own sampling loop against transformers' generate()."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ade_core.engine.generation.decode import sample_rows, top_p_filter
from ade_core.engine.tiny_lm import build_tiny_lm


def _llama(tmp_path: Path) -> Any:
    """A random four-layer Llama (rotary positions, the tiny world's architecture)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=64,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
        pad_token_id=0,
        eos_token_id=1,
    )
    return LlamaForCausalLM(config).eval()


def _gpt2(tmp_path: Path) -> Any:
    """The engine tests' tiny GPT-2 (learned absolute positions)."""
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(build_tiny_lm(tmp_path)).eval()


def _left_padded(lengths: list[int], vocab: int) -> tuple[Any, Any]:
    import torch

    generator = torch.Generator().manual_seed(1)
    width = max(lengths)
    ids = torch.zeros((len(lengths), width), dtype=torch.long)
    mask = torch.zeros_like(ids)
    for row, length in enumerate(lengths):
        ids[row, width - length :] = torch.randint(2, vocab, (length,), generator=generator)
        mask[row, width - length :] = 1
    return ids, mask


@pytest.mark.parametrize("build", [_llama, _gpt2], ids=["llama", "gpt2"])
def test_greedy_rows_match_generate_and_retire_at_their_stop(build: Any, tmp_path: Path) -> None:
    import torch

    model = build(tmp_path)
    ids, mask = _left_padded([3, 7, 5, 9], int(model.config.vocab_size))
    with torch.inference_mode():
        free = model.generate(
            input_ids=ids, attention_mask=mask, max_new_tokens=12, do_sample=False, pad_token_id=0, eos_token_id=None
        )[:, ids.shape[1] :].tolist()
    # Stop on a token that row 0 emits early and some other row never emits: row 0 retires
    # after it while that row runs to the limit.
    candidates = [
        (index, token)
        for index, token in enumerate(free[0])
        if token not in free[0][:index] and any(token not in row for row in free[1:])
    ]
    position, stop = candidates[1] if len(candidates) > 1 else candidates[0]
    with torch.inference_mode():
        expected = model.generate(
            input_ids=ids, attention_mask=mask, max_new_tokens=12, do_sample=False, pad_token_id=0, eos_token_id=stop
        )[:, ids.shape[1] :].tolist()
        rows = sample_rows(
            model, ids, mask, max_new_tokens=12, stop_ids={stop}, greedy=True, temperature=1.0, top_p=1.0
        )
    trimmed = [row[: row.index(stop) + 1] if stop in row else row for row in expected]
    assert rows == trimmed
    assert len(rows[0]) == position + 1 and rows[0][-1] == stop
    assert any(len(row) == 12 for row in rows)  # some row ran to the limit without its stop token


def test_top_p_filter_keeps_the_same_nucleus_as_transformers() -> None:
    import torch
    from transformers.generation.logits_process import TopPLogitsWarper

    logits = torch.randn(32, 50, generator=torch.Generator().manual_seed(3)) * 3
    for top_p in (0.1, 0.5, 0.9, 0.95, 1.0):
        ours = top_p_filter(logits, top_p)
        theirs = TopPLogitsWarper(top_p)(torch.zeros((32, 1), dtype=torch.long), logits.clone())
        assert torch.equal(torch.isinf(ours), torch.isinf(theirs)), top_p
        assert bool((~torch.isinf(ours)).sum(-1).min() >= 1)


def test_sampling_is_seeded_and_follows_the_filtered_distribution(tmp_path: Path) -> None:
    import torch

    model = _llama(tmp_path)
    ids, mask = _left_padded([4] * 400, int(model.config.vocab_size))
    ids[:] = ids[0]  # one prompt, 400 rows: the first tokens estimate its next-token distribution

    def draw(seed: int) -> list[list[int]]:
        torch.manual_seed(seed)
        with torch.inference_mode():
            return sample_rows(
                model, ids, mask, max_new_tokens=2, stop_ids={1}, greedy=False, temperature=0.7, top_p=0.8
            )

    assert draw(5) == draw(5) and draw(5) != draw(6)
    with torch.inference_mode():
        logits = model(input_ids=ids[:1], attention_mask=mask[:1]).logits[0, -1]
    probabilities = top_p_filter(logits / 0.7, 0.8).softmax(-1)
    first = torch.bincount(torch.tensor([row[0] for row in draw(7)]), minlength=probabilities.numel()) / 400
    assert set(first.nonzero().squeeze(1).tolist()) <= set(probabilities.nonzero().squeeze(1).tolist())
    assert float((first - probabilities).abs().max()) < 0.1
