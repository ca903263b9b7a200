"""`ade doctor` as a user runs it: the machine report, a config's requirements, exit 3 naming what is missing."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ade_core.doctor import Gpu, Machine, requirements
from ade_core.testing import run_command

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
ADE = str(Path(sys.executable).with_name("ade"))
TINY = str(EXAMPLES / "tiny-data-selection-ci.toml")


def ade(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return run_command([ADE, *args], idle_s=10, cwd=cwd, env=env)


def cuda_visible() -> bool:
    import torch

    return bool(torch.cuda.is_available())


def test_machine_report_lists_every_field():
    proc = ade("doctor")
    assert proc.returncode == 0, proc.stderr
    names = [line.split()[0] for line in proc.stdout.splitlines()]
    assert names == ["executor", "torch", "cuda", "executor", "vllm", "deepspeed", "flash-attn", "sandbox"]
    assert "CPU core(s)" in proc.stdout and "reaches '" in proc.stdout


def test_json_report_parses():
    proc = ade("doctor", "--json")
    assert proc.returncode == 0, proc.stderr
    machine = json.loads(proc.stdout)["machine"]
    assert machine["executor"] == "local" and machine["cpus"] >= 1
    assert set(machine["packages"]) == {"vllm", "deepspeed", "flash_attn"}
    assert machine["sandbox_level"] in machine["sandbox_levels"] and machine["sandbox_levels"]["process"]
    assert "config" not in json.loads(proc.stdout)


def test_tiny_config_needs_nothing_missing():
    proc = ade("doctor", TINY, "--json")
    assert proc.returncode == 0, proc.stdout
    report = json.loads(proc.stdout)["config"]
    assert report["missing"] == [] and report["uses"]["resources.device"] == "cpu"
    assert {r["key"] for r in report["requirements"]} >= {
        "[resources]",
        "[operational.sandbox].min_isolation = 'process+lsm'",
    }


def test_paper_preset_names_what_this_machine_lacks():
    proc = ade("doctor", str(EXAMPLES / "paper-reward-design-math.toml"))
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "MISSING  [model].target needs a model directory" in proc.stdout
    if not cuda_visible():
        assert "MISSING  [resources].device = 'cuda' needs a CUDA GPU: none visible" in proc.stdout
        assert "fix: run on a GPU host, or set [resources].device = 'cpu'" in proc.stdout
    assert proc.stdout.rstrip().splitlines()[-1].split(":")[0].endswith("missing")


@pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="vLLM is installed here")
def test_vllm_backend_without_vllm_exits_3_naming_it():
    proc = ade("doctor", TINY, "--set", "engine.generation.backend=vllm", "--json")
    assert proc.returncode == 3, proc.stdout + proc.stderr
    report = json.loads(proc.stdout)["config"]
    assert report["missing"] == ["[engine.generation].backend = 'vllm'"]
    (missing,) = [r for r in report["requirements"] if not r["met"]]
    assert missing["needs"] == "vllm" and "set [engine.generation].backend = 'hf'" in missing["fix"]


def test_bad_config_is_the_usual_config_error(tmp_path):
    proc = ade("doctor", str(tmp_path / "missing.toml"))
    assert proc.returncode == 2 and proc.stderr.startswith("ConfigError: config file not found"), proc.stderr
    proc = ade("doctor", "--set", "engine.generation.backend=vllm")
    assert proc.returncode == 2 and "--set needs a CONFIG" in proc.stderr


def test_doctor_writes_nothing(tmp_path):
    work, cache = tmp_path / "work", tmp_path / "cache"
    work.mkdir()
    cache.mkdir()
    # the sandbox probe's trial runs use the sandbox runtime, a cache shared with every sandboxed run: kept apart
    runtime = tmp_path / "sandbox-runtime"
    env = {**os.environ, "XDG_CACHE_HOME": str(cache), "ADE_CACHE_DIR": str(cache)}
    env["ADE_SANDBOX_RUNTIME_DIR"] = str(runtime)
    for args in (("doctor",), ("doctor", TINY), ("doctor", str(EXAMPLES / "paper-reward-design-math.toml"))):
        proc = ade(*args, cwd=work, env=env)
        assert proc.returncode in (0, 3), proc.stderr
    assert list(work.iterdir()) == [] and list(cache.iterdir()) == []


def machine_with(gpus: tuple[Gpu, ...], **packages: str) -> Machine:
    """This machine as a GPU host would report it: the requirements are checked against what is reported."""
    return Machine(
        executor="local",
        cpus=16,
        memory_bytes=2**37,
        torch="2.9.0",
        cuda="12.8" if gpus else None,
        cuda_available=bool(gpus),
        gpus=gpus,
        visible_gpu_ids=tuple(str(i) for i in range(len(gpus))),
        packages={"vllm": None, "deepspeed": None, "flash_attn": None, **packages},
        sandbox_level="namespaces",
        sandbox_levels={"process": True, "process+lsm": False, "namespaces": True, "strict": False},
    )


def test_requirements_on_a_reported_gpu_host(tmp_path):
    from ade_core.cli_support import load_checked

    loaded = load_checked(
        str(EXAMPLES / "paper-reward-design-math.toml"),
        ("training.grpo.vllm_mode=colocate", "operational.sandbox.min_isolation=strict"),
    )
    h100 = Gpu("NVIDIA H100 80GB HBM3", 85 * 2**30, bf16=True)
    by_key = {r.key: r for r in requirements(loaded, machine_with((h100,) * 8, vllm="0.11.0"))}
    assert by_key["[resources].device = 'cuda'"].met and by_key["[resources]"].met
    assert by_key["[model].dtype = 'bfloat16' and [training.grpo].bf16 = true"].met
    assert by_key["[training.grpo].vllm_mode = 'colocate'"].met
    assert not by_key["[operational.sandbox].min_isolation = 'strict'"].met

    v100 = Gpu("Tesla V100-SXM2-32GB", 32 * 2**30, bf16=False)
    by_key = {r.key: r for r in requirements(loaded, machine_with((v100,) * 4))}
    assert "needs 8 GPU(s) per attempt but 4 are visible" in by_key["[resources]"].detail
    assert not by_key["[model].dtype = 'bfloat16' and [training.grpo].bf16 = true"].met
    assert not by_key["[training.grpo].vllm_mode = 'colocate'"].met
