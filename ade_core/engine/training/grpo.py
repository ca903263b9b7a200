"""GRPO with TRL: sandboxed rewards, group credit, selectable advantages, curricula in order (Table 12)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ade_core.engine.generation.hf import decode_completion
from ade_core.engine.model import EngineError, load_for_training
from ade_core.engine.prompts import conversation
from ade_core.engine.training import skip_uninitialized_fill, step_reporter
from ade_core.engine.training.advantages import advantages
from ade_core.engine.training.rewards import RewardPipeline, Rollout
from ade_core.judging.process import process_judge
from ade_core.schemas.config import ExperimentConfig, GRPORecipe
from ade_core.specs import GraderSpec, StrategyInterface
from ade_sandbox import Service


@dataclass(frozen=True)
class Problem:
    """One RFT training problem."""

    problem_id: str
    problem: str
    answer: Any


@dataclass(frozen=True)
class GRPORun:
    """What GRPO produced: checkpoints, the log, every rollout, and the problems each step consumed."""

    checkpoints: list[tuple[int, Path]]
    log: list[dict[str, Any]]
    rollouts: list[Rollout]
    consumed: list[list[str]]
    reward_failures: int
    reward_statuses: dict[str, int]  # rows and groups that did not train on the reward as written, by status
    sign_guard_violations: int  # mixed groups trained on outcome credit because the credit broke the sign guard
    added_tokens: tuple[str, ...] = ()  # special tokens the Engine added to the target's vocabulary


def response_decoder(tokenizer: Any) -> Callable[[Sequence[int]], str]:
    """The rollout text as evaluation decodes it: special tokens kept, ended at eos, pad dropped,
    so a reward sees the same ``<think>``/``</think>`` the grader sees at evaluation."""
    stop = {tokenizer.eos_token_id} if tokenizer.eos_token_id is not None else set()
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else -1
    return lambda ids: decode_completion(tokenizer, ids, stop_ids=stop, pad_id=pad).text


def batch_geometry(recipe: GRPORecipe) -> tuple[int, int]:
    """(micro-batch of completions per device, accumulation steps) giving one optimizer step per
    ``prompts_per_step`` x ``rollouts_per_prompt`` completions (whole groups are generated together)."""
    completions = recipe.prompts_per_step * recipe.rollouts_per_prompt
    per_step_device = recipe.per_device_batch_size * recipe.world_size
    if completions % per_step_device:
        raise EngineError(
            f"[training.grpo]: prompts_per_step x rollouts_per_prompt = {completions} completions must split into "
            f"whole micro-batches of per_device_batch_size ({recipe.per_device_batch_size}) x world_size "
            f"({recipe.world_size}); adjust per_device_batch_size"
        )
    return recipe.per_device_batch_size, completions // per_step_device


def vllm_arguments(recipe: GRPORecipe, server_url: str | None = None) -> dict[str, Any]:
    """TRL's rollout-generation options for ``[training.grpo].vllm_mode``; ``server_url`` is where
    ``trl vllm-serve`` listens in 'server' mode ([operational.generation].vllm_server_url)."""
    if recipe.vllm_mode == "off":
        return {"use_vllm": False}
    arguments: dict[str, Any] = {"use_vllm": True, "vllm_mode": recipe.vllm_mode}
    if recipe.vllm_mode == "server" and server_url is not None:
        arguments["vllm_server_base_url"] = server_url
    return arguments


def grpo_arguments(
    config: ExperimentConfig, output_dir: Path, seed: int, vllm_server_url: str | None = None
) -> dict[str, Any]:
    recipe = config.training.grpo
    assert recipe is not None
    micro, accumulation = batch_geometry(recipe)
    cpu = config.resources.device == "cpu"
    rule = config.checkpoint
    return {
        "output_dir": str(output_dir),
        "per_device_train_batch_size": micro,
        "gradient_accumulation_steps": accumulation,
        "steps_per_generation": accumulation,
        "num_generations": recipe.rollouts_per_prompt,
        "max_steps": recipe.total_steps,
        "learning_rate": recipe.learning_rate,
        "lr_scheduler_type": recipe.lr_scheduler,
        "weight_decay": recipe.weight_decay,
        "max_grad_norm": recipe.max_grad_norm,
        "beta": recipe.kl_coef,  # TRL's KL term is the k3 (low-variance) estimator
        "epsilon": recipe.clip_ratio,
        "entropy_coef": recipe.entropy_coef,
        "max_completion_length": recipe.max_response_tokens,
        "temperature": recipe.rollout_temperature,
        "shuffle_dataset": recipe.shuffle_data,
        "seed": seed,
        "chat_template_kwargs": dict(config.model.chat_template_kwargs),  # TRL renders the rollout prompts
        "data_seed": seed,
        "full_determinism": cpu,
        "use_cpu": cpu,
        "bf16": recipe.bf16 and not cpu,
        "gradient_checkpointing": False,
        "logging_steps": 1,
        "report_to": "none",
        "save_strategy": "steps" if rule.every_steps else "no",
        "save_steps": rule.every_steps or 1,
        "save_only_model": True,
        "disable_tqdm": True,
        "remove_unused_columns": False,
        **vllm_arguments(recipe, vllm_server_url),
    }


@contextlib.contextmanager
def actor_order_kept() -> Iterator[None]:
    """``shuffle_actor = false``: TRL shuffles each generation batch before splitting it into the actor's
    micro-batches (``shuffle_sequence_dict``); while this is open the split keeps the batch's order."""
    from trl.trainer import grpo_trainer

    original = grpo_trainer.shuffle_sequence_dict
    grpo_trainer.shuffle_sequence_dict = lambda seq_dict: seq_dict
    try:
        yield
    finally:
        grpo_trainer.shuffle_sequence_dict = original


def train_grpo(
    config: ExperimentConfig,
    model_path: Path,
    problems: Sequence[Problem],
    output_dir: Path,
    seed: int,
    grader: GraderSpec,
    reward_source: str | None = None,
    services: Sequence[Service] = (),
    interface: StrategyInterface | None = None,
    on_step: Callable[[int, int], None] | None = None,
    vllm_server_url: str | None = None,
) -> GRPORun:
    """Train on ``problems`` in the given order (a curriculum is its schedule, flattened); rollouts come
    from vLLM when ``[training.grpo].vllm_mode`` says so, at ``vllm_server_url`` in 'server' mode."""
    from datasets import Dataset
    from transformers import PrinterCallback
    from trl import GRPOConfig, GRPOTrainer

    assert config.training.grpo is not None
    recipe = config.training.grpo
    if recipe.advantage_estimator == "maxrl" and reward_source is not None:
        raise EngineError(
            "advantage_estimator = 'maxrl' needs binary rewards, but this command trains with a reward module; "
            "use 'grpo' or an outcome-only intervention"
        )
    prepared = load_for_training(model_path, config.model.special_tokens, config.model.dtype)
    rows = [
        {"prompt": conversation(config, p.problem), "problem_id": p.problem_id, "answer": p.answer} for p in problems
    ]
    pipeline = RewardPipeline(
        grader,
        recipe.rollouts_per_prompt,
        reward_source,
        recipe.reward_scale,
        max_tokens=recipe.max_response_tokens,
        services=services,
        interface=interface,
        process_judge=process_judge(config.judge) if config.judge.enabled and reward_source is not None else None,
        estimator=recipe.advantage_estimator,
        decode=response_decoder(prepared.tokenizer),
    )
    consumed: list[list[str]] = []
    rollouts: list[Rollout] = []

    class Trainer(GRPOTrainer):
        """TRL has no advantage hook: replace the computed advantages, keeping its reward matrix."""

        def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
            import torch

            pipeline.step = self.state.global_step
            out = super()._generate_and_score_completions(inputs)
            rewards = pipeline.training_rewards()
            values = advantages(rewards, recipe.rollouts_per_prompt, recipe.advantage_estimator)
            for rollout, value in zip(pipeline.last_batch, values, strict=True):
                rollout.advantage = value
            rollouts.extend(pipeline.last_batch)
            ids = [r.problem_id for r in pipeline.last_batch[:: recipe.rollouts_per_prompt]]
            consumed.append(ids)
            out["advantages"] = torch.tensor(values, dtype=out["advantages"].dtype, device=out["advantages"].device)
            return out

        def _prepare_inputs(self, generation_batch: Any) -> Any:
            if recipe.shuffle_actor:
                return super()._prepare_inputs(generation_batch)
            with actor_order_kept():
                return super()._prepare_inputs(generation_batch)

    args = GRPOConfig(**grpo_arguments(config, output_dir, seed, vllm_server_url))
    model: Any = prepared.model
    if prepared.added_tokens and recipe.kl_coef > 0:
        # TRL loads its KL reference model from the policy's path: give it the resized base model.
        base = output_dir / "base-with-added-tokens"
        prepared.model.save_pretrained(base)
        prepared.tokenizer.save_pretrained(base)
        model = str(base)
    try:
        trainer = Trainer(
            model=model,
            reward_funcs=[pipeline],
            args=args,
            train_dataset=Dataset.from_list(rows),
            processing_class=prepared.tokenizer,
        )
        trainer.remove_callback(PrinterCallback)
        if on_step is not None:
            trainer.add_callback(step_reporter(on_step))
        skip_uninitialized_fill()  # after the trainer has switched determinism on
        trainer.train()
        checkpoints = _finish(trainer, prepared.tokenizer, output_dir, config.checkpoint.include_final)
    finally:
        pipeline.close()
    log = [dict(entry) for entry in trainer.state.log_history]
    return GRPORun(
        checkpoints,
        log,
        rollouts,
        consumed,
        pipeline.failures,
        dict(pipeline.statuses),
        pipeline.guard_violations,
        prepared.added_tokens,
    )


def _finish(trainer: Any, tokenizer: Any, output_dir: Path, include_final: bool) -> list[tuple[int, Path]]:
    checkpoints = sorted(
        (int(p.name.split("-", 1)[1]), p) for p in output_dir.glob("checkpoint-*") if p.name.split("-", 1)[1].isdigit()
    )
    step = trainer.state.global_step
    if include_final and step not in dict(checkpoints):
        final = output_dir / f"checkpoint-{step}"
        trainer.save_model(str(final))
        checkpoints.append((step, final))
    for _, path in checkpoints:
        tokenizer.save_pretrained(path)
    return sorted(checkpoints)
