"""Training details: the assistant-only label mask, added tokens, truncation, launch configuration."""

from __future__ import annotations

import pytest
from engine_world import GRPO_TOML, SFT_TOML, make_job

from ade_core.config import load_config
from ade_core.engine.model import EngineError, load_for_training
from ade_core.engine.tiny_lm import build_tiny_lm
from ade_core.engine.training.advantages import grpo_advantages, maxrl_advantages
from ade_core.engine.training.grpo import batch_geometry, grpo_arguments
from ade_core.engine.training.sft import IGNORE, tokenize_example, training_arguments
from ade_core.schemas.artifact import Intervention

CONVERSATION = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "What is 2+2?"},
    {"role": "assistant", "content": "<think>2+2=4</think>\\boxed{4}"},
    {"role": "user", "content": "And 3+3?"},
    {"role": "assistant", "content": "<think>6</think>\\boxed{6}"},
]


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    path = build_tiny_lm(tmp_path_factory.mktemp("lm"))
    return load_for_training(path, ("<think>", "</think>"))


def test_think_tokens_are_added_and_embeddings_resized(prepared):
    assert prepared.added_tokens == ("<think>", "</think>")
    assert prepared.model.get_input_embeddings().weight.shape[0] == len(prepared.tokenizer)
    ids = prepared.tokenizer("<think>x</think>", add_special_tokens=False)["input_ids"]
    assert len(ids) == 3  # each tag is one token


def test_labels_cover_assistant_turns_only(prepared):
    tokenizer = prepared.tokenizer
    example = tokenize_example(tokenizer, "e1", CONVERSATION, cap=10_000)
    labelled = "".join(
        tokenizer.decode([t]) for t, label in zip(example.input_ids, example.labels, strict=True) if label != IGNORE
    )
    assert labelled == "<think>2+2=4</think>\\boxed{4}<|im_end|>\n<think>6</think>\\boxed{6}<|im_end|>\n"
    prompt_text = "".join(
        tokenizer.decode([t]) for t, label in zip(example.input_ids, example.labels, strict=True) if label == IGNORE
    )
    assert "What is 2+2?" in prompt_text and "Be brief." in prompt_text and "boxed" not in prompt_text


def test_truncation_is_recorded(prepared):
    example = tokenize_example(prepared.tokenizer, "e1", CONVERSATION, cap=40)
    assert example.truncated and len(example.input_ids) == 40 and example.original_tokens > 40


def test_missing_model_is_a_typed_error(tmp_path):
    with pytest.raises(EngineError, match="no model at"):
        load_for_training(tmp_path, ())


def test_cpu_and_deepspeed_launch_configuration(tmp_path):
    job = make_job(tmp_path, SFT_TOML, Intervention(kind="sft_selection", payload={"selected_ids": []}, summary=""))
    args = training_arguments(job.config, tmp_path, seed=1, examples=100)
    assert args["use_cpu"] and not args["bf16"] and not args["gradient_checkpointing"] and "deepspeed" not in args
    path = tmp_path / "ds.toml"
    path.write_text(SFT_TOML)
    gpu = load_config(
        path,
        [
            'resources.device="cuda"',
            "training.sft.bf16=true",
            "training.sft.world_size=8",
            "training.sft.per_device_batch_size=1",
            "training.sft.gradient_accumulation_steps=4",
            "training.sft.deepspeed.zero_stage=3",
        ],
    ).experiment
    args = training_arguments(gpu, tmp_path, seed=1, examples=384)
    assert gpu.training.sft.effective_batch_size == 32  # Table 11: 8 GPUs x 1 x 4
    assert args["bf16"] and not args["use_cpu"]
    assert args["deepspeed"]["zero_optimization"]["stage"] == 3
    assert args["deepspeed"]["zero_optimization"]["stage3_gather_16bit_weights_on_model_save"] is True


def test_grpo_geometry_and_arguments(tmp_path):
    toml = GRPO_TOML.format(task="reward_design", shuffle="true", estimator="grpo")
    job = make_job(tmp_path, toml, Intervention(kind="reward_module", payload={"source": ""}, summary=""))
    args = grpo_arguments(job.config, tmp_path, seed=0)
    assert (args["per_device_train_batch_size"], args["gradient_accumulation_steps"], args["num_generations"]) == (
        8,
        1,
        4,
    )
    assert args["max_steps"] == 3 and args["beta"] == 1e-4 and args["epsilon"] == 0.2 and args["save_steps"] == 2
    paper = load_config("examples/paper-reward-design-math.toml").experiment.training.grpo
    assert batch_geometry(paper) == (4, 64)  # 256 prompts x 8 rollouts over 8 GPUs x 4 per device
    odd = paper.model_copy(update={"per_device_batch_size": 3})
    with pytest.raises(EngineError, match="whole micro-batches"):
        batch_geometry(odd)


def test_advantage_estimators():
    rewards = [1.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0]
    grpo = grpo_advantages(rewards, 4)
    assert grpo[0] == pytest.approx(0.75 / (0.5 + 1e-6)) and grpo[4:] == [0.0] * 4
    maxrl = maxrl_advantages(rewards, 4)
    assert maxrl[:4] == [3.0, -1.0, -1.0, -1.0] and maxrl[4:] == [0.0] * 4
    assert maxrl_advantages([0.0] * 4, 4) == [0.0] * 4
    with pytest.raises(EngineError, match="binary rewards"):
        maxrl_advantages([0.5, 1.0], 2)
