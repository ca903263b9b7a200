"""The run record: what a Run froze at initialization, where it stands, and what it finally selected."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ade_core.schemas.common import DigestField, Model
from ade_core.schemas.trial import Unavailable

RunPhase = Literal[
    "initialized", "bootstrap", "search", "suspended", "completion", "final_selection", "completed", "cancelled"
]


class FinalSelection(Model):
    """The frozen outcome of a Run (paper Sec 3.4): the top Plan's best Trial, its strategy and checkpoint."""

    plan_id: str = Field(description="The highest-ranked Plan.")
    trial_id: str = Field(description="That Plan's best eligible Trial.")
    strategy_digest: str = DigestField("The executable strategy that is frozen.")
    command_digest: str = DigestField("The bound Engine command that trained it.")
    scores: dict[str, float] = Field(description="Offline in-loop scores of the Trial, by metric.")
    selected_step: int | None = Field(description="θ*: the selected checkpoint's training step.")
    checkpoint_path: str | None = Field(description="Where the selected checkpoint lives (a reference).")


class Suspension(Model):
    """Why a Run is suspended ([operational.recovery] on_exhausted = 'suspend_run') and how to continue it."""

    trial_id: str = Field(description="The Trial whose recovery budget was spent.")
    failures: int = Field(ge=1, description="Counted failed attempts of that Trial so far.")
    last_failure: str = Field(description="The last attempt's failure.")
    phase_before: RunPhase = Field(description="The phase `ade resume` returns to.")
    ledger_at: int = Field(ge=0, description="Ledger length at suspension: a later 'resume' entry continues the Run.")


class RunRecord(Model):
    """The run's own document (kind ``run``, key ``run``): frozen 𝓑 and 𝓩 digests, phase, selection.

    The digests never change after initialization; the Harness checks them before every transition.
    """

    run_id: str = Field(min_length=1, description="Run identifier (experiment name and config digest).")
    task: str = Field(description="Task name.")
    dry_run: bool = Field(description="True when the Engine is simulated (`ade run --dry-run`).")
    config_digest: str = DigestField("Digest of the frozen ExperimentConfig (𝓑), as ExperimentConfig.digest().")
    config_object: str = DigestField(
        "Object-store key of 𝓑's JSON (the held-out suite enters config_digest only "
        "through its own digest, so the two differ)."
    )
    interface_digest: str = DigestField("Digest of the task's StrategyInterface (𝓩); its JSON is in the object store.")
    phase: RunPhase = Field(description="Where the run stands.")
    base_model: dict[str, float] | Unavailable | None = Field(
        default=None, description="In-loop scores of the untrained base model; None until bootstrap measured it."
    )
    selection: FinalSelection | Unavailable | None = Field(
        default=None, description="The frozen final selection; None until final selection ran."
    )
    forked_from: str | None = Field(default=None, description="RUN@REV this run was forked from, if any.")
    suspended: Suspension | None = Field(default=None, description="Set while the Run is suspended.")
    recovery_grants: dict[str, int] = Field(
        default_factory=dict,
        description="Trial id -> counted failed attempts forgiven by `ade resume` after a suspension (each resume "
        "grants a fresh recovery budget).",
    )
    held_out_seen: tuple[str, ...] = Field(
        default=(),
        description="Held-out evaluations of this run's lineage that existed when it was forked (RUN#n), "
        "inherited through forks. Non-empty: its search may have been shaped by held-out results, so its own "
        "held-out results are flagged as not fresh.",
    )
