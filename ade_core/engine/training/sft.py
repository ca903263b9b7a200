"""SFT with TRL, loss on assistant tokens only (paper Appendix D.3, Table 11): full-parameter, or LoRA
adapters through peft merged into every published checkpoint (seed 001); the checkpoint rule may keep
only the checkpoint with the lowest loss on a held-apart slice of the selected examples."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ade_core.engine.model import EngineError, load_for_training
from ade_core.engine.training import skip_uninitialized_fill, step_reporter
from ade_core.schemas.config import ExperimentConfig, SFTRecipe

IGNORE = -100


@dataclass(frozen=True)
class TokenizedExample:
    """One training example as trained: ids, labels (-100 outside assistant turns), truncation."""

    example_id: str
    input_ids: list[int]
    labels: list[int]
    original_tokens: int
    truncated: bool

    @property
    def target_tokens(self) -> int:
        return sum(1 for label in self.labels if label != IGNORE)


def assistant_spans(
    tokenizer: Any, messages: Sequence[dict[str, str]], template_kwargs: Mapping[str, Any] | None = None
) -> tuple[str, list[tuple[int, int]]]:
    """Render a conversation (``template_kwargs``: [model].chat_template_kwargs) and return the character
    spans of its assistant turns (with their end tokens)."""
    extra = dict(template_kwargs or {})
    text = tokenizer.apply_chat_template(list(messages), tokenize=False, **extra)
    spans = []
    for index, message in enumerate(messages):
        if message["role"] != "assistant":
            continue
        prefix = tokenizer.apply_chat_template(
            list(messages[:index]), tokenize=False, add_generation_prompt=True, **extra
        )
        upto = tokenizer.apply_chat_template(list(messages[: index + 1]), tokenize=False, **extra)
        if not (text.startswith(prefix) and text.startswith(upto) and len(upto) >= len(prefix)):
            raise EngineError(
                "the chat template does not render conversation prefixes consistently, so assistant tokens cannot "
                "be located; use a template whose rendering of messages[:i] is a prefix of the full rendering"
            )
        spans.append((len(prefix), len(upto)))
    return text, spans


def tokenize_example(
    tokenizer: Any,
    example_id: str,
    messages: Sequence[dict[str, str]],
    cap: int,
    template_kwargs: Mapping[str, Any] | None = None,
) -> TokenizedExample:
    """Token ids with labels only on assistant turns; truncated to ``cap`` tokens and recorded."""
    text, spans = assistant_spans(tokenizer, messages, template_kwargs)
    encoded = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    ids, offsets = encoded["input_ids"], encoded["offset_mapping"]
    labels = [
        token if any(start <= begin < end for start, end in spans) else IGNORE
        for token, (begin, _) in zip(ids, offsets, strict=True)
    ]
    original = len(ids)
    return TokenizedExample(example_id, ids[:cap], labels[:cap], original, original > cap)


def warmup_steps(recipe: SFTRecipe, examples: int) -> int:
    import math

    steps_per_epoch = math.ceil(examples / recipe.effective_batch_size)
    return int(recipe.warmup_ratio * math.ceil(steps_per_epoch * recipe.epochs))


def training_arguments(config: ExperimentConfig, output_dir: Path, seed: int, examples: int) -> dict[str, Any]:
    """Keyword arguments for TRL's SFTConfig: the recipe, the checkpoint rule and the device policy."""
    recipe = config.training.sft
    assert recipe is not None
    cpu = config.resources.device == "cpu"
    rule = config.checkpoint
    arguments: dict[str, Any] = {
        "output_dir": str(output_dir),
        "per_device_train_batch_size": recipe.per_device_batch_size,
        "gradient_accumulation_steps": recipe.gradient_accumulation_steps,
        "learning_rate": recipe.learning_rate,
        "lr_scheduler_type": recipe.lr_scheduler,
        "warmup_steps": warmup_steps(recipe, examples),
        "num_train_epochs": recipe.epochs,
        "weight_decay": recipe.weight_decay,
        "max_grad_norm": recipe.max_grad_norm,
        "seed": seed,
        "data_seed": seed,
        "full_determinism": cpu,  # reproducible re-runs of a killed attempt (tested on CPU)
        "use_cpu": cpu,
        "bf16": recipe.bf16 and not cpu,  # bf16 autocast is ~25x slower on CPUs without native bf16
        "gradient_checkpointing": False,
        "logging_steps": 1,
        "report_to": "none",
        "save_strategy": "steps" if rule.every_steps else ("epoch" if rule.every_epoch else "no"),
        "save_only_model": True,
        "max_length": None,  # examples arrive tokenized and capped
        "dataset_kwargs": {"skip_prepare_dataset": True},
        "remove_unused_columns": False,
        "disable_tqdm": True,
    }
    if rule.every_steps:
        arguments["save_steps"] = rule.every_steps
    if rule.select == "validation_loss":  # score the held-apart slice at every save, before the save
        arguments["eval_strategy"] = arguments["save_strategy"]
        arguments["per_device_eval_batch_size"] = recipe.per_device_batch_size
        if rule.every_steps:
            arguments["eval_steps"] = rule.every_steps
    if recipe.deepspeed is not None:
        arguments["deepspeed"] = deepspeed_config(recipe)
    return arguments


def deepspeed_config(recipe: SFTRecipe) -> dict[str, Any]:
    """The DeepSpeed ZeRO configuration passed through to the trainer (optional `gpu` extra)."""
    assert recipe.deepspeed is not None
    zero: dict[str, Any] = {"stage": recipe.deepspeed.zero_stage, "overlap_comm": True, "contiguous_gradients": True}
    if recipe.deepspeed.zero_stage == 3:
        zero["stage3_gather_16bit_weights_on_model_save"] = True
    if recipe.deepspeed.offload_optimizer:
        zero["offload_optimizer"] = {"device": "cpu", "pin_memory": True}
    return {
        "zero_optimization": zero,
        "bf16": {"enabled": "auto"},
        "train_micro_batch_size_per_gpu": "auto",
        "gradient_accumulation_steps": "auto",
        "train_batch_size": "auto",
        "gradient_clipping": "auto",
    }


def lora_config(recipe: SFTRecipe, embedding_modules: Sequence[str], *, tied: bool) -> Any:
    """peft's LoraConfig for ``[training.sft.lora]``; ``embedding_modules`` (the embeddings, when the Engine
    added tokens whose rows must learn) train in full next to the adapters."""
    from peft import LoraConfig

    lora = recipe.lora
    assert lora is not None
    modules: str | list[str] = "all-linear" if lora.target_modules == ("all-linear",) else list(lora.target_modules)
    return LoraConfig(
        r=lora.rank,
        lora_alpha=lora.alpha,
        lora_dropout=lora.dropout,
        target_modules=modules,
        task_type="CAUSAL_LM",
        modules_to_save=list(embedding_modules) or None,
        ensure_weight_tying=tied and bool(embedding_modules),
    )


def embedding_modules(model: Any) -> tuple[str, ...]:
    """Names of the input embedding and the output head (peft keeps them tied when the model ties them)."""
    names = {module: name.rsplit(".", 1)[-1] for name, module in model.named_modules()}
    head = model.get_output_embeddings()
    return (names[model.get_input_embeddings()],) + ((names[head],) if head is not None else ())


def merge_adapters(config: ExperimentConfig, model_path: Path, checkpoints: Sequence[tuple[int, Path]]) -> None:
    """Replace each checkpoint's adapters by the full model with them merged in, so evaluation loads it as
    any model. The adapter files are kept under ``adapter/`` in the checkpoint."""
    from peft import PeftModel

    for _, path in checkpoints:
        adapter = path / "adapter"
        adapter.mkdir(exist_ok=True)
        for name in ("adapter_model.safetensors", "adapter_config.json", "README.md"):
            if (path / name).exists():
                (path / name).replace(adapter / name)
        base = load_for_training(model_path, config.model.special_tokens, config.model.dtype).model
        merged = PeftModel.from_pretrained(base, str(adapter)).merge_and_unload()
        merged.save_pretrained(str(path))


def split_validation(
    examples: Sequence[TokenizedExample], fraction: float, seed: int
) -> tuple[list[TokenizedExample], list[TokenizedExample]]:
    """(train, validation): ``fraction`` of the examples, at least one, drawn with ``seed``; order kept."""
    import math
    import random

    if len(examples) < 2:
        raise EngineError(
            f"[checkpoint] select = 'validation_loss' holds apart a validation slice, but only {len(examples)} "
            "example was selected; select more examples or use select = 'all'"
        )
    size = min(len(examples) - 1, max(1, math.floor(fraction * len(examples))))
    held = set(random.Random(seed).sample(range(len(examples)), size))
    return (
        [e for i, e in enumerate(examples) if i not in held],
        [e for i, e in enumerate(examples) if i in held],
    )


def validation_losses(log: Sequence[Mapping[str, Any]]) -> dict[int, float]:
    """The held-apart slice's loss at each step it was scored, from the trainer's log."""
    return {int(entry["step"]): float(entry["eval_loss"]) for entry in log if "eval_loss" in entry}


@dataclass(frozen=True)
class TrainingRun:
    """What training produced: checkpoints by step, the log, and the examples as trained.

    With ``[checkpoint] select = 'validation_loss'`` only the checkpoint with the lowest validation loss is
    published; ``validation`` holds the examples held apart and ``validation_loss`` each saved step's loss."""

    checkpoints: list[tuple[int, Path]]
    log: list[dict[str, Any]]
    examples: list[TokenizedExample]
    added_tokens: tuple[str, ...]
    validation: list[TokenizedExample] = field(default_factory=list)
    validation_loss: dict[int, float] = field(default_factory=dict)


def train_sft(
    config: ExperimentConfig,
    model_path: Path,
    conversations: Sequence[tuple[str, list[dict[str, str]]]],
    output_dir: Path,
    seed: int,
    on_step: Callable[[int, int], None] | None = None,
) -> TrainingRun:
    """Train on ``conversations`` (id, messages) and return every published checkpoint."""
    from datasets import Dataset
    from transformers import PrinterCallback
    from trl import SFTConfig, SFTTrainer

    if not conversations:
        raise EngineError("the intervention selected no training examples")
    prepared = load_for_training(model_path, config.model.special_tokens, config.model.dtype)
    cap = config.data.max_tokens_per_example
    kwargs = config.model.chat_template_kwargs
    examples = [tokenize_example(prepared.tokenizer, eid, messages, cap, kwargs) for eid, messages in conversations]
    trainable = [e for e in examples if e.target_tokens > 0]
    if not trainable:
        raise EngineError(f"no example keeps an assistant token within the {cap}-token cap")
    rule = config.checkpoint
    held: list[TokenizedExample] = []
    if rule.select == "validation_loss":
        trainable, held = split_validation(trainable, rule.validation_fraction, seed)

    def rows(chosen: Sequence[TokenizedExample]) -> Any:
        return Dataset.from_list([{"input_ids": e.input_ids, "labels": e.labels} for e in chosen])

    args = SFTConfig(**training_arguments(config, output_dir, seed, len(trainable)))
    recipe = config.training.sft
    assert recipe is not None
    adapters = None
    if recipe.lora is not None:
        tied = prepared.model.config.get_text_config().tie_word_embeddings
        adapters = lora_config(recipe, embedding_modules(prepared.model) if prepared.added_tokens else (), tied=tied)
    trainer = SFTTrainer(
        model=prepared.model,
        args=args,
        train_dataset=rows(trainable),
        eval_dataset=rows(held) if held else None,
        processing_class=prepared.tokenizer,
        peft_config=adapters,
    )
    trainer.remove_callback(PrinterCallback)
    if on_step is not None:
        trainer.add_callback(step_reporter(on_step))
    skip_uninitialized_fill()  # after the trainer has switched determinism on
    trainer.train()
    checkpoints = _checkpoints(output_dir)
    final_step = trainer.state.global_step
    if rule.include_final and final_step not in dict(checkpoints):
        final = output_dir / f"checkpoint-{final_step}"
        trainer.save_model(str(final))
        checkpoints.append((final_step, final))
    losses: dict[int, float] = {}
    if held:
        losses = validation_losses(trainer.state.log_history)
        if final_step in dict(checkpoints) and final_step not in losses:
            losses[final_step] = float(trainer.evaluate()["eval_loss"])
        scored = [(step, path) for step, path in checkpoints if step in losses]
        best = min(scored, key=lambda item: (losses[item[0]], item[0]))  # the earlier step on a tie
        checkpoints = [best]
    if recipe.lora is not None:
        merge_adapters(config, model_path, checkpoints)
    for _, path in checkpoints:
        prepared.tokenizer.save_pretrained(path)
    log = [dict(entry) for entry in trainer.state.log_history]
    return TrainingRun(sorted(checkpoints), log, examples, prepared.added_tokens, held, losses)


def _checkpoints(output_dir: Path) -> list[tuple[int, Path]]:
    found = []
    for path in output_dir.glob("checkpoint-*"):
        suffix = path.name.split("-", 1)[1]
        if suffix.isdigit():
            found.append((int(suffix), path))
    return sorted(found)
