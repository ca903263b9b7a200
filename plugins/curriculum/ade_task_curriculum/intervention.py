"""The intervention kind Curriculum binds to: GRPO consumes the schedule's batches in order.

Besides the Engine's rollouts, the package keeps what each step actually consumed, joined to the
problems' subject and level, so the Analyzer can read the realized curriculum (paper Table 8).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ade_core import InterventionKind, TrainingTrace
from ade_task_curriculum.task import TASK


def batches(payload: Mapping[str, Any]) -> Sequence[Sequence[str]]:
    """The problem ids of each step, in step order."""
    return payload["batches"]


def consumed_problems(trace: TrainingTrace) -> dict[str, list[dict[str, Any]]]:
    """One record per optimizer step: the problem ids it consumed, each with its subject and level."""
    records = []
    for step, ids in enumerate(trace.consumed):
        problems = [
            {"problem_id": pid, "subject": trace.pool[pid].get("subject"), "level": trace.pool[pid].get("level")}
            for pid in ids
        ]
        records.append({"step": step, "problem_ids": list(ids), "problems": problems})
    return {"consumed_problems": records}


SCHEDULE = InterventionKind(
    name="schedule",
    paradigm="rft",
    description="GRPO with outcome-only reward, consuming a fixed batch of problem ids at each step, in order.",
    tasks=(TASK,),
    prompt_schedule=batches,
    records=consumed_problems,
)
