"""The generation backend 𝓑 names: the tiny world scored through an OpenAI-compatible server, vLLM
refused before anything starts where it is not installed, GRPO's rollout options, and the digest."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from generation_server import OpenAIServer

from ade_core.cli import main
from ade_core.cli_support import load_checked
from ade_core.config import check_generation, load_config
from ade_core.engine.baseline import BaseEvaluationJob, evaluate_base_model
from ade_core.engine.training.grpo import grpo_arguments, vllm_arguments
from ade_core.errors import ConfigError
from ade_core.executors.interpreter import SAFE_PATH_ENV
from ade_core.executors.local import LocalExecutor
from ade_core.harness.base_model import engine_base_evaluator
from ade_core.harness.run import init_run
from ade_core.schemas.common import sha256_digest
from ade_core.schemas.config import GenerationSettings

ROOT = Path(__file__).resolve().parents[2]
SFT = ROOT / "examples" / "tiny-data-selection-ci.toml"
RFT = ROOT / "examples" / "tiny-reward-design-ci.toml"
SMALL = ["evaluation.in_loop.limit=4", "evaluation.in_loop.k_offline=2", "evaluation.decoding.max_new_tokens=24"]
OPENAI = "engine.generation.backend='openai'"
VLLM_REFUSED = r"\[engine.generation\].backend = 'vllm' needs vLLM, which is not installed here; install the gpu extra"


@pytest.fixture
def no_vllm(monkeypatch: pytest.MonkeyPatch) -> None:
    """vLLM is not importable, even on a host where it is installed."""
    monkeypatch.setitem(sys.modules, "vllm", None)


def test_the_tiny_world_evaluates_end_to_end_through_an_openai_compatible_server(tmp_path: Path) -> None:
    """Base-model evaluation (``ade engine base-eval`` in its own process) samples from a local server that
    loads the checkpoint it is asked for, and scores exactly as the in-process transformers backend does."""
    hf = load_config(SFT, SMALL)
    expected = evaluate_base_model(BaseEvaluationJob.of(hf.experiment, hf.base_dir))
    with OpenAIServer(load_models=True) as server:
        loaded = load_config(SFT, [*SMALL, OPENAI, f"operational.generation.base_url='{server.base_url}'"])
        check_generation(loaded.experiment, loaded.operational.generation)
        evaluate = engine_base_evaluator(
            LocalExecutor(),
            loaded.experiment,
            loaded.base_dir,
            tmp_path / "run",
            generation=loaded.operational.generation,
        )
        scores = asyncio.run(evaluate())
        received = list(server.received)
    assert isinstance(scores, dict) and set(scores) == {"pass_at_k", "average_at_k"}, scores
    assert scores == expected["scores"]
    # One /completions request per problem, the prompt rendered with the checkpoint's own tokenizer.
    assert len(received) == 4 and {request["path"] for request in received} == {"/v1/completions"}
    bodies = sorted((request["body"] for request in received), key=lambda body: body["seed"])
    assert [body["seed"] for body in bodies] == [0, 1, 2, 3]  # 𝓑's evaluation seed + problem index
    assert {(body["n"], body["max_tokens"]) for body in bodies} == {(2, 24)}
    assert all(Path(body["model"]).is_absolute() and "<|im_start|>" in body["prompt"] for body in bodies)
    job = json.loads((tmp_path / "run" / "attempts" / "base-model" / "job.json").read_text())
    assert job["generation"]["base_url"] == server.base_url and job["config"]["engine"]["generation"] == {
        "backend": "openai"
    }


def test_an_unreachable_server_makes_the_evaluation_missing_not_zero(tmp_path: Path) -> None:
    loaded = load_config(SFT, [*SMALL, OPENAI])
    server = GenerationSettings(base_url="http://127.0.0.1:9/v1", max_retries=0)
    result = evaluate_base_model(BaseEvaluationJob.of(loaded.experiment, loaded.base_dir, server))
    assert result["scores"] is None
    assert "GenerationServerError: POST http://127.0.0.1:9/v1/completions failed after 1 attempt(s)" in str(
        result["missing_reason"]
    )


def test_backend_openai_needs_a_server_address() -> None:
    loaded = load_config(SFT, [OPENAI])
    with pytest.raises(ConfigError, match=r"set \[operational.generation\].base_url, e.g. 'http://127.0.0.1:8000/v1'"):
        check_generation(loaded.experiment, loaded.operational.generation)
    with pytest.raises(ConfigError, match=r"base_url must be an http\(s\) URL"):
        load_config(SFT, ["operational.generation.base_url='127.0.0.1:8000'"])


def test_vllm_is_refused_by_every_command_before_anything_starts(no_vllm: None, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=VLLM_REFUSED + r".* or set it to 'hf'"):
        load_checked(str(SFT), ("engine.generation.backend='vllm'",), local_paths=True)
    with pytest.raises(ConfigError, match=r"\[training.grpo\].vllm_mode = 'colocate' needs vLLM.* set it to 'off'"):
        load_checked(str(RFT), ("training.grpo.vllm_mode='colocate'",), local_paths=True)
    both = ("engine.generation.backend='vllm'", "training.grpo.vllm_mode='server'")
    with pytest.raises(ConfigError, match=r"backend = 'vllm' and \[training.grpo\].vllm_mode = 'server' needs vLLM"):
        load_checked(str(RFT), both, local_paths=True)
    # A schema-only check and a dry run need no vLLM: nothing is generated.
    load_checked(str(SFT), ("engine.generation.backend='vllm'",), local_paths=False)

    strategy = tmp_path / "strategy.py"
    strategy.write_text("def select(pool, k):\n    return []\n")
    # The CLI sets PYTHONSAFEPATH for the Pythons it starts; run in-process, it must not outlive the call
    # (later tests start scripts that import their neighbours).
    runner = CliRunner(env={SAFE_PATH_ENV: os.environ.get(SAFE_PATH_ENV)})
    vllm = ["--set", "engine.generation.backend='vllm'"]
    for args in (
        ["run", str(SFT), "--run-dir", str(tmp_path / "run"), *vllm],
        ["trial", str(SFT), str(strategy), *vllm],
        ["admit", str(SFT), str(strategy), *vllm],
        ["config", "validate", str(SFT), *vllm],
    ):
        result = runner.invoke(main, args)
        assert result.exit_code == 2, (args, result.output)
        assert "needs vLLM, which is not installed here" in result.output, (args, result.output)
    assert not (tmp_path / "run").exists()

    loaded = load_config(SFT, ["engine.generation.backend='vllm'"])
    with pytest.raises(ConfigError, match=VLLM_REFUSED):
        init_run(tmp_path / "direct", loaded, dry_run=False)
    assert not (tmp_path / "direct").exists()
    with pytest.raises(ConfigError, match=VLLM_REFUSED):  # the Engine refuses the job before training
        BaseEvaluationJob.of(loaded.experiment, loaded.base_dir).check()


def test_grpo_vllm_mode_maps_to_trl_options() -> None:
    from trl import GRPOConfig

    recipe = load_config(RFT).experiment.training.grpo
    assert recipe is not None and recipe.vllm_mode == "off"
    assert vllm_arguments(recipe, "http://10.0.0.2:8000") == {"use_vllm": False}
    colocate = recipe.model_copy(update={"vllm_mode": "colocate"})
    assert vllm_arguments(colocate, "http://10.0.0.2:8000") == {"use_vllm": True, "vllm_mode": "colocate"}
    server = load_config(RFT, ["training.grpo.vllm_mode='server'"]).experiment
    arguments = grpo_arguments(server, Path("/tmp/unused"), 0, "http://10.0.0.2:8000")
    args = GRPOConfig(**arguments)  # TRL accepts them without importing vLLM
    assert (args.use_vllm, args.vllm_mode, args.vllm_server_base_url) == (True, "server", "http://10.0.0.2:8000")
    assert "vllm_server_base_url" not in grpo_arguments(server, Path("/tmp/unused"), 0)


def test_the_backend_is_part_of_the_digest_and_its_defaults_digest_as_before() -> None:
    default = load_config(SFT).experiment
    body = default.model_dump(mode="json")
    del body["engine"]
    # keys added later, left at their defaults
    del body["training"]["sft"]["lora"], body["checkpoint"]["select"], body["checkpoint"]["validation_fraction"]
    del body["evaluation"]["pass_k"], body["evaluation"]["coverage_k"], body["evaluation"]["coverage_thresholds"]
    body["evaluation"]["held_out"] = default.held_out_digest()
    assert default.digest() == sha256_digest(body)  # a 𝓑 frozen before these keys existed still verifies
    assert load_config(SFT, [OPENAI]).digest != default.digest()
    rft = load_config(RFT).experiment
    assert "vllm_mode" not in rft.digest_body()["training"]["grpo"]
    assert load_config(RFT, ["training.grpo.vllm_mode='colocate'"]).digest != rft.digest()
    # Where the server is, its key and its limits are operational: they never change 𝓑's digest.
    moved = load_config(SFT, [OPENAI, "operational.generation.base_url='http://10.1.2.3:8000/v1'"])
    assert moved.digest == load_config(SFT, [OPENAI]).digest
