"""The intervention kind Curriculum binds to: GRPO consumes the schedule's steps in order.

Besides the Engine's rollouts, the package joins what each step was scheduled and actually consumed
with the problems' subject and level, so the Analyzer and the report read the realized curriculum
(paper Table 8): per-step subject and level counts, unique problems, reuse, and cohort outcomes.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from ade_core import InterventionKind, TrainingTrace
from ade_task_curriculum.task import TASK


def batches(payload: Mapping[str, Any]) -> Sequence[Sequence[str]]:
    """The problem ids of each step, in step order."""
    return payload["batches"]


def _label(row: Mapping[str, Any] | None, key: str) -> Any:
    return None if row is None else row.get(key)


def curriculum_records(trace: TrainingTrace) -> dict[str, list[dict[str, Any]]]:
    """Scheduled vs consumed per step with subject/level counts, the reuse distribution, cohort outcomes."""
    scheduled = [list(step) for step in trace.payload.get("batches", [])]
    consumed = [list(step) for step in trace.consumed]
    seen: set[str] = set()
    steps = []
    for index, ids in enumerate(consumed):
        new = [pid for pid in ids if pid not in seen]
        seen.update(ids)
        planned = scheduled[index] if index < len(scheduled) else None
        steps.append(
            {
                "step": index,
                "problem_ids": ids,
                "scheduled_ids": planned,
                "matches_schedule": ids == planned,
                "subjects": dict(sorted(Counter(str(_label(trace.pool.get(p), "subject")) for p in ids).items())),
                "levels": dict(sorted(Counter(str(_label(trace.pool.get(p), "level")) for p in ids).items())),
                "new_problems": len(new),
                "unique_so_far": len(seen),
            }
        )
    uses = Counter(pid for ids in consumed for pid in ids)
    by_count = Counter(uses.values())
    reuse = [{"uses": 0, "problems": len(set(trace.pool) - set(uses))}] + [
        {"uses": n, "problems": by_count[n]} for n in sorted(by_count)
    ]
    return {"consumed_problems": steps, "reuse_distribution": reuse, "cohort_outcomes": cohort_outcomes(trace)}


def cohort_outcomes(trace: TrainingTrace) -> list[dict[str, Any]]:
    """Per step and subject x level: rollouts, mean training reward and pass rate (outcome = 1)."""
    cells: dict[tuple[int, str, Any], list[Mapping[str, Any]]] = defaultdict(list)
    for rollout in trace.rollouts:
        row = trace.pool.get(rollout["problem_id"])
        cells[(rollout["step"], str(_label(row, "subject")), _label(row, "level"))].append(rollout)
    out = []
    for (step, subject, level), rollouts in sorted(
        cells.items(), key=lambda item: (item[0][0], item[0][1], str(item[0][2]))
    ):
        rewards = [r["reward"] for r in rollouts if isinstance(r.get("reward"), (int, float))]
        out.append(
            {
                "step": step,
                "subject": subject,
                "level": level,
                "rollouts": len(rollouts),
                "problems": len({r["problem_id"] for r in rollouts}),
                "mean_reward": sum(rewards) / len(rewards) if rewards else None,
                "pass_rate": sum(1 for r in rollouts if r.get("outcome") == 1.0) / len(rollouts),
            }
        )
    return out


SCHEDULE = InterventionKind(
    name="schedule",
    paradigm="rft",
    description="GRPO with outcome-only reward, consuming a fixed step of problem ids at each step, in order.",
    tasks=(TASK,),
    prompt_schedule=batches,
    records=curriculum_records,
)
