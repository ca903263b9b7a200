"""Immutable research-memory versions (paper Appendix C.7)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ade_core.schemas.common import Model


class Finding(Model):
    """One admitted finding, attributable to the Trials it came from."""

    finding_id: str = Field(description="Stable identifier.")
    statement: str = Field(min_length=1, description="The finding.")
    source_trials: tuple[str, ...] = Field(min_length=1, description="Trials whose evidence supports it.")
    scope: str = Field(default="", description="Conditions under which it was observed.")
    status: Literal["active", "contradicted", "superseded"] = Field(default="active", description="Standing.")
    assessment: Literal["supported", "rejected", "inconclusive", "observed"] = Field(
        default="observed", description="How the evidence bears on it: a hypothesis assessment, or a plain observation."
    )
    references: tuple[str, ...] = Field(
        default=(), description="Source references: 'trial:<id>', 'record:<trial>/<family>', 'finding:<id>'."
    )


class MemoryVersion(Model):
    """Fields shared by Plan- and Run-Memory versions."""

    version: int = Field(ge=0, description="Version number; 0 is the empty memory.")
    parent: int | None = Field(description="Parent version, None for version 0.")
    revision: int = Field(ge=0, description="Run-store revision at publication.")
    source_trials: tuple[str, ...] = Field(description="Trials whose updates this version includes.")
    source_digests: tuple[str, ...] = Field(description="Digests of the evidence it was derived from.")
    findings: tuple[Finding, ...] = Field(description="Admitted findings.")
    contradictions: tuple[str, ...] = Field(default=(), description="Recorded contradictions.")
    open_questions: tuple[str, ...] = Field(default=(), description="Unresolved questions.")


class PlanMemory(MemoryVersion):
    """𝒦ᴾ: what one Plan has learned."""

    plan_id: str = Field(description="Plan this memory belongs to.")


class RunMemory(MemoryVersion):
    """𝒦ᴿ: what the Run has learned, merged from Plan-Memory updates in FIFO order."""

    commit_keys: tuple[str, ...] = Field(default=(), description="Plan-Memory commits merged, exactly once each.")
