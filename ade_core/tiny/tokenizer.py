"""The tiny world's character-level tokenizer with a Qwen-style chat template."""

from __future__ import annotations

import string
from pathlib import Path
from typing import Any

CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
SPECIAL = ("<pad>", "<unk>", "<|im_start|>", "<|im_end|>", "<think>", "</think>")
THINK = ("<think>", "</think>")
BOXED = "\\boxed{"  # one token: the model learns to open the final answer in one step
CHARSET = sorted(set(string.printable) - {"\x0b", "\x0c", "\r"})


def build_tokenizer(directory: Path | None = None, *, think_tokens: bool = True) -> Any:
    """A PreTrainedTokenizerFast: one id per character, plus the chat, reasoning and answer markers.

    Without ``think_tokens`` the vocabulary lacks ``<think>`` and ``</think>`` (the SFT target's
    tokenizer, like a model whose native thinking is disabled): the Engine adds them before SFT and
    resizes the embeddings (paper Appendix D.3)."""
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    special = SPECIAL if think_tokens else tuple(t for t in SPECIAL if t not in THINK)
    vocab = {token: index for index, token in enumerate([*special, BOXED, *CHARSET])}
    core = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    core.decoder = decoders.Fuse()
    core.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in special])
    core.add_tokens([AddedToken(BOXED, special=False, normalized=False)])
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core,
        pad_token="<pad>",
        unk_token="<unk>",
        bos_token="<|im_start|>",
        eos_token="<|im_end|>",
        additional_special_tokens=["<|im_start|>", "<|im_end|>", *(THINK if think_tokens else ())],
        model_max_length=256,
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    if directory is not None:
        tokenizer.save_pretrained(directory)
    return tokenizer
