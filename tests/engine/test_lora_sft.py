"""SFT through LoRA adapters (merged into each published checkpoint) and the validation-loss checkpoint rule."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from engine_world import GRPO_TOML, SFT_TOML, build_world

from ade_core.config import load_config
from ade_core.engine.model import EngineError, load_for_training
from ade_core.engine.training.sft import split_validation, tokenize_example, train_sft
from ade_core.errors import ConfigError

LORA = """
[training.sft.lora]
rank = 4
alpha = 8
"""


def _conversations(root):
    rows = [json.loads(line) for line in (root / "candidates.jsonl").read_text().splitlines()]
    return [(row["candidate_id"], row["trajectories"][0]["messages"]) for row in rows[:12]]


def _config(root, toml):
    path = root / "config.toml"
    path.write_text(toml)
    return load_config(path).experiment


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    root = build_world(tmp_path_factory.mktemp("lora"))
    toml = SFT_TOML.replace("[checkpoint]\n", '[checkpoint]\nselect = "validation_loss"\nvalidation_fraction = 0.25\n')
    config = _config(root, toml.replace("[checkpoint]", LORA + "[checkpoint]", 1))
    run = train_sft(config, root / "model", _conversations(root), root / "train", seed=3)
    return root, config, run


def test_validation_rule_publishes_only_the_lowest_loss_checkpoint(trained):
    _, _, run = trained
    assert len(run.validation) == 3  # a quarter of 12, drawn with the training seed
    trained_ids = {e.example_id for e in run.examples} - {e.example_id for e in run.validation}
    assert len(trained_ids) == 9
    # 9 examples in micro-batches of 4: 3 steps an epoch; both epoch-end checkpoints were scored
    assert sorted(run.validation_loss) == [3, 6]
    ((step, _path),) = run.checkpoints
    assert run.validation_loss[step] == min(run.validation_loss.values())
    assert any("eval_loss" in entry for entry in run.log)


def test_lora_checkpoint_is_a_merged_model_with_the_base_embeddings(trained):
    import torch
    from transformers import AutoModelForCausalLM

    root, config, run = trained
    ((_, path),) = run.checkpoints
    assert (path / "adapter" / "adapter_config.json").is_file() and not (path / "adapter_config.json").exists()
    merged = AutoModelForCausalLM.from_pretrained(path)
    base = load_for_training(root / "model", config.model.special_tokens).model
    base_weights, merged_weights = base.state_dict(), merged.state_dict()
    changed = {name for name in base_weights if not torch.equal(base_weights[name], merged_weights[name])}
    # the adapters moved the attention and MLP projections; layer norms, which get no adapter, stayed put;
    # the embeddings trained in full because the Engine added <think> and </think> to the vocabulary
    assert {"transformer.h.0.attn.c_attn.weight", "transformer.h.0.mlp.c_fc.weight"} <= changed
    assert not any(".ln_" in name for name in changed)
    assert "transformer.wte.weight" in changed
    assert torch.equal(merged.get_output_embeddings().weight, merged.get_input_embeddings().weight)


def test_full_parameter_sft_keeps_every_checkpoint(tmp_path):
    import torch
    from transformers import AutoModelForCausalLM

    root = build_world(tmp_path)
    config = _config(root, SFT_TOML)
    run = train_sft(config, root / "model", _conversations(root)[:8], root / "train", seed=3)
    assert [step for step, _ in run.checkpoints] == [2, 4] and run.validation == [] and run.validation_loss == {}
    assert not (run.checkpoints[0][1] / "adapter").exists()
    trained = AutoModelForCausalLM.from_pretrained(run.checkpoints[-1][1]).state_dict()
    base = load_for_training(root / "model", config.model.special_tokens).model.state_dict()
    assert not torch.equal(trained["transformer.h.0.ln_1.weight"], base["transformer.h.0.ln_1.weight"])


def test_validation_split_needs_two_examples(tmp_path):
    root = build_world(tmp_path)
    prepared = load_for_training(root / "model", ())
    one = [tokenize_example(prepared.tokenizer, "e1", _conversations(root)[0][1], 64)]
    with pytest.raises(EngineError, match="select = 'all'"):
        split_validation(one, 0.1, seed=0)
    train, held = split_validation(one * 10, 0.1, seed=0)
    assert len(held) == 1 and len(train) == 9


def test_bad_lora_and_rule_settings_are_refused(tmp_path):
    grpo = GRPO_TOML.format(task="reward_design", shuffle="true", estimator="grpo")
    with pytest.raises(ConfigError, match="validation_loss"):
        _config(tmp_path, grpo.replace("[checkpoint]\n", '[checkpoint]\nselect = "validation_loss"\n', 1))
    deepspeed = "[training.sft.deepspeed]\nzero_stage = 2\n" + LORA
    with pytest.raises(ConfigError, match="DeepSpeed"):
        _config(tmp_path, SFT_TOML.replace("[checkpoint]", deepspeed + "[checkpoint]", 1))
    with pytest.raises(ConfigError, match="rank"):
        _config(tmp_path, SFT_TOML.replace("[checkpoint]", LORA.replace("4", "0", 1) + "[checkpoint]", 1))


def test_new_settings_leave_existing_digests_alone(tmp_path):
    config = _config(tmp_path, SFT_TOML)
    body = config.digest_body()
    assert "lora" not in body["training"]["sft"] and set(body["checkpoint"]) == {
        "every_steps",
        "every_epoch",
        "include_final",
    }
    with_lora = _config(tmp_path, SFT_TOML.replace("[checkpoint]", LORA + "[checkpoint]", 1))
    assert with_lora.digest() != config.digest() and with_lora.digest_body()["training"]["sft"]["lora"]["rank"] == 4


def test_an_engine_attempt_trains_lora_and_publishes_the_validation_checkpoint(tmp_path):
    from engine_world import make_job, sft_job

    from ade_core.engine.attempt import run_attempt
    from ade_core.engine.package import open_package

    root = build_world(tmp_path / "world")
    toml = SFT_TOML.replace(
        "[checkpoint]\n", LORA + '[checkpoint]\nselect = "validation_loss"\nvalidation_fraction = 0.25\n'
    )
    job = make_job(root, toml, sft_job(root).command.intervention, "lora")
    package = open_package(run_attempt(job, tmp_path / "attempt"))
    manifest = package.manifest
    assert manifest.status == "completed" and len(manifest.checkpoints) == 1
    examples = package.records("selected_examples")
    assert len(examples) == 12 and sum(e["held_apart"] for e in examples) == 3
    losses = [entry["eval_loss"] for entry in package.records("training_log") if "eval_loss" in entry]
    assert len(losses) == 2
    assert (Path(manifest.selected_checkpoint) / "config.json").is_file()
