"""`ade tiny build|info` on a short schedule, and Engine attempts on the tiny world itself."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ade_core.config import load_config
from ade_core.engine.attempt import run_attempt
from ade_core.engine.job import EngineJob
from ade_core.engine.package import open_package
from ade_core.schemas.artifact import BoundCommand, Intervention, ResourceRequest
from ade_core.tiny.world import PRESETS, SHIPPED_WEIGHTS, world_dir

ADE = str(Path(sys.executable).with_name("ade"))
REPO = Path(__file__).resolve().parents[2]


def test_tiny_build_short_schedule_produces_a_loadable_model(tmp_path):
    out = tmp_path / "world"
    proc = subprocess.run(
        [ADE, "tiny", "build", "--steps", "3", "--conversations", "500", "--score-problems", "6", "--out", str(out)],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "3 steps" in proc.stdout and "in-loop accuracy on 6 problems" in proc.stdout
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(out / "model")
    tokenizer = AutoTokenizer.from_pretrained(out / "model")
    assert model.config.hidden_size == 192 and "<think>" in tokenizer.get_vocab()
    summary = json.loads((out / "model" / "pretraining.json").read_text())
    assert summary["recipe"]["steps"] == 3 and summary["model_digest"] != PRESETS["tiny"].model_digest()
    assert summary["scores"]["problems"] == 6 and set(summary["scores"]["sampled"]) >= {"all", "level_1"}
    assert (out / "ground_truth" / "defects.jsonl").is_file()


def test_tiny_info_reports_the_world(tmp_path, monkeypatch):
    monkeypatch.setenv("ADE_CACHE_DIR", str(tmp_path))
    proc = subprocess.run([ADE, "tiny", "info"], capture_output=True, text=True, env={**__import__("os").environ})
    assert proc.returncode == 0, proc.stderr
    info = json.loads(proc.stdout)
    assert info["sizes"]["in_loop"] == 300 and info["candidates"] == 2000
    assert Path(info["directory"]).is_relative_to(tmp_path)


def test_shipped_weights_are_the_default_base_model():
    assert (SHIPPED_WEIGHTS / "model.safetensors").is_file()
    summary = json.loads((SHIPPED_WEIGHTS / "pretraining.json").read_text())
    assert summary["recipe"]["steps"] == PRESETS["tiny"].recipe.steps
    # rebuild the weights whenever the generators, the recipe or any preset's evaluation splits change
    assert summary["model_digest"] == PRESETS["tiny"].model_digest() == PRESETS["tiny-full"].model_digest()
    # the shipped base is a partly competent solver, scored by the build on the whole in-loop split
    assert summary["scores"]["problems"] == 300 and 30 <= summary["scores"]["sampled"]["all"] <= 95
    assert (world_dir("tiny") / "model" / "model.safetensors").is_file()


def test_a_world_built_without_weights_gets_them_once_matching_weights_are_installed(tmp_path, monkeypatch):
    import shutil

    monkeypatch.setenv("ADE_CACHE_DIR", str(tmp_path))
    directory = world_dir("tiny")
    shutil.rmtree(directory / "model")  # as if built while the installed weights had another digest
    assert world_dir("tiny") == directory
    assert (directory / "model" / "model.safetensors").is_file()
    assert not list(directory.glob("model.tmp*"))


def _job(config: str, overrides: list[str], intervention: Intervention) -> EngineJob:
    path = REPO / "examples" / config
    experiment = load_config(path, overrides).experiment
    command = BoundCommand(
        task=experiment.task,
        strategy_digest="sha256:" + "1" * 64,
        intervention=intervention,
        config_digest=experiment.digest(),
        seeds={"training": 0, "evaluation": 0},
        resources=ResourceRequest(device="cpu"),
    )
    return EngineJob(trial_id="tiny/T1", attempt_id="a1", command=command, config=experiment, base_dir=str(path.parent))


@pytest.mark.trial
@pytest.mark.parametrize("k", [1])
def test_sft_attempt_on_the_tiny_world(tmp_path, k):
    inventory = [
        json.loads(line) for line in (world_dir("tiny") / "data" / "candidates.jsonl").read_text().splitlines()
    ]
    selected = sorted(group["candidate_id"] for group in inventory[:64])
    overrides = [
        "data.select_size=64",
        "training.sft.epochs=1",
        "checkpoint.every_steps=4",
        f"evaluation.in_loop.k_online={k}",
        f"evaluation.in_loop.k_offline={k}",
        "evaluation.decoding.max_new_tokens=48",
    ]
    job = _job(
        "tiny-data-selection.toml",
        overrides,
        Intervention(kind="sft_selection", payload={"selected_ids": selected}, summary="64"),
    )
    manifest = open_package(run_attempt(job, tmp_path / "attempt")).manifest
    assert manifest.status == "completed" and manifest.in_loop_scores is not None
    assert len(manifest.checkpoints) == 1 and manifest.selected_step == 4


@pytest.mark.trial
def test_grpo_curriculum_attempt_on_the_tiny_world(tmp_path):
    pool = [json.loads(line) for line in (world_dir("tiny") / "data" / "rft_pool.jsonl").read_text().splitlines()]
    schedule = [[p["unique_id"] for p in pool[i * 4 : i * 4 + 4]] for i in range(2)]
    overrides = [
        "training.grpo.total_steps=2",
        "training.grpo.prompts_per_step=4",
        "training.grpo.per_device_batch_size=16",
        "training.grpo.max_response_tokens=32",
        "checkpoint.every_steps=2",
        "evaluation.decoding.max_new_tokens=32",
    ]
    job = _job(
        "tiny-curriculum.toml", overrides, Intervention(kind="schedule", payload={"batches": schedule}, summary="2x4")
    )
    package = open_package(run_attempt(job, tmp_path / "attempt"))
    assert [r["problem_ids"] for r in package.records("consumed_problems")] == schedule
    assert package.manifest.status == "completed"
