"""A miniature experiment for Engine tests: tiny model, candidate groups, problems, benchmarks, jobs."""

from __future__ import annotations

import json
from pathlib import Path

from ade_core.config import load_config
from ade_core.engine.job import EngineJob
from ade_core.engine.tiny_lm import build_tiny_lm
from ade_core.schemas.artifact import BoundCommand, Intervention, ResourceRequest

DIGEST = "sha256:" + "0" * 64


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def build_world(root: Path) -> Path:
    """Model and data files under ``root``; returns root."""
    build_tiny_lm(root / "model")
    groups, problems = [], []
    for i in range(24):
        a, b = i % 7, i % 5
        groups.append(
            {
                "candidate_id": f"c{i}",
                "domain": "math",
                "problem_id": f"p{i}",
                "trajectories": [
                    {
                        "trajectory_id": f"c{i}-t0",
                        "messages": [
                            {"role": "user", "content": f"What is {a}+{b}?"},
                            {"role": "assistant", "content": f"<think>{a}+{b}={a + b}</think>\\boxed{{{a + b}}}"},
                        ],
                    }
                ],
            }
        )
        problems.append({"problem_id": f"q{i}", "problem": f"What is {a}+{b}?", "answer": str(a + b)})
    write_jsonl(root / "candidates.jsonl", groups)
    write_jsonl(root / "problems.jsonl", problems)
    write_jsonl(
        root / "bench.jsonl", [{"id": f"b{i}", "problem": f"What is {i}+1?", "answer": str(i + 1)} for i in range(4)]
    )
    write_jsonl(
        root / "heldout.jsonl", [{"id": f"h{i}", "problem": f"What is {i}+2?", "answer": str(i + 2)} for i in range(3)]
    )
    return root


SFT_TOML = """
task = "data_selection"
name = "engine-test"
[model]
target = "model"
[data]
source = "candidates.jsonl"
select_size = 12
max_tokens_per_example = 48
[data.pool]
size = 24
[training]
paradigm = "sft"
[training.sft]
learning_rate = 5e-3
lr_scheduler = "constant"
per_device_batch_size = 4
epochs = 2
[checkpoint]
every_epoch = true
[evaluation]
prompt_template = "{problem}"
[evaluation.in_loop]
name = "bench"
source = "bench.jsonl"
grader = "boxed_exact"
k_online = 2
k_offline = 3
[[evaluation.held_out]]
name = "heldout"
source = "heldout.jsonl"
grader = "boxed_exact"
k = 2
[evaluation.decoding]
temperature = 0.8
top_p = 0.95
max_context_tokens = 256
max_new_tokens = 12
"""

GRPO_TOML = """
task = "{task}"
name = "engine-test-rft"
[model]
target = "model"
[data]
source = "problems.jsonl"
max_tokens_per_example = 128
[data.pool]
size = 24
[training]
paradigm = "grpo"
[training.grpo]
total_steps = 3
prompts_per_step = 2
rollouts_per_prompt = 4
per_device_batch_size = 8
learning_rate = 1e-3
lr_scheduler = "constant"
max_response_tokens = 12
shuffle_data = {shuffle}
advantage_estimator = "{estimator}"
[checkpoint]
every_steps = 2
[evaluation.in_loop]
name = "bench"
source = "bench.jsonl"
grader = "boxed_exact"
k_online = 1
k_offline = 2
[evaluation.decoding]
temperature = 0.8
top_p = 0.95
max_context_tokens = 256
max_new_tokens = 12
"""


def make_job(root: Path, toml: str, intervention: Intervention, attempt: str = "a1") -> EngineJob:
    path = root / f"{attempt}-config.toml"
    path.write_text(toml)
    config = load_config(path).experiment
    command = BoundCommand(
        task=config.task,
        strategy_digest=DIGEST,
        intervention=intervention,
        config_digest=config.digest(),
        seeds={"training": 3, "evaluation": 5},
        resources=ResourceRequest(device="cpu"),
    )
    return EngineJob(
        trial_id="C1/P1/T1", attempt_id=attempt, command=command, config=config, base_dir=str(root), grading_workers=1
    )


def sft_job(root: Path, attempt: str = "a1") -> EngineJob:
    selected = sorted(f"c{i}" for i in range(12))
    return make_job(
        root,
        SFT_TOML,
        Intervention(kind="sft_selection", payload={"selected_ids": selected}, summary="12 trajectories"),
        attempt,
    )
