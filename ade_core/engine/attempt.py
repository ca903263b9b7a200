"""One Engine attempt: train -> checkpoints -> online eval -> select -> offline eval -> package.

An attempt always starts training from scratch in a fresh work directory, so a killed
attempt re-run from the same command with the same seeds reproduces the same result on CPU.
"""

from __future__ import annotations

import gc
import importlib.metadata
import json
import os
import shutil
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ade_core.engine import data, pool
from ade_core.engine.evaluation import Evaluation, evaluate
from ade_core.engine.grading.pool import GradingPool
from ade_core.engine.job import EngineJob
from ade_core.engine.metrics import select_best
from ade_core.engine.model import EngineError
from ade_core.engine.package import write_package
from ade_core.engine.threads import apply_threads
from ade_core.engine.training.diagnostics import divergence, step_diagnostics
from ade_core.engine.training.grpo import train_grpo
from ade_core.engine.training.sft import train_sft
from ade_core.harness.admission import sandbox_services
from ade_core.plugins import PluginRegistry, load_plugins
from ade_core.schemas.package import CheckpointScore
from ade_core.specs import GraderSpec, MetricSpec, TrainingTrace

HEARTBEAT = "heartbeat.json"


@dataclass
class Heartbeat:
    """Writes ``heartbeat.json`` every few seconds so executors can tell a live attempt from a dead one."""

    path: Path
    attempt_id: str
    interval_s: float = 2.0
    phase: str = "starting"
    detail: dict[str, Any] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self._write()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def set(self, phase: str, **detail: Any) -> None:
        self.phase, self.detail = phase, detail
        self._write()

    def _write(self) -> None:
        beat = {
            "attempt_id": self.attempt_id,
            "pid": os.getpid(),
            "phase": self.phase,
            "detail": self.detail,
            "time": time.time(),
        }
        with self._lock:  # the beat thread and a phase change must not share one temporary file
            tmp = self.path.with_suffix(".tmp")
            tmp.write_text(json.dumps(beat), encoding="utf-8")
            tmp.replace(self.path)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._write()

    def stop(self, phase: str) -> None:
        self._stop.set()
        self.set(phase)


def installed_versions() -> dict[str, str]:
    """Versions of every installed ADE distribution (core, sandbox, task plugins)."""
    found = {}
    for dist in importlib.metadata.distributions():
        name = dist.metadata["Name"] or ""
        if name.startswith("ade-"):
            found[name] = dist.version
    return dict(sorted(found.items()))


def _seeds(job: EngineJob) -> tuple[int, int]:
    return job.command.seeds.get("training", 0), job.command.seeds.get("evaluation", 0)


def run_attempt(job: EngineJob, out_dir: Path, registry: PluginRegistry | None = None) -> Path:
    """Execute the command; return the path of the sealed Experiment Package."""
    job.check()
    registry = registry or load_plugins()
    task = registry.task(job.config.task)
    out_dir.mkdir(parents=True, exist_ok=True)
    work = out_dir / "work"
    shutil.rmtree(work, ignore_errors=True)  # a re-run starts from scratch, never from a half-run
    work.mkdir()
    heartbeat = Heartbeat(out_dir / HEARTBEAT, job.attempt_id)
    try:
        return _run(job, out_dir, work, registry, task, heartbeat)
    except BaseException:
        heartbeat.stop("failed")
        raise


def _run(job, out_dir, work, registry, task, heartbeat) -> Path:
    import torch

    config, base = job.config, Path(job.base_dir)
    train_seed, _ = _seeds(job)
    torch.manual_seed(train_seed)
    granted = apply_threads(config)
    model_path = data.resolve_model(base, config.model.target)
    if config.training.paradigm == "sft":
        rows = pool.candidate_rows(config, base)
    else:
        rows = data.read_jsonl(data.resolve_path(base, config.data.source, config.training.paradigm))
        # GRPO trains on the prompts within the recipe's limit, the rows a strategy's inventory held.
        from transformers import AutoTokenizer

        eligible = pool.rft_inventory(config, base, AutoTokenizer.from_pretrained(model_path))
        if eligible.overlength:
            excluded = set(eligible.overlength)
            rows = [row for row in rows if data.row_id(row) not in excluded]
    graders = registry.graders()
    in_loop = config.evaluation.in_loop
    if in_loop.grader not in graders:
        raise EngineError(f"unknown grader {in_loop.grader!r}; installed: {sorted(graders)}")
    grader = graders[in_loop.grader]
    metrics = task.metrics()
    order = task.spec.metric_order
    timings: dict[str, float] = {}
    records: dict[str, list[dict[str, Any]]] = {}

    started = time.monotonic()
    heartbeat.set("train")

    def train_progress(step: int, total: int) -> None:
        heartbeat.set("train", step=step, total=total)

    intervention = job.command.intervention
    kind = task.intervention_kind(intervention.kind)  # the Engine asks the kind, never branches on its name
    payload = intervention.payload
    if config.training.paradigm == "sft":
        assert kind.training_examples is not None  # InterventionKind requires it of an SFT kind
        conversations = data.sft_conversations(rows, list(kind.training_examples(payload)))
        run = train_sft(config, model_path, conversations, work / "train", train_seed, on_step=train_progress)
        inventory = {row["candidate_id"]: row for row in rows}
        cap = config.data.max_tokens_per_example
        held_apart = {e.example_id for e in run.validation}  # [checkpoint] select = 'validation_loss'
        records["selected_examples"] = [
            {
                "trajectory_id": e.example_id,
                **{k: inventory[e.example_id].get(k) for k in ("candidate_id", "problem_id", "domain")},
                "length_bin": pool.length_bin(min(e.original_tokens, cap), cap),
                "over_cap": e.original_tokens > cap,
                "messages": inventory[e.example_id]["messages"],
                "tokens": len(e.input_ids),
                "original_tokens": e.original_tokens,
                "truncated": e.truncated,
                "target_tokens": e.target_tokens,
                "held_apart": e.example_id in held_apart,
            }
            for e in run.examples
        ]
        checkpoints, log, added_tokens = run.checkpoints, run.log, run.added_tokens
        trace = TrainingTrace(payload=payload, pool=inventory, examples=records["selected_examples"])
    else:
        recipe = config.training.grpo
        assert recipe is not None
        schedule = kind.prompt_schedule(payload) if kind.prompt_schedule else None
        problems = data.rft_problems(rows, schedule, recipe.shuffle_data)
        source = kind.reward_source(payload) if kind.reward_source else None
        grpo = train_grpo(
            config,
            model_path,
            problems,
            work / "train",
            train_seed,
            grader,
            source,
            services=sandbox_services(task.services(config)) if source is not None else (),
            interface=task.interface() if source is not None else None,
            on_step=train_progress,
            vllm_server_url=job.generation.vllm_server_url,
        )
        records["training_rollouts"] = [
            {
                "step": r.step,
                "problem_id": r.problem_id,
                "prompt_group_id": f"{r.step}/{r.group}",
                "question": r.question,
                "response": r.response,
                "num_tokens": r.num_tokens,
                "outcome": r.outcome,
                "extracted_answer": r.extracted_answer,
                "process_evidence": r.process,
                "score": r.score,
                "artifact_projection": r.projection,
                "rule_evidence": r.rule_evidence,
                "pre_group_reward": r.pre_group_reward,
                "reward": r.reward,
                "advantage": r.advantage,
                "reward_status": r.reward_status,
                "credit_mode": r.credit_mode,
            }
            for r in grpo.rollouts
        ]
        records["step_diagnostics"] = step_diagnostics(grpo.rollouts, recipe.rollouts_per_prompt, grpo.log)
        records["reward_health"] = [
            {
                "row_statuses": grpo.reward_statuses,
                "sign_guard_violations": grpo.sign_guard_violations,
                "rollouts": len(grpo.rollouts),
                "reward_outcome_divergence": divergence(records["step_diagnostics"]),
            }
        ]
        checkpoints, log, added_tokens = grpo.checkpoints, grpo.log, grpo.added_tokens
        trace = TrainingTrace(
            payload=payload,
            pool={data.row_id(row): row for row in rows},
            consumed=grpo.consumed,
            rollouts=records["training_rollouts"],
        )
    records.update(task.kind_records(kind, trace))
    timings["train"] = time.monotonic() - started
    records["training_log"] = [{k: v for k, v in entry.items() if isinstance(v, (int, float, str))} for entry in log]

    bench = data.benchmark_rows(data.resolve_path(base, in_loop.source))[: in_loop.limit]
    # One grading pool for every evaluation of the attempt: each worker imports the grader once.
    with GradingPool(grader, job.grading_workers) as grading:
        online, offline, selected_step, selected_path = _evaluate_checkpoints(
            job, checkpoints, bench, grader, metrics, order, grading, heartbeat, timings
        )
    records["checkpoint_scores"] = [
        {
            "step": step,
            "scores": result.scores,
            "missing_reason": result.missing_reason,
            "selected": step == selected_step,
        }
        for step, result in online
    ]
    if offline is not None:
        records["eval_responses"] = offline.responses
    complete = offline is not None and not offline.missing
    heartbeat.set("package")
    fields = {
        "trial_id": job.trial_id,
        "attempt_id": job.attempt_id,
        "task": job.config.task,
        "status": "completed" if complete else "evaluation_missing",
        "command_digest": job.command.digest(),
        "config_digest": job.command.config_digest,
        "strategy_digest": job.command.strategy_digest,
        "checkpoints": tuple(
            CheckpointScore(step=step, scores=result.scores, missing_reason=result.missing_reason)
            for step, result in online
        ),
        "selected_step": selected_step,
        "selected_checkpoint": str(selected_path) if selected_path else None,
        "in_loop_scores": offline.scores if offline is not None and complete else None,
        "versions": installed_versions(),
        "timings": timings,
        "resources": granted,
        "chat_template_kwargs": dict(config.model.chat_template_kwargs),
        "added_tokens": tuple(added_tokens),
    }
    schema = task.package_schema().records
    records.update(job.harness_records)
    package = write_package(out_dir, fields, {k: v for k, v in records.items()}, schema)
    heartbeat.stop("done")
    return package


def _evaluate_checkpoints(
    job: EngineJob,
    checkpoints: Sequence[tuple[int, Path]],
    bench: Sequence[Mapping[str, Any]],
    grader: GraderSpec,
    metrics: Mapping[str, MetricSpec],
    order: Sequence[str],
    grading: GradingPool,
    heartbeat: Heartbeat,
    timings: dict[str, float],
) -> tuple[list[tuple[int, Evaluation]], Evaluation | None, int | None, Path | None]:
    """Online evaluation of every checkpoint (K_online), selection, offline evaluation (K_offline) of the
    selected one; returns ``(online, offline, selected_step, selected_path)``."""
    in_loop = job.config.evaluation.in_loop
    eval_seed = _seeds(job)[1]

    def evaluate_at(path: Path, k: int) -> Evaluation:
        return evaluate(
            path,
            bench,
            k,
            config=job.config,
            grader=grader,
            metrics=metrics,
            seed=eval_seed,
            benchmark=in_loop.name,
            server=job.generation,
            pool=grading,
        )

    started = time.monotonic()
    online: list[tuple[int, Evaluation]] = []
    for index, (step, path) in enumerate(checkpoints):
        heartbeat.set("online_eval", checkpoint=step, done=index, total=len(checkpoints))
        online.append((step, evaluate_at(path, in_loop.k_online)))
    timings["online_eval"] = time.monotonic() - started
    scored = [(step, result.scores) for step, result in online if result.scores is not None]  # not missing
    selected_step = select_best(scored, order) if scored else None
    offline: Evaluation | None = None
    selected_path = dict(checkpoints).get(selected_step) if selected_step is not None else None
    if selected_path is not None:
        heartbeat.set("offline_eval", checkpoint=selected_step)
        started = time.monotonic()
        offline = evaluate_at(selected_path, in_loop.k_offline)
        timings["offline_eval"] = time.monotonic() - started
    gc.collect()  # once per attempt: closing each checkpoint's generator does not collect (generation/hf.py)
    return online, offline, selected_step, selected_path
