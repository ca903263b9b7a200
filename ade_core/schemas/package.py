"""The Experiment Package manifest e (paper Table 8): immutable evidence of one Trial."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ade_core.schemas.common import DigestField, Model
from ade_core.specs import Role


class RecordRef(Model):
    """An indexed reference to one record family inside the package's object store."""

    name: str = Field(description="Record family, as declared by the task's package schema.")
    content_digest: str = DigestField("Content digest of the stored records.")
    count: int = Field(ge=0, description="Number of records.")
    readable_by: tuple[Role, ...] = Field(description="Roles whose view may include it.")


class CheckpointScore(Model):
    """Online-evaluation score of one published checkpoint."""

    step: int = Field(ge=0, description="Training step of the checkpoint.")
    scores: dict[str, float] | None = Field(description="Scores by metric at K_online; None when missing.")
    missing_reason: str | None = Field(default=None, description="Why the evaluation is missing, if it is.")


class ExperimentPackage(Model):
    """e: in-loop scores, selected checkpoint, executed strategy, permitted records."""

    trial_id: str = Field(description="Trial the package belongs to.")
    attempt_id: str = Field(description="Attempt that produced it.")
    task: str = Field(description="Task name.")
    status: Literal["completed", "evaluation_missing"] = Field(
        description="completed, or evaluation_missing when the offline in-loop evaluation could not finish."
    )
    command_digest: str = DigestField("Digest of the BoundCommand executed.")
    config_digest: str = DigestField("Digest of the frozen ExperimentConfig.")
    strategy_digest: str | None = Field(description="Executed strategy; None for the bootstrap base model.")
    checkpoints: tuple[CheckpointScore, ...] = Field(description="Online evaluation of each checkpoint.")
    selected_step: int | None = Field(ge=0, description="θ*: the selected checkpoint's step; None if none scored.")
    selected_checkpoint: str | None = Field(description="Path of the selected checkpoint (a reference, not copied).")
    in_loop_scores: dict[str, float] | None = Field(
        description="Offline in-loop scores at K_offline, by metric; None when the evaluation is missing."
    )
    versions: dict[str, str] = Field(description="Versions of every installed ADE distribution, plugins included.")
    timings: dict[str, float] = Field(description="Seconds per phase (train, online_eval, offline_eval).")
    resources: dict[str, str] = Field(
        default_factory=dict,
        description="What the executor granted the attempt (executor, slot, cores, GPUs, declared threads) and "
        "the torch threads it ran with; empty when the Engine ran outside an executor.",
    )
    records: tuple[RecordRef, ...] = Field(description="Evidence catalog: task-permitted records.")
    chat_template_kwargs: dict[str, bool | int | float | str] = Field(
        default_factory=dict,
        description="[model].chat_template_kwargs every chat-template rendering of the Trial used.",
    )
    added_tokens: tuple[str, ...] = Field(
        default=(),
        description="Special tokens the Engine added to the target's vocabulary, with embedding resize, before "
        "training (paper Appendix D.3); empty when the tokenizer had them all.",
    )
