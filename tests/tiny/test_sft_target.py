"""The tiny world's SFT target (`tiny-sft`): one-step chat answers, worked solutions only as plain
documents, a tokenizer without the think tokens, and the Engine adding them before SFT."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from ade_core.engine.data import resolve_model
from ade_core.engine.model import EngineInputMissing, load_for_training
from ade_core.tiny.problems import problem_key
from ade_core.tiny.world import PRESETS, TARGETS, evaluation_keys, target_corpus

ADE = str(Path(sys.executable).with_name("ade"))


def test_the_corpus_answers_in_one_step_and_holds_worked_solutions_as_plain_documents():
    spec = replace(TARGETS["tiny-sft"], chat_answers=300, worked_documents=300, other_chat=30)
    excluded = evaluation_keys()
    corpus = target_corpus(spec, excluded)
    chats = [item for item in corpus if not isinstance(item, str)]
    documents = [item for item in corpus if isinstance(item, str)]
    assert len(chats) == 330 and len(documents) == 300
    answers = [m["content"] for chat in chats for m in chat if m["role"] == "assistant"]
    assert not any("<think>" in a or "</think>" in a for a in answers)
    math_answers = [a for a in answers if "\\boxed{" in a]
    assert len(math_answers) == 300 and all(a.startswith("The answer is \\boxed{") for a in math_answers)
    # the skill is there, latent: column-by-column working, in documents with no chat markup
    assert sum("=[" in d for d in documents) > 100
    assert not any("<|im_start|>" in d or "<think>" in d for d in documents)
    questions = [m["content"] for chat in chats for m in chat if m["role"] == "user"]
    questions += [d.split("\n")[1] for d in documents]
    assert not {problem_key(q) for q in questions} & excluded


def test_the_target_has_its_own_model_digest():
    assert TARGETS["tiny-sft"].model_digest() != PRESETS["tiny"].model_digest()
    longer = replace(TARGETS["tiny-sft"], recipe=replace(TARGETS["tiny-sft"].recipe, steps=10))
    assert longer.model_digest() != TARGETS["tiny-sft"].model_digest()


@pytest.fixture(scope="module")
def short_build(tmp_path_factory):
    out = tmp_path_factory.mktemp("tiny-sft")
    proc = subprocess.run(
        [ADE, "tiny", "build", "--target", "tiny-sft", "--steps", "3", "--conversations", "300"]
        + ["--score-problems", "4", "--out", str(out)],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "3 steps" in proc.stdout and "in-loop accuracy on 4 problems" in proc.stdout
    return out / "model"


def test_a_short_build_has_no_think_tokens_and_the_engine_adds_them(short_build):
    from transformers import AutoTokenizer

    assert "<think>" not in AutoTokenizer.from_pretrained(short_build).get_vocab()
    summary = json.loads((short_build / "pretraining.json").read_text())
    assert summary["target"] == "tiny-sft" and summary["recipe"]["steps"] == 3
    assert summary["model_digest"] != TARGETS["tiny-sft"].model_digest()
    prepared = load_for_training(short_build, ("<think>", "</think>"))
    assert prepared.added_tokens == ("<think>", "</think>")
    assert prepared.model.get_input_embeddings().weight.shape[0] == len(prepared.tokenizer)
    assert len(prepared.tokenizer("<think>x</think>", add_special_tokens=False)["input_ids"]) == 3


def test_an_unbuilt_target_asks_for_its_build(tmp_path, monkeypatch):
    monkeypatch.setenv("ADE_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr("ade_core.tiny.world.SHIPPED_TARGET_WEIGHTS", {"tiny-sft": tmp_path / "none"})
    with pytest.raises(EngineInputMissing, match="ade tiny build --target tiny-sft"):
        resolve_model(tmp_path, "tiny-sft")


def test_an_sft_attempt_on_the_target_adds_the_think_tokens_and_records_them(short_build, tmp_path):
    from ade_core.config import load_config
    from ade_core.engine.attempt import run_attempt
    from ade_core.engine.job import EngineJob
    from ade_core.engine.package import open_package
    from ade_core.schemas.artifact import BoundCommand, Intervention, ResourceRequest
    from ade_core.tiny.world import world_dir

    config_path = Path(__file__).resolve().parents[2] / "examples" / "tiny-data-selection.toml"
    overrides = [
        f"model.target={short_build}",
        "model.chat_template_kwargs={enable_thinking = false}",
        "data.select_size=16",
        "training.sft.epochs=1",
        "evaluation.in_loop.limit=4",
        "evaluation.in_loop.k_offline=1",
        "evaluation.decoding.max_new_tokens=8",
    ]
    experiment = load_config(config_path, overrides).experiment
    inventory = [
        json.loads(line) for line in (world_dir("tiny") / "data" / "candidates.jsonl").read_text().splitlines()
    ]
    selected = sorted(group["candidate_id"] for group in inventory[:16])
    command = BoundCommand(
        task=experiment.task,
        strategy_digest="sha256:" + "1" * 64,
        intervention=Intervention(kind="sft_selection", payload={"selected_ids": selected}, summary="16"),
        config_digest=experiment.digest(),
        seeds={"training": 0, "evaluation": 0},
        resources=ResourceRequest(device="cpu"),
    )
    job = EngineJob(
        trial_id="tiny-sft/T1", attempt_id="a1", command=command, config=experiment, base_dir=str(config_path.parent)
    )
    manifest = open_package(run_attempt(job, tmp_path / "attempt")).manifest
    assert manifest.status == "completed"
    assert manifest.added_tokens == ("<think>", "</think>")
    assert manifest.chat_template_kwargs == {"enable_thinking": False}
