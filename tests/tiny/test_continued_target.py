"""The tiny world's continued RFT target (`tiny-boxed`): the base model trained on for a short schedule on
a corpus with other defect rates, with its own digest, built and installed where `model.target` finds it."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from ade_core.engine.data import TINY_TARGETS, resolve_model
from ade_core.engine.model import EngineInputMissing
from ade_core.tiny.problems import problem_key
from ade_core.tiny.solver import solve
from ade_core.tiny.world import (
    PRESETS,
    TARGETS,
    build_target_model,
    continued_corpus,
    evaluation_keys,
    install_target,
)

ADE = str(Path(sys.executable).with_name("ade"))
SHORT = replace(TARGETS["tiny-boxed"], conversations=64, recipe=replace(TARGETS["tiny-boxed"].recipe, steps=2))


def test_every_target_of_the_world_is_one_the_engine_resolves():
    assert set(TINY_TARGETS) == set(TARGETS)


def _math_answers(corpus):
    """The closed-span answers to the corpus's math questions (those the world's solver re-derives)."""
    answers = []
    for chat in corpus:
        turns = {m["role"]: m["content"] for m in chat}
        if solve(turns["user"]) is not None and "</think>" in turns["assistant"]:
            answers.append(turns["assistant"].partition("</think>")[2])
    return answers


def test_the_boxed_corpus_boxes_every_math_answer_and_holds_no_evaluation_problem():
    corpus = continued_corpus(replace(SHORT, conversations=400), evaluation_keys())
    assert len(corpus) == 400 + 40  # the math trajectories and a tenth as many chat turns
    answers = _math_answers(corpus)
    assert len(answers) > 300 and all("\\boxed{" in a for a in answers)
    # the base's kind of corpus, by contrast, leaves about a quarter of its answers unboxed
    base = continued_corpus(replace(SHORT, conversations=400, defect_overrides=(("missing_box", 0.25),)), set())
    assert sum("\\boxed{" not in a for a in _math_answers(base)) > 50
    questions = {problem_key(m["content"]) for chat in corpus for m in chat if m["role"] == "user"}
    assert not questions & evaluation_keys()


def test_the_target_has_its_own_model_digest():
    boxed = TARGETS["tiny-boxed"].model_digest()
    assert boxed not in (PRESETS["tiny"].model_digest(), TARGETS["tiny-sft"].model_digest())
    assert replace(TARGETS["tiny-boxed"], defect_overrides=(("missing_box", 0.1),)).model_digest() != boxed
    assert SHORT.model_digest() != boxed


def test_a_short_build_continues_the_base_and_a_build_off_the_recipe_is_not_installed(tmp_path):
    proc = subprocess.run(
        [ADE, "tiny", "build", "--target", "tiny-boxed", "--steps", "2", "--conversations", "64"]
        + ["--score-problems", "4", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "2 steps" in proc.stdout and "in-loop accuracy on 4 problems" in proc.stdout
    summary = json.loads((tmp_path / "model" / "pretraining.json").read_text())
    assert summary["target"] == "tiny-boxed" and summary["recipe"]["steps"] == 2
    from transformers import AutoTokenizer

    assert "<think>" in AutoTokenizer.from_pretrained(tmp_path / "model").get_vocab()  # the base's tokenizer
    with pytest.raises(ValueError, match="not a build of 'tiny-boxed' at its recipe"):
        install_target("tiny-boxed", tmp_path / "model")
    assert (tmp_path / "model" / "config.json").is_file()  # a refused install moves nothing


def test_a_build_at_the_recipe_is_installed_where_model_target_finds_it(tmp_path, monkeypatch):
    monkeypatch.setenv("ADE_CACHE_DIR", str(tmp_path / "cache"))
    with pytest.raises(EngineInputMissing, match="ade tiny build --target tiny-boxed"):
        resolve_model(tmp_path, "tiny-boxed")
    monkeypatch.setitem(TARGETS, "tiny-boxed", SHORT)  # the short schedule stands in for the recipe
    build_target_model(SHORT, tmp_path / "build", log_every=0, score_problems=2)
    installed = install_target("tiny-boxed", tmp_path / "build" / "model")
    assert resolve_model(tmp_path, "tiny-boxed") == installed
    assert json.loads((installed / "pretraining.json").read_text())["model_digest"] == SHORT.model_digest()
