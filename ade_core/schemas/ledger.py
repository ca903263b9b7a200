"""The operator ledger 𝓛: human actions, kept apart from research state (paper Appendix C.8)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import Field

from ade_core.schemas.common import Model


class LedgerEntry(Model):
    """One operator action appended to the ledger."""

    sequence: int = Field(ge=1, description="Position in the ledger.")
    action: Literal["pause", "resume", "finish", "cancel", "held_out_evaluation"] = Field(description="Action.")
    operator: str = Field(min_length=1, description="Who acted.")
    at: datetime = Field(description="When (UTC).")
    reason: str = Field(default="", description="Why.")
    details: dict[str, Any] = Field(
        default_factory=dict,
        description="Action-specific details (held_out_evaluation: the record's path under heldout/ and its "
        "digest, never benchmark names or scores).",
    )
