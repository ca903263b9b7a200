"""The intervention kind Data Selection binds to: SFT on exactly the selected trajectories (paper Sec 3.1)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ade_core import InterventionKind
from ade_task_data_selection.task import TASK


def selected_ids(payload: Mapping[str, Any]) -> list[str]:
    """The trajectory ids the Engine trains on, in the bound order."""
    return list(payload["selected_ids"])


SFT_SELECTION = InterventionKind(
    name="sft_selection",
    paradigm="sft",
    description="SFT on exactly the selected trajectory ids of the frozen candidate pool.",
    tasks=(TASK,),
    training_examples=selected_ids,
)
