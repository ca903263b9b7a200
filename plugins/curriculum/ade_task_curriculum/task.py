"""Curriculum: a strategy fixes, before training, which problems each GRPO step uses.

The schedule is ``total_steps`` steps of ``prompts_per_step`` distinct problem ids of 𝓑's RFT
pool; problems may recur across steps. The reward stays outcome-only and the Engine turns data
and actor shuffling off so the steps are consumed in order (paper Appendix C.4, D.2). The
inventory is 𝓑's RFT pool under the recipe's prompt limit, with the target's chat template.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from ade_core import (
    EntryPoint,
    ExperimentConfig,
    Intervention,
    OutputValidation,
    PackageSchema,
    Parameter,
    RecordSpec,
    ReferenceStrategy,
    SharedReference,
    StrategyCall,
    StrategyInterface,
    TaskInputs,
    TaskSpec,
    base_pass_rates,
    rft_inventory,
)

TASK = "curriculum"

TASK_SPEC = TaskSpec(
    name=TASK,
    title="Curriculum Learning",
    description="Schedule which training problems GRPO sees at each step.",
    paradigm="rft",
    metric_order=("average_at_k", "pass_at_k"),  # Appendix D.7: RFT ranks Average@K, then Pass@K
    # Sec 4: the Reward Design reference (the outcome reward, a random order) serves this task too
    shared_reference=SharedReference(name="rft_outcome", data_order="reference"),
)

# The inventory row's fields, exactly as the paper's strategies read them.
INVENTORY_FIELDS = ("problem_id", "source_order", "subject", "level", "prompt_tokens", "question", "reference_answer")
BASE_PASS_RATE = "base_pass_rate"  # the optional extra column (beyond the paper)

JUDGE_BATCH_DESCRIPTION = (
    "await judge_batch(requests) with one list of {question, response, rubric} requests -> one answer per "
    "request: 'completed' with scores_by_dimension and projected_score, or 'unavailable' with a reason "
    "(never a zero); a malformed request fails the run (invalid_service_request: <field>: <fix>). Optional: "
    "a schedule need not call it."
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
                    description="The eligible problems of 𝓑's RFT pool (prompts over the recipe's prompt limit are "
                    "excluded): {problem_id, source_order (row index in the source), subject, level (integer 0-5), "
                    "prompt_tokens, question, reference_answer}, plus base_pass_rate (fraction of K base samples "
                    "correct) where [data].base_pass_rate_samples > 0.",
                ),
                Parameter(name="total_steps", json_type="integer", description="Steps (batches) to schedule."),
                Parameter(name="prompts_per_step", json_type="integer", description="Distinct problems per step."),
                Parameter(name="judge_batch", json_type="service", description=JUDGE_BATCH_DESCRIPTION),
            ),
            returns="A list of total_steps lists, each of prompts_per_step distinct problem ids of the inventory.",
        ),
    ),
    allowed_imports=("json", "math", "collections", "itertools", "functools", "heapq", "statistics", "random"),
    constraints=(
        "Exactly total_steps steps, each of prompts_per_step distinct problem ids from the inventory.",
        "Problems may recur across steps; the reward stays outcome-only.",
        "The Harness orders each step by source_order; GRPO consumes the steps in order, unshuffled.",
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
            description="Per step: the scheduled and consumed ids (equal when the schedule was kept), their "
            "subject and level counts, new problems and unique problems so far.",
            readable_by=("analyzer",),
        ),
        RecordSpec(
            name="reuse_distribution",
            description="How many problems were consumed once, twice, ...; and the pool never consumed.",
            readable_by=("analyzer",),
        ),
        RecordSpec(
            name="cohort_outcomes",
            description="Mean training reward and pass rate of the rollouts by subject x level, per step.",
            readable_by=("analyzer",),
        ),
    ),
)


_REFERENCE_SOURCE = '''\
"""Generic reference: seeded epoch shuffles of the eligible ids, each cut into steps (the remainder of an
epoch that does not fill a step is dropped), drawn once for the Run."""

SEED = 20240601


def _shuffled(items, state):
    items = list(items)
    for index in range(len(items) - 1, 0, -1):
        state = (1664525 * state + 1013904223) % 4294967296
        swap = state % (index + 1)
        items[index], items[swap] = items[swap], items[index]
    return items, state


async def build_curriculum(candidate_inventory, total_steps, prompts_per_step, judge_batch):
    ids = [item["problem_id"] for item in sorted(candidate_inventory, key=lambda item: item["source_order"])]
    if len(ids) < prompts_per_step:
        raise ValueError(f"{len(ids)} eligible problems cannot fill a step of {prompts_per_step}")
    schedule, state = [], SEED
    while len(schedule) < total_steps:
        order, state = _shuffled(ids, state)
        for start in range(0, len(order) - prompts_per_step + 1, prompts_per_step):
            if len(schedule) < total_steps:
                schedule.append(order[start:start + prompts_per_step])
    return schedule
'''

REFERENCE = ReferenceStrategy(
    source=_REFERENCE_SOURCE,
    account="Outcome-only training on randomly shuffled data (Appendix D.3): a fixed-seed permutation of the "
    "eligible problems per epoch, cut into steps, each epoch's remainder dropped.",
)


def validate_schedule(
    output: Any, inventory: list[dict[str, Any]], total_steps: int, prompts_per_step: int
) -> OutputValidation:
    """Step count, per-step cardinality and distinctness, inventory membership; the first violation
    names its step (counting from 1) and id. The canonical schedule orders each step by source_order."""
    if not isinstance(output, list) or not all(isinstance(step, list) for step in output):
        return OutputValidation(
            ok=False, errors=(f"expected a list of {total_steps} steps (lists of ids), got {output!r:.200}",)
        )
    if len(output) != total_steps:
        return OutputValidation(
            ok=False, errors=(f"expected {total_steps} steps, got {len(output)}: return one list per step",)
        )
    known = {item["problem_id"]: item for item in inventory}
    errors: list[str] = []
    for number, step in enumerate(output, 1):
        problem = _step_violation(step, known, prompts_per_step)
        if problem:
            errors.append(f"step {number} of {total_steps}: {problem}")
            if len(errors) == 5:
                errors.append("later steps not checked")
                break
    if errors:
        return OutputValidation(ok=False, errors=tuple(errors))
    canonical = [sorted(step, key=lambda pid: (known[pid]["source_order"], pid)) for step in output]
    return OutputValidation(ok=True, canonical=canonical, statistics=schedule_statistics(canonical, known))


def _step_violation(step: list[Any], known: dict[str, dict[str, Any]], prompts_per_step: int) -> str | None:
    """The first thing wrong with one step, naming the id; None when it is valid."""
    seen: set[str] = set()
    for pid in step:
        if not isinstance(pid, str):
            return f"id {pid!r} is a {type(pid).__name__}, not a problem_id string of the inventory"
        if pid not in known:
            return f"id {pid!r} is not in the candidate inventory (unknown, or excluded by the prompt limit)"
        if pid in seen:
            return f"id {pid!r} appears twice; a step holds distinct problems"
        seen.add(pid)
    if len(step) != prompts_per_step:
        return f"expected {prompts_per_step} distinct ids, got {len(step)}"
    return None


def schedule_statistics(schedule: list[list[str]], known: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Coverage and reuse of a valid schedule, its level shares and the steps' subject spread."""
    uses = Counter(pid for step in schedule for pid in step)
    slots = sum(uses.values())
    levels = Counter(known[pid]["level"] for step in schedule for pid in step)
    subjects = Counter(known[pid]["subject"] for step in schedule for pid in step)
    first_full_coverage = None
    seen: set[str] = set()
    for index, step in enumerate(schedule):
        seen.update(step)
        if first_full_coverage is None and len(seen) == len(known):
            first_full_coverage = index + 1
    return {
        "steps": len(schedule),
        "distinct_problems": len(uses),
        "coverage": len(uses) / len(known) if known else 0.0,
        "max_reuse": max(uses.values(), default=0),
        "mean_reuse": slots / len(uses) if uses else 0.0,
        "steps_to_full_coverage": first_full_coverage,
        **{f"level_{level}_share": n / slots for level, n in sorted(levels.items())},
        **{f"subject_{name}_share": n / slots for name, n in sorted(subjects.items())},
    }


def bind_schedule(canonical_outputs: list[Any]) -> Intervention:
    (schedule,) = canonical_outputs
    distinct = len({pid for step in schedule for pid in step})
    return Intervention(
        kind="schedule",
        payload={"batches": schedule},
        summary=f"{len(schedule)} steps of {len(schedule[0]) if schedule else 0} ({distinct} distinct problems)",
    )


def _call(inventory: list[dict[str, Any]], total_steps: int, prompts_per_step: int) -> StrategyCall:
    return StrategyCall(
        entry_point="build_curriculum",
        arguments={"candidate_inventory": inventory, "total_steps": total_steps, "prompts_per_step": prompts_per_step},
    )


def frozen_inputs(config: ExperimentConfig, base_dir: str) -> TaskInputs:
    """𝓑's RFT pool as the inventory (prompts over the limit excluded and counted) and the recipe's shape."""
    recipe = config.training.grpo
    if recipe is None:
        raise ValueError("curriculum trains with GRPO: set [training].paradigm = 'grpo' and [training.grpo]")
    if recipe.shuffle_data or recipe.shuffle_actor:
        raise ValueError(
            "a curriculum is consumed in order: set [training.grpo] shuffle_data = false and shuffle_actor = false"
        )
    inventory = rft_inventory(config, Path(base_dir))
    unlevelled = [row for row in inventory.rows if not isinstance(row["level"], int)]
    if unlevelled:
        first = unlevelled[0]
        raise ValueError(
            f"the RFT pool {config.data.source!r}: problem {first['problem_id']!r} has level {first['level']!r}; a "
            "curriculum inventory needs an integer level 0-5 (or MATH's 'Level N') on every row"
        )
    rows = inventory.rows
    if config.data.base_pass_rate_samples:
        rates = base_pass_rates(config, Path(base_dir), rows)
        rows = [{**row, BASE_PASS_RATE: rates[row["problem_id"]]} for row in rows]
    if len(rows) < recipe.prompts_per_step:
        raise ValueError(
            f"the RFT pool {config.data.source!r} has {len(rows)} eligible problems, fewer than "
            f"[training.grpo].prompts_per_step = {recipe.prompts_per_step}"
        )
    subjects = Counter(row["subject"] for row in rows)
    levels = Counter(row["level"] for row in rows)
    return TaskInputs(
        calls=(_call(rows, recipe.total_steps, recipe.prompts_per_step),),
        description=f"{len(rows)} eligible problems of the RFT pool {config.data.source!r} "
        f"({len(inventory.overlength)} over the {inventory.prompt_limit}-token prompt limit excluded); "
        f"{recipe.total_steps} steps of {recipe.prompts_per_step}",
        statistics={
            **inventory.counts,
            "total_steps": recipe.total_steps,
            "prompts_per_step": recipe.prompts_per_step,
            **{f"subject_{name}": count for name, count in sorted(subjects.items())},
            **{f"level_{level}": count for level, count in sorted(levels.items())},
        },
        sample=tuple(rows[:8]),
    )


SUBJECTS = (
    "Algebra",
    "Counting & Probability",
    "Geometry",
    "Intermediate Algebra",
    "Number Theory",
    "Prealgebra",
    "Precalculus",
)


def development_inputs() -> TaskInputs:
    """Self-contained inputs for the conformance kit (no config): 210 problems, every subject at every
    level, six per cell, and 6 steps of 32. With a config, admission runs on 𝓑's own inventory."""
    inventory = []
    for order in range(210):
        subject, level = SUBJECTS[order % 7], 1 + (order // 7) % 5
        a, b = 3 + order, 7 + 2 * order
        inventory.append(
            {
                "problem_id": f"dev/{order:03d}",
                "source_order": order,
                "subject": subject,
                "level": level,
                "prompt_tokens": 40 + level * 6,
                "question": f"Compute {a} + {b}.",
                "reference_answer": str(a + b),
            }
        )
    return TaskInputs(
        calls=(_call(inventory, 6, 32),),
        description="210 synthetic problems (7 subjects x 5 levels, 6 each); 6 steps of 32",
    )
