"""The tiny base model: a small GPT-2 "pretrained" on a synthetic corpus of chat trajectories.

Pretraining uses a plain PyTorch loop (faster than a Trainer for a model this size) and full
next-token loss, so the model learns the chat format, the think span and the boxed answer,
and becomes a partly competent solver before any Trial's SFT.
"""

from __future__ import annotations

import json
import math
import random
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ade_core.tiny.tokenizer import build_tokenizer


@dataclass(frozen=True)
class BaseModelRecipe:
    """Shape and pretraining schedule of the tiny base model (chosen by ADE; see docs/tiny-world.md)."""

    width: int = 192
    layers: int = 4
    heads: int = 4
    context: int = 256
    steps: int = 3000
    batch_size: int = 32
    learning_rate: float = 2e-3
    warmup_steps: int = 100
    dropout: float = 0.0
    architecture: str = "llama"
    seed: int = 0


def build_model(recipe: BaseModelRecipe, tokenizer: Any) -> Any:
    """A randomly initialized decoder of the recipe's shape: ``llama`` (rotary positions) or ``gpt2``."""
    from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM

    special = dict(
        vocab_size=len(tokenizer),
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    if recipe.architecture == "llama":
        config = LlamaConfig(
            hidden_size=recipe.width,
            intermediate_size=recipe.width * 8 // 3 // 16 * 16,
            num_hidden_layers=recipe.layers,
            num_attention_heads=recipe.heads,
            num_key_value_heads=recipe.heads,
            max_position_embeddings=recipe.context,
            attention_dropout=recipe.dropout,
            tie_word_embeddings=True,
            **special,
        )
        return LlamaForCausalLM(config)
    if recipe.architecture == "gpt2":
        gpt2_config = GPT2Config(
            n_embd=recipe.width,
            n_layer=recipe.layers,
            n_head=recipe.heads,
            n_positions=recipe.context,
            resid_pdrop=recipe.dropout,
            embd_pdrop=recipe.dropout,
            attn_pdrop=recipe.dropout,
            **special,
        )
        return GPT2LMHeadModel(gpt2_config)
    raise ValueError(f"unknown architecture {recipe.architecture!r}; known: llama, gpt2")


def render(tokenizer: Any, item: str | Sequence[dict[str, str]]) -> str:
    """A corpus item as training text: a plain document as is, a conversation through the chat template."""
    if isinstance(item, str):
        return item
    return tokenizer.apply_chat_template(list(item), tokenize=False)


def pretrain(
    conversations: Sequence[str | Sequence[dict[str, str]]],
    directory: Path,
    recipe: BaseModelRecipe = BaseModelRecipe(),
    log_every: int = 100,
    save_every: int = 0,
    tokenizer: Any = None,
    device: str = "cpu",
    start_from: Path | None = None,
) -> dict[str, Any]:
    """Train from random initialization on ``conversations`` (chat messages, or plain documents given as
    strings); save model + tokenizer (the world's full one unless ``tokenizer`` is given) to ``directory``.
    With ``start_from``, training continues from that model and its tokenizer instead (the recipe's
    shape is then the saved model's; its schedule and seed still apply).
    ``device`` only changes where the arithmetic runs (a GPU build differs from a CPU one in rounding)."""
    import torch

    torch.manual_seed(recipe.seed)
    rng = random.Random(recipe.seed)
    if start_from is not None:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(start_from)
        model = AutoModelForCausalLM.from_pretrained(start_from).to(device)  # type: ignore[arg-type]  # transformers wraps .to with functools.wraps(nn.Module.to)
    else:
        tokenizer = tokenizer or build_tokenizer()
        model = build_model(recipe, tokenizer).to(device)
    sequences = [
        tokenizer(render(tokenizer, c), add_special_tokens=False)["input_ids"][: recipe.context] for c in conversations
    ]
    optimizer = torch.optim.AdamW(model.parameters(), lr=recipe.learning_rate, weight_decay=0.01)

    def lr_at(step: int) -> float:
        if step < recipe.warmup_steps:
            return (step + 1) / recipe.warmup_steps
        progress = (step - recipe.warmup_steps) / max(1, recipe.steps - recipe.warmup_steps)
        return 0.5 * (1 + math.cos(math.pi * progress))

    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_at)
    model.train()
    started, losses = time.monotonic(), []
    # Batches of similar length (sorted, then batch order shuffled per epoch): padding costs most here.
    by_length = sorted(range(len(sequences)), key=lambda i: (len(sequences[i]), i))
    batches = [by_length[i : i + recipe.batch_size] for i in range(0, len(by_length), recipe.batch_size)]
    order: list[list[int]] = []
    for step in range(recipe.steps):
        if not order:
            order = list(batches)
            rng.shuffle(order)
        batch = [sequences[i] for i in order.pop()]
        width = max(len(s) for s in batch)
        ids = torch.full((len(batch), width), tokenizer.pad_token_id)
        labels = torch.full((len(batch), width), -100)
        mask = torch.zeros((len(batch), width), dtype=torch.long)
        for row, sequence in enumerate(batch):
            ids[row, : len(sequence)] = torch.tensor(sequence)
            labels[row, : len(sequence)] = torch.tensor(sequence)
            mask[row, : len(sequence)] = 1
        loss = model(input_ids=ids.to(device), attention_mask=mask.to(device), labels=labels.to(device)).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad()
        losses.append(loss.item())
        if log_every and (step + 1) % log_every == 0:
            recent = sum(losses[-log_every:]) / log_every
            print(
                f"pretrain step {step + 1}/{recipe.steps} loss {recent:.4f} ({time.monotonic() - started:.0f} s)",
                flush=True,
            )
        if save_every and (step + 1) % save_every == 0 and step + 1 < recipe.steps:
            checkpoint = directory.with_name("pretraining-checkpoints") / f"step-{step + 1}"
            model.save_pretrained(checkpoint)
            tokenizer.save_pretrained(checkpoint)
    directory.mkdir(parents=True, exist_ok=True)
    model.to("cpu").save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    summary = {
        "recipe": asdict(recipe),
        "parameters": sum(p.numel() for p in model.parameters()),
        "final_loss": sum(losses[-50:]) / min(50, len(losses)),
        "seconds": time.monotonic() - started,
        "sequences": len(sequences),
    }
    (directory / "pretraining.json").write_text(json.dumps(summary, indent=2))
    return summary
