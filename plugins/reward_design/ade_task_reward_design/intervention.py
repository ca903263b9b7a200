"""The intervention kind Reward Design binds to: GRPO with the admitted module as its reward."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ade_core import InterventionKind
from ade_task_reward_design.task import TASK


def module_source(payload: Mapping[str, Any]) -> str:
    """The admitted reward module, which the Engine imports inside the sandbox."""
    return str(payload["source"])


REWARD_MODULE = InterventionKind(
    name="reward_module",
    paradigm="rft",
    description="GRPO over the whole training pool, rewarded by the admitted module's compute_score "
    "(and assign_group_credit when it defines one).",
    tasks=(TASK,),
    reward_source=module_source,
)
