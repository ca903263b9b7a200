"""Held-out evaluation records: operator-only, kept in ``<run>/heldout/``, never research state (Sec 3.4)."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import Field

from ade_core.schemas.common import DigestField, Model


class HeldOutBenchmarkResult(Model):
    """One held-out benchmark's scores for the frozen final selection."""

    name: str = Field(description="Held-out benchmark name from [[evaluation.held_out]].")
    k: int = Field(gt=0, description="Samples per problem.")
    problems: int = Field(ge=0, description="Problems evaluated (after the benchmark's limit).")
    scores: dict[str, float] | None = Field(description="Metric values; None when the evaluation is missing.")
    missing_reason: str | None = Field(default=None, description="Why the scores are missing, if they are.")
    responses: str = Field(description="Graded responses: a JSONL file relative to the held-out store.")


class HeldOutEvaluation(Model):
    """One operator-run held-out evaluation: of the frozen final selection (``ade heldout RUN``), or of one
    Trial's checkpoint for the report (``[operational.report] heldout_per_trial``)."""

    sequence: int = Field(ge=1, description="Position in this run's held-out store (append-only).")
    run_id: str = Field(description="The evaluated Run.")
    scope: Literal["final_selection", "trial"] = Field(
        default="final_selection",
        description="'final_selection': the Run's frozen selection (the held-out estimate); 'trial': one Trial's "
        "selected checkpoint, evaluated after final selection for the report only.",
    )
    plan_id: str = Field(description="The evaluated Plan (the selected one for scope 'final_selection').")
    trial_id: str = Field(description="The evaluated Trial (the top Plan's best for scope 'final_selection').")
    strategy_digest: str = DigestField("The frozen strategy.")
    command_digest: str = DigestField("The bound command that trained the checkpoint.")
    config_digest: str = DigestField("The Run's frozen 𝓑.")
    checkpoint: str | None = Field(description="The evaluated checkpoint (θ*); None for a simulated evaluation.")
    engine: Literal["simulated", "engine"] = Field(description="'simulated' in dry runs, else the real Engine.")
    benchmarks: tuple[HeldOutBenchmarkResult, ...] = Field(description="Per-benchmark results, in config order.")
    macro_avg: dict[str, float | None] = Field(
        description="Per metric, the mean over benchmarks (None if any missing)."
    )
    fresh: bool = Field(
        description="False when this Run was forked after held-out results of its lineage were seen: its search "
        "may have been shaped by them, so these numbers are not an untouched held-out estimate."
    )
    seen_before: tuple[str, ...] = Field(
        default=(), description="The held-out evaluations this Run's lineage had seen when it was forked."
    )
    operator: str = Field(min_length=1, description="Who ran it.")
    evaluated_at: datetime = Field(description="When (UTC).")
