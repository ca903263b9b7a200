"""The sampling loop of the transformers backend: a batch shrinks as its sequences finish.

``model.generate`` keeps every row of a batch until the longest one ends, so a batch whose
answers mostly stop after 40 tokens still pays for 128 decode steps on every row. On a small
model on CPU a decode step costs roughly in proportion to its rows, so retiring a row at its
stop token (and dropping its key/value cache) cuts evaluation time by about the ratio of the
longest response to the mean one. The distribution is the one ``generate`` samples from with
``top_k=0`` and no repetition penalty (paper Appendix D.5: temperature and top-p only).
"""

from __future__ import annotations

import inspect
from collections.abc import Collection
from typing import Any


def top_p_filter(logits: Any, top_p: float) -> Any:
    """Logits with everything outside the nucleus of mass ``top_p`` set to -inf.

    Like transformers' ``TopPLogitsWarper``: a token is dropped when the probability mass of
    the tokens less likely than it (itself included) is at most ``1 - top_p``; the most likely
    token always stays.
    """
    import torch

    if top_p >= 1.0:
        return logits
    ascending, order = torch.sort(logits, descending=False, dim=-1)
    cumulative = ascending.softmax(dim=-1).cumsum(dim=-1)
    drop = cumulative <= (1 - top_p)
    drop[..., -1] = False
    return logits.masked_fill(drop.scatter(-1, order, drop), float("-inf"))


def sample_rows(
    model: Any,
    input_ids: Any,
    attention_mask: Any,
    *,
    max_new_tokens: int,
    stop_ids: Collection[int],
    greedy: bool,
    temperature: float,
    top_p: float,
) -> list[list[int]]:
    """New token ids for each row of a left-padded batch, each ending at its first stop token.

    The caller seeds torch; the same seed and batch give the same tokens. A row that reaches
    ``max_new_tokens`` without a stop token ends there.
    """
    import torch
    from transformers import DynamicCache

    rows = input_ids.shape[0]
    stops = torch.tensor(sorted(stop_ids), dtype=torch.long, device=input_ids.device)
    outputs: list[list[int]] = [[] for _ in range(rows)]
    alive = torch.arange(rows, device=input_ids.device)  # batch row -> original row
    positions = (attention_mask.long().cumsum(-1) - 1).clamp(min=0)
    cache = DynamicCache(config=model.config)
    keep_last = {"logits_to_keep": 1} if "logits_to_keep" in inspect.signature(model.forward).parameters else {}
    logits = model(
        input_ids=input_ids,
        attention_mask=attention_mask,
        position_ids=positions,
        cache=cache,
        use_cache=True,
        **keep_last,
    ).logits[:, -1, :]
    next_position = positions[:, -1:] + 1
    for step in range(max_new_tokens):
        scores = logits.float()
        if greedy:
            tokens = scores.argmax(dim=-1)
        else:
            scores = top_p_filter(scores / temperature, top_p)
            tokens = torch.multinomial(scores.softmax(dim=-1), num_samples=1).squeeze(1)
        for row, token in zip(alive.tolist(), tokens.tolist(), strict=True):
            outputs[row].append(token)
        running = ~torch.isin(tokens, stops)
        if step == max_new_tokens - 1 or not bool(running.any()):
            break
        if not bool(running.all()):
            keep = running.nonzero().squeeze(1)
            cache.batch_select_indices(keep)
            alive, tokens = alive[keep], tokens[keep]
            attention_mask, next_position = attention_mask[keep], next_position[keep]
        attention_mask = torch.cat([attention_mask, attention_mask.new_ones((attention_mask.shape[0], 1))], dim=-1)
        logits = model(
            input_ids=tokens.unsqueeze(1),
            attention_mask=attention_mask,
            position_ids=next_position,
            cache=cache,
            use_cache=True,
        ).logits[:, -1, :]
        next_position = next_position + 1
    return outputs
