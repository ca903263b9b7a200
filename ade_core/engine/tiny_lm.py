"""A tiny randomly initialised causal LM and character-level tokenizer, built locally.

Used by the Engine's tests and benchmarks: nothing is downloaded. The tokenizer has a
ChatML-style chat template and no ``<think>`` tokens, so the SFT path that adds them and
resizes the embeddings is exercised.
"""

from __future__ import annotations

import string
from pathlib import Path

CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
SPECIAL = ["<pad>", "<unk>", "<|im_start|>", "<|im_end|>"]


def build_tiny_lm(directory: str | Path, *, seed: int = 0, width: int = 64, layers: int = 2) -> Path:
    """Write a tokenizer and a GPT-2-shaped model with random weights to ``directory``."""
    import torch
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

    directory = Path(directory)
    chars = sorted(set(string.printable) - {"\x0b", "\x0c"})
    vocab = {token: index for index, token in enumerate(SPECIAL + chars)}
    core = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    core.decoder = decoders.Fuse()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core,
        pad_token="<pad>",
        unk_token="<unk>",
        eos_token="<|im_end|>",
        bos_token="<|im_start|>",
        additional_special_tokens=["<|im_start|>", "<|im_end|>"],
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    torch.manual_seed(seed)
    config = GPT2Config(
        vocab_size=len(vocab),
        n_embd=width,
        n_layer=layers,
        n_head=4,
        n_positions=1024,
        bos_token_id=vocab["<|im_start|>"],
        eos_token_id=vocab["<|im_end|>"],
        pad_token_id=vocab["<pad>"],
    )
    model = GPT2LMHeadModel(config)
    directory.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


if __name__ == "__main__":
    import sys

    print(build_tiny_lm(sys.argv[1] if len(sys.argv) > 1 else "tiny-lm"))
