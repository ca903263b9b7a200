"""The strategy artifact z and the bound Engine command x = Bind(z; 𝓑)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, ValidationInfo, field_validator

from ade_core.errors import UnknownInterventionKindError
from ade_core.schemas.common import DigestField, Model

Comparator = Literal["<", "<=", "==", ">=", ">"]

# Validation-context key: the names of the registered intervention kinds, e.g.
# ``BoundCommand.model_validate(data, context={INTERVENTION_KINDS: registry.intervention_kinds()})``.
INTERVENTION_KINDS = "intervention_kinds"


class StatisticClaim(Model):
    """A mechanically checkable claim about the realized output (e.g. max token count <= 4096)."""

    statistic: str = Field(description="Name of a realized-output statistic the task reports.")
    comparator: Comparator = Field(description="Comparison applied as `statistic comparator value`.")
    value: float = Field(description="Threshold.")


class BuilderAccount(Model):
    """The Builder's scientific account of an implementation (paper Appendix C.4)."""

    implementation: str = Field(min_length=1, description="What the code does and how it realizes the Plan.")
    inheritance: str = Field(default="", description="Which source strategies it inherits from and what changed.")
    limitations: str = Field(default="", description="Known limitations and deviations from the Plan.")
    declared: tuple[StatisticClaim, ...] = Field(
        default=(), description="Claims the realization check verifies against realized statistics."
    )


class StrategyArtifact(Model):
    """z: strategy source plus the Builder's account, content-addressed."""

    task: str = Field(description="Task whose interface the source implements.")
    source: str = Field(min_length=1, description="Python source of the strategy module.")
    account: BuilderAccount = Field(description="The Builder's account.")
    source_plans: tuple[str, ...] = Field(default=(), description="Plans whose strategies this one inherits.")


class Intervention(Model):
    """The realized, canonical intervention handed to the Engine."""

    kind: str = Field(
        pattern=r"^[a-z][a-z0-9_]*$",
        description="Intervention kind, one a plugin registers through ade_intervention_kinds (e.g. "
        "'sft_selection', 'reward_module', 'schedule').",
    )
    payload: dict[str, Any] = Field(description="What the kind reads: selected ids, reward module source, schedule.")
    summary: str = Field(description="One-line description for logs and reports.")

    @field_validator("kind")
    @classmethod
    def _registered(cls, kind: str, info: ValidationInfo) -> str:
        """Checked against the registered kinds when validation is given them (see INTERVENTION_KINDS)."""
        registered = (info.context or {}).get(INTERVENTION_KINDS)
        if registered is not None and kind not in registered:
            raise UnknownInterventionKindError(kind, registered)
        return kind


class ResourceRequest(Model):
    """What one Engine attempt asks of an executor."""

    device: Literal["cpu", "cuda"] = Field(description="Accelerator kind.")
    gpus: int = Field(default=0, ge=0, description="GPUs for the attempt.")
    cpu_threads: int | None = Field(default=None, gt=0, description="CPU threads; None = all.")


class BoundCommand(Model):
    """x: the frozen Engine command; every attempt of a Trial replays exactly this."""

    task: str = Field(description="Task name.")
    strategy_digest: str = DigestField("Digest of the StrategyArtifact that was realized.")
    intervention: Intervention = Field(description="Realized intervention.")
    config_digest: str = DigestField("Digest of the frozen ExperimentConfig.")
    seeds: dict[str, int] = Field(description="Seeds the Engine uses (training, evaluation).")
    resources: ResourceRequest = Field(description="Resources requested.")
