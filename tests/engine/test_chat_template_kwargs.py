"""[model].chat_template_kwargs reach every chat-template rendering: generation, SFT tokenization, pool
token counts, GRPO's TRL arguments; a Qwen3-style template reads ``enable_thinking`` from them."""

from __future__ import annotations

from pathlib import Path

import pytest

from ade_core.config import load_config
from ade_core.engine.generation.hf import HFGenerator
from ade_core.engine.pool import annotate_lengths
from ade_core.engine.tiny_lm import build_tiny_lm
from ade_core.engine.training.sft import tokenize_example

REPO = Path(__file__).resolve().parents[2]
# As Qwen3's template does: with thinking disabled, every assistant turn (and the generation prompt) opens
# with an empty think span.
QWEN3_STYLE = (
    "{% set off = enable_thinking is defined and enable_thinking is false %}"
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{% if message['role'] == 'assistant' and off %}<think>\n\n</think>\n\n{% endif %}"
    "{{ message['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% if off %}<think>\n\n</think>\n\n{% endif %}{% endif %}"
)
OFF = {"enable_thinking": False}
MESSAGES = [{"role": "user", "content": "What is 2 + 3?"}, {"role": "assistant", "content": "\\boxed{5}"}]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    from transformers import AutoTokenizer

    path = build_tiny_lm(tmp_path_factory.mktemp("qwen3-style"))
    tokenizer = AutoTokenizer.from_pretrained(path)
    tokenizer.chat_template = QWEN3_STYLE
    tokenizer.save_pretrained(path)
    return path


def test_generation_renders_prompts_with_the_kwargs(model_dir):
    question = MESSAGES[:1]
    assert HFGenerator(model_dir, chat_template_kwargs=OFF).render(question).endswith("<think>\n\n</think>\n\n")
    assert HFGenerator(model_dir).render(question).endswith("<|im_start|>assistant\n")


def test_sft_tokenization_and_pool_token_counts_use_the_kwargs(model_dir):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    plain = tokenize_example(tokenizer, "e", MESSAGES, cap=256)
    off = tokenize_example(tokenizer, "e", MESSAGES, cap=256, template_kwargs=OFF)
    # the empty think span belongs to the prompt the template writes, not to the learnt answer
    assert off.original_tokens > plain.original_tokens and off.target_tokens == plain.target_tokens
    rows = [{"messages": MESSAGES}]
    span = len("<think>\n\n</think>\n\n")  # one token per character in this tokenizer
    counts = [annotate_lengths(rows, tokenizer, 256, kwargs)[0]["token_count"] for kwargs in (OFF, None)]
    assert counts[0] == counts[1] + span == off.original_tokens


def test_the_config_carries_them_to_grpo_and_defaults_to_none():
    from ade_core.engine.training.grpo import grpo_arguments

    path = REPO / "examples" / "tiny-curriculum.toml"
    assert load_config(path).experiment.model.chat_template_kwargs == {}
    config = load_config(path, ["model.chat_template_kwargs={enable_thinking = false}"]).experiment
    assert config.model.chat_template_kwargs == OFF
    assert grpo_arguments(config, Path("/tmp/unused"), 0)["chat_template_kwargs"] == OFF
