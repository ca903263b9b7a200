"""Curriculum: a strategy fixes, before training, which problems each GRPO step uses.

The schedule is ``total_steps`` batches of ``prompts_per_step`` distinct problem ids;
problems may recur across batches. The reward stays outcome-only and the Engine turns data
and actor shuffling off so the batches are consumed in order (paper Appendix D.2).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from ade_core import (
    EntryPoint,
    Intervention,
    OutputValidation,
    PackageSchema,
    Parameter,
    RecordSpec,
    ReferenceStrategy,
    StrategyCall,
    StrategyInterface,
    TaskInputs,
    TaskSpec,
)

TASK = "curriculum"

TASK_SPEC = TaskSpec(
    name=TASK,
    title="Curriculum Learning",
    description="Schedule which training problems GRPO sees at each step.",
    paradigm="rft",
    metric_order=("average_at_k", "pass_at_k"),  # Appendix D.7: RFT ranks Average@K, then Pass@K
)

JUDGE_BATCH_DESCRIPTION = (
    "await judge_batch(requests) with one list of {question, response, rubric} requests -> one answer per "
    "request: 'completed' with scores_by_dimension and projected_score, or 'unavailable' with a reason "
    "(never a zero); a malformed request fails the run (invalid_service_request: <field>: <fix>)."
)

INTERFACE = StrategyInterface(
    task=TASK,
    entry_points=(
        EntryPoint(
            name="build_curriculum",
            is_async=True,
            parameters=(
                Parameter(
                    name="candidate_inventory",
                    json_type="array",
                    description="Eligible problems: {problem_id, problem, subject, level, source_order}.",
                ),
                Parameter(name="total_steps", json_type="integer", description="Batches to schedule."),
                Parameter(name="prompts_per_step", json_type="integer", description="Distinct problems per batch."),
                Parameter(name="judge_batch", json_type="service", description=JUDGE_BATCH_DESCRIPTION),
            ),
            returns="A list of total_steps lists, each of prompts_per_step distinct problem ids.",
        ),
    ),
    allowed_imports=("json", "math"),
    constraints=(
        "Exactly total_steps batches, each of prompts_per_step distinct ids from the inventory.",
        "Problems may recur across batches; the reward stays outcome-only.",
    ),
)

PACKAGE_SCHEMA = PackageSchema(
    task=TASK,
    records=(
        RecordSpec(
            name="executed_strategy",
            description="The admitted scheduler and the realized schedule.",
            readable_by=("builder", "analyzer", "plan_summarizer"),
        ),
        RecordSpec(
            name="consumed_problems",
            description="Problem ids consumed at each step, joined to subject/level.",
            readable_by=("analyzer",),
        ),
    ),
)


_REFERENCE_SOURCE = '''\
"""Generic reference: randomly shuffled training data, consumed epoch by epoch."""

SEED = 20240601


def _shuffled(items, state):
    items = list(items)
    for index in range(len(items) - 1, 0, -1):
        state = (1664525 * state + 1013904223) % 4294967296
        swap = state % (index + 1)
        items[index], items[swap] = items[swap], items[index]
    return items, state


async def build_curriculum(candidate_inventory, total_steps, prompts_per_step, judge_batch):
    ids = sorted(item["problem_id"] for item in candidate_inventory)
    order, state = _shuffled(ids, SEED)
    schedule, position = [], 0
    for _ in range(total_steps):
        batch = []
        while len(batch) < prompts_per_step:
            if position == len(order):
                order, state = _shuffled(ids, state)
                position = 0
            if order[position] not in batch:
                batch.append(order[position])
            position += 1
        schedule.append(batch)
    return schedule
'''

REFERENCE = ReferenceStrategy(
    source=_REFERENCE_SOURCE,
    account="Outcome-only training on randomly shuffled data (Appendix D.3): a fixed-seed permutation "
    "per epoch, cut into batches of distinct problems.",
)


def validate_schedule(
    output: Any, inventory: list[dict[str, Any]], total_steps: int, prompts_per_step: int
) -> OutputValidation:
    """Batch count, per-batch cardinality and distinctness, inventory membership."""
    if not isinstance(output, list) or not all(isinstance(b, list) for b in output):
        return OutputValidation(ok=False, errors=(f"expected a list of batches (lists), got {output!r:.200}",))
    errors = []
    if len(output) != total_steps:
        errors.append(f"expected {total_steps} batches, got {len(output)}")
    known = {item["problem_id"]: item for item in inventory}
    for index, batch in enumerate(output):
        distinct = len(set(map(str, batch)))
        if len(batch) != prompts_per_step or distinct != len(batch):
            errors.append(f"batch {index}: expected {prompts_per_step} distinct ids, got {distinct} of {len(batch)}")
        unknown = [i for i in batch if i not in known]
        if unknown:
            errors.append(f"batch {index}: ids not in the inventory: {unknown[:5]}")
        if len(errors) >= 10:
            errors.append("... further batches not checked")
            break
    if errors:
        return OutputValidation(ok=False, errors=tuple(errors))
    canonical = [sorted(batch) for batch in output]
    uses = Counter(i for batch in canonical for i in batch)
    levels = Counter(known[i]["level"] for batch in canonical for i in batch)
    statistics = {
        "distinct_problems": len(uses),
        "coverage": len(uses) / len(known) if known else 0.0,
        "max_reuse": max(uses.values(), default=0),
        **{f"level_{level}_share": n / sum(levels.values()) for level, n in sorted(levels.items())},
    }
    return OutputValidation(ok=True, canonical=canonical, statistics=statistics)


def bind_schedule(canonical_outputs: list[Any]) -> Intervention:
    (schedule,) = canonical_outputs
    return Intervention(
        kind="schedule",
        payload={"batches": schedule},
        summary=f"{len(schedule)} batches of {len(schedule[0]) if schedule else 0}",
    )


def development_inputs() -> TaskInputs:
    """Twenty-four problems over four subjects and five levels; 6 steps of 8 prompts."""
    subjects = ("Algebra", "Geometry", "Number Theory", "Prealgebra")
    inventory = [
        {
            "problem_id": f"dev-{i:03d}",
            "problem": f"Compute {i} + {i * 3}.",
            "subject": subjects[i % 4],
            "level": 1 + i % 5,
            "source_order": i,
        }
        for i in range(24)
    ]
    call = StrategyCall(
        entry_point="build_curriculum",
        arguments={"candidate_inventory": inventory, "total_steps": 6, "prompts_per_step": 8},
    )
    return TaskInputs(calls=(call,), description="twenty-four synthetic problems")
