"""𝓑's ``[training]`` section: the SFT and GRPO recipes (paper Tables 11 and 12) and LoRA (seed 001).

Defaults are the papers' where they give one; values they leave open are marked "chosen by ADE".
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from ade_core.schemas.common import Model


class DeepSpeedConfig(Model):
    """DeepSpeed pass-through (optional `gpu` extra; never needed on CPU)."""

    zero_stage: Literal[0, 1, 2, 3] = Field(description="ZeRO stage (paper SFT: 3).")
    offload_optimizer: bool = Field(default=False, description="Offload optimizer state to CPU.")


class OptimizerCommon(Model):
    """Fields shared by the SFT and GRPO recipes."""

    learning_rate: float = Field(gt=0, description="Peak learning rate.")
    lr_scheduler: Literal["constant", "cosine", "linear"] = Field(description="Learning-rate schedule.")
    warmup_ratio: float = Field(default=0.0, ge=0, lt=1, description="Fraction of steps spent warming up.")
    weight_decay: float = Field(default=0.0, ge=0, description="AdamW weight decay.")
    max_grad_norm: float = Field(default=1.0, gt=0, description="Gradient clipping norm.")
    per_device_batch_size: int = Field(gt=0, description="Micro-batch per device.")
    gradient_accumulation_steps: int = Field(default=1, gt=0, description="Accumulation steps.")
    world_size: int = Field(default=1, gt=0, description="Training processes (GPUs); 1 on CPU.")
    bf16: bool = Field(default=False, description="bfloat16 training (paper: on; off on CPU, where it is ~25x slower).")
    deepspeed: DeepSpeedConfig | None = Field(default=None, description="DeepSpeed settings, if used.")

    @property
    def effective_batch_size(self) -> int:
        """per-device batch x accumulation x world size (paper Table 11)."""
        return self.per_device_batch_size * self.gradient_accumulation_steps * self.world_size


class LoRAConfig(Model):
    """Low-rank adapters through ``peft`` instead of full-parameter SFT (seed 001 trains LoRA).

    Every published checkpoint holds the adapters merged into the weights, so evaluation loads it
    as any other model. The seed does not print its rank, alpha or dropout: the defaults are chosen by ADE.
    """

    rank: int = Field(default=16, gt=0, description="Adapter rank r (chosen by ADE: 16).")
    alpha: int = Field(
        default=32, gt=0, description="Scaling alpha; updates are scaled by alpha / r (chosen by ADE: 32)."
    )
    dropout: float = Field(default=0.05, ge=0, lt=1, description="Dropout on the adapter input (chosen by ADE: 0.05).")
    target_modules: tuple[str, ...] = Field(
        default=("all-linear",),
        min_length=1,
        description="Module names that get adapters, or ('all-linear',): every linear layer but the output head "
        "(chosen by ADE; the seed narrows them for models whose layers do not accept LoRA).",
    )


class SFTRecipe(OptimizerCommon):
    """SFT with loss on assistant tokens only (paper Appendix D.3): full-parameter, or LoRA when ``lora`` is set."""

    epochs: float = Field(gt=0, description="Passes over the selected data.")
    lora: LoRAConfig | None = Field(
        default=None, description="Train LoRA adapters ([training.sft.lora]) instead of every parameter (seed 001)."
    )

    @model_validator(mode="after")
    def _lora_without_deepspeed(self) -> SFTRecipe:
        if self.lora is not None and self.deepspeed is not None:
            raise ValueError("[training.sft]: LoRA with DeepSpeed is not supported; drop [training.sft.deepspeed]")
        return self


class GRPORecipe(OptimizerCommon):
    """GRPO recipe (paper Table 12)."""

    total_steps: int = Field(default=100, gt=0, description="Optimizer steps (paper: 100).")
    prompts_per_step: int = Field(default=256, gt=0, description="Prompts per step (paper: 256).")
    rollouts_per_prompt: int = Field(default=8, ge=2, description="Sampled responses per prompt (paper: 8).")
    clip_ratio: float = Field(default=0.2, gt=0, description="PPO clip epsilon (paper: 0.2).")
    entropy_coef: float = Field(default=0.001, ge=0, description="Entropy bonus (paper: 0.001).")
    kl_coef: float = Field(default=1e-4, ge=0, description="KL loss coefficient (paper: 1e-4).")
    kl_estimator: Literal["low_var_kl", "k1", "k3"] = Field(
        default="low_var_kl", description="KL estimator (paper: low-variance KL)."
    )
    max_prompt_tokens: int = Field(default=1024, gt=0, description="Prompt token limit (paper: 1,024).")
    max_response_tokens: int = Field(default=8192, gt=0, description="Response token limit (paper: 8,192).")
    rollout_temperature: float = Field(default=1.0, gt=0, description="Rollout sampling temperature (paper: 1.0).")
    shuffle_data: bool = Field(default=True, description="Shuffle training data (curriculum: off).")
    shuffle_actor: bool = Field(default=True, description="Shuffle actor mini-batches (curriculum: off).")
    advantage_estimator: Literal["grpo", "maxrl"] = Field(
        default="grpo",
        description="'grpo': (r - group mean) / group std; 'maxrl' (seed 001): (r - mean) / mean for binary "
        "rewards, 0 when the mean is 0.",
    )
    reward_scale: float = Field(default=1.0, gt=0, description="Multiplier applied to rewards before advantages.")
    vllm_mode: Literal["off", "colocate", "server"] = Field(
        default="off",
        description="Who generates the rollouts (TRL's use_vllm / vllm_mode; needs the `gpu` extra): 'off': the "
        "policy itself through transformers; 'colocate': a vLLM engine inside each training process; 'server': a "
        "separate `trl vllm-serve` process at [operational.generation].vllm_server_url.",
    )


class TrainingConfig(Model):
    """Training paradigm and its recipe; exactly the recipe of the paradigm is given."""

    paradigm: Literal["sft", "grpo"] = Field(description="'sft' or 'grpo'.")
    sft: SFTRecipe | None = Field(default=None, description="Recipe when paradigm = 'sft'.")
    grpo: GRPORecipe | None = Field(default=None, description="Recipe when paradigm = 'grpo'.")

    @model_validator(mode="after")
    def _recipe_matches(self) -> TrainingConfig:
        given = [name for name in ("sft", "grpo") if getattr(self, name) is not None]
        if given != [self.paradigm]:
            raise ValueError(
                f"paradigm = {self.paradigm!r} needs exactly a [training.{self.paradigm}] table "
                f"(got tables: {given or 'none'})"
            )
        return self

    @property
    def recipe(self) -> SFTRecipe | GRPORecipe:
        return self.sft if self.paradigm == "sft" else self.grpo  # type: ignore[return-value]  # the validator above requires the paradigm's table
