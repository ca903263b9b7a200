"""Data Selection: a strategy picks ``select_size`` complete trajectories for SFT.

The candidate inventory is a list of candidate groups. Each group is one source problem
with one or more complete user-assistant trajectories; a selector returns trajectory ids
and must take a group whole or not at all (paper Appendix D.1: a trajectory is never split,
and cardinality is never repaired with a post-hoc subset).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from ade_core import (
    AdmissionProbe,
    EntryPoint,
    Intervention,
    OutputValidation,
    PackageSchema,
    Parameter,
    ProbeResult,
    RecordSpec,
    ReferenceStrategy,
    StrategyCall,
    StrategyInterface,
    TaskInputs,
    TaskSpec,
)

TASK = "data_selection"

TASK_SPEC = TaskSpec(
    name=TASK,
    title="Data Selection",
    description="Choose which complete reasoning trajectories from a fixed candidate pool enter SFT.",
    paradigm="sft",
    metric_order=("pass_at_k", "average_at_k"),  # Appendix D.7: SFT ranks Pass@K, then Average@K
)

INVENTORY_DOC = (
    "List of candidate groups: {candidate_id, domain, problem_id, trajectories: "
    "[{trajectory_id, token_count, length_bin, over_cap, messages: [{role, content}]}]}; token_count "
    "counts chat-template tokens of the target model; length_bin is short (<= cap/4), medium (<= cap/2), "
    "long (<= cap) or over_cap (truncated in training, still admissible); the assistant message holds "
    "one <think>...</think> span followed by a non-empty final answer."
)

INTERFACE = StrategyInterface(
    task=TASK,
    entry_points=(
        EntryPoint(
            name="select_trajectories",
            is_async=True,
            parameters=(
                Parameter(name="candidate_inventory", json_type="array", description=INVENTORY_DOC),
                Parameter(name="select_size", json_type="integer", description="Trajectories to return."),
                Parameter(
                    name="judge",
                    json_type="service",
                    description="await judge(requests) -> one answer per request; rubric-scored evidence, "
                    "not a selection decision. Answers may be {'status': 'unavailable'}.",
                ),
            ),
            returns="A list of exactly select_size distinct trajectory ids from the inventory.",
        ),
    ),
    allowed_imports=("json",),
    constraints=(
        "Return exactly select_size distinct trajectory ids that exist in the inventory.",
        "Take a candidate group whole or not at all: never split a group.",
        "Module-level helper functions and constants are allowed; only `json` may be imported.",
    ),
)

PACKAGE_SCHEMA = PackageSchema(
    task=TASK,
    records=(
        RecordSpec(
            name="executed_strategy",
            description="The admitted strategy source, its admission checks and its realization record: every "
            "judge call with its answer, timings, isolation, and candidate-vs-selected statistics (length bins, "
            "domains, token totals, over-cap count).",
            readable_by=("builder", "analyzer", "plan_summarizer"),
        ),
    ),
)


_REFERENCE_SOURCE = '''\
"""Generic reference: one seeded random collection of complete candidate groups."""

SEED = 20240601


def _shuffled(items, seed):
    # Fisher-Yates with a linear congruential generator (no `random` import is allowed).
    items = list(items)
    state = seed
    for index in range(len(items) - 1, 0, -1):
        state = (1664525 * state + 1013904223) % 4294967296
        swap = state % (index + 1)
        items[index], items[swap] = items[swap], items[index]
    return items


async def select_trajectories(candidate_inventory, select_size, judge):
    groups = sorted(candidate_inventory, key=lambda group: group["candidate_id"])
    chosen = []
    for group in _shuffled(groups, SEED):
        ids = [t["trajectory_id"] for t in group["trajectories"]]
        if len(chosen) + len(ids) <= select_size:
            chosen.extend(ids)
        if len(chosen) == select_size:
            break
    return chosen
'''

REFERENCE = ReferenceStrategy(
    source=_REFERENCE_SOURCE,
    account="A fixed-seed uniform random collection of whole candidate groups, drawn once and "
    "reused by every comparison (Appendix D.3); it uses no judge and no quality signal.",
)


DEV_CAP = 13  # token cap of the development inputs (word counts): every length bin but "short" occurs


def _groups_by_trajectory(inventory: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {t["trajectory_id"]: group for group in inventory for t in group["trajectories"]}


def validate_selection(output: Any, inventory: list[dict[str, Any]], select_size: int) -> OutputValidation:
    """Exact cardinality, distinct known ids, whole groups; canonical form is the sorted id list."""
    if not isinstance(output, list) or not all(isinstance(i, str) for i in output):
        return OutputValidation(ok=False, errors=(f"expected a list of trajectory id strings, got {output!r:.200}",))
    errors = []
    duplicates = sorted(i for i, n in Counter(output).items() if n > 1)
    if duplicates:
        errors.append(f"duplicate trajectory ids: {duplicates[:10]}")
    if len(set(output)) != select_size:
        errors.append(f"expected exactly {select_size} distinct ids, got {len(set(output))}")
    owner = _groups_by_trajectory(inventory)
    unknown = sorted(i for i in set(output) if i not in owner)
    if unknown:
        errors.append(f"ids not in the inventory: {unknown[:10]}")
    chosen = set(output)
    split = sorted(
        {owner[i]["candidate_id"] for i in chosen if i in owner}
        - {g["candidate_id"] for g in inventory if all(t["trajectory_id"] in chosen for t in g["trajectories"])}
    )
    if split:
        errors.append(f"candidate groups split (take all of their trajectories or none): {split[:10]}")
    if errors:
        return OutputValidation(ok=False, errors=tuple(errors))
    selected = [t for g in inventory for t in g["trajectories"] if t["trajectory_id"] in chosen]
    tokens = [t["token_count"] for t in selected]
    pool = [t for g in inventory for t in g["trajectories"]]
    statistics = {
        "selected": len(selected),
        "groups": len({owner[i]["candidate_id"] for i in chosen}),
        "total_tokens": sum(tokens),
        "mean_tokens": sum(tokens) / len(tokens) if tokens else 0.0,
        "max_tokens": max(tokens, default=0),
        **_shape(selected, owner, ""),
        "pool_trajectories": len(pool),
        "pool_mean_tokens": sum(t["token_count"] for t in pool) / len(pool) if pool else 0.0,
        **_shape(pool, owner, "pool_"),
    }
    return OutputValidation(ok=True, canonical=sorted(chosen), statistics=statistics)


def _shape(trajectories: list[dict[str, Any]], owner: dict[str, dict[str, Any]], prefix: str) -> dict[str, Any]:
    """Counts by domain and length bin, and the over-cap count, of a set of trajectories."""
    domains = Counter(owner[t["trajectory_id"]]["domain"] for t in trajectories)
    bins = Counter(t.get("length_bin", "unknown") for t in trajectories)
    return {
        **{f"{prefix}domain_{name}": count for name, count in sorted(domains.items())},
        **{f"{prefix}bin_{name}": count for name, count in sorted(bins.items())},
        f"{prefix}over_cap": sum(1 for t in trajectories if t.get("over_cap")),
    }


def judge_called(context: dict[str, Any]) -> ProbeResult:
    """With Judge enrichment on, the selector must await the judge on the development inputs."""
    config = context.get("config")
    if config is None or not config.judge.enabled:
        return ProbeResult(status="skipped", reason="judge enrichment is disabled ([judge].enabled = false)")
    if any(call["name"] == "judge" and call["ok"] for call in context["service_calls"]):
        return ProbeResult(status="passed")
    return ProbeResult(
        status="failed",
        reason="judge enrichment is enabled ([judge].enabled = true) but the selector never awaited "
        "judge(requests) on the development inputs; call it on the path that produces the selection",
    )


JUDGE_PROBE = AdmissionProbe(
    name="judge_called",
    description="With Judge enrichment enabled, the selector calls the judge on a valid path.",
    tasks=(TASK,),
    check=judge_called,
)


def bind_selection(canonical_outputs: list[Any]) -> Intervention:
    """The Engine trains on exactly the selected trajectory ids."""
    (selected,) = canonical_outputs
    return Intervention(
        kind="sft_selection", payload={"selected_ids": list(selected)}, summary=f"{len(selected)} trajectories"
    )


def _trajectory(tid: str, question: str, thought: str, answer: str) -> dict[str, Any]:
    from ade_core.engine.pool import length_bin

    content = f"<think>{thought}</think>{answer}"
    tokens = len(question.split()) + len(content.split())
    return {
        "trajectory_id": tid,
        "token_count": tokens,
        "length_bin": length_bin(tokens, DEV_CAP),
        "over_cap": tokens > DEV_CAP,
        "messages": [{"role": "user", "content": question}, {"role": "assistant", "content": content}],
    }


def frozen_inputs(config: Any, base_dir: str) -> TaskInputs:
    """The candidate inventory of 𝓑's pool (no world ground truth: labels live apart and never load)."""
    from pathlib import Path

    from ade_core.engine.pool import inventory

    if config.data.select_size is None:
        raise ValueError("[data].select_size must be set for the data_selection task (paper: 384)")
    groups = inventory(config, Path(base_dir))
    call = StrategyCall(
        entry_point="select_trajectories",
        arguments={"candidate_inventory": groups, "select_size": config.data.select_size},
    )
    return TaskInputs(calls=(call,), description=f"{len(groups)} candidate groups from {config.data.source}")


def development_inputs() -> TaskInputs:
    """Twelve small candidate groups over three domains (two groups hold two trajectories)."""
    rows = [
        ("math", "What is 17 + 25?", "7+5=12, carry 1; 1+2+1=4.", "\\boxed{42}"),
        ("math", "What is 9 * 8?", "9*8 = 72.", "\\boxed{72}"),
        ("math", "Solve 3x + 4 = 19.", "3x = 15 so x = 5.", "\\boxed{5}"),
        ("math", "What is 100 - 37?", "100-37 = 63.", "\\boxed{63}"),
        ("code", "Write f(n) returning n squared.", "Multiply n by itself.", "def f(n):\n    return n * n"),
        ("code", "Reverse a string s.", "Slicing with step -1.", "def rev(s):\n    return s[::-1]"),
        ("code", "Sum a list xs.", "Use the builtin sum.", "def total(xs):\n    return sum(xs)"),
        ("science", "What gas do plants absorb?", "Photosynthesis uses CO2.", "Carbon dioxide."),
        ("science", "Boiling point of water at sea level in C?", "Standard pressure.", "100"),
        ("science", "How many protons does carbon have?", "Atomic number 6.", "6"),
        ("math", "What is 2^10?", "Doubling ten times.", "\\boxed{1024}"),
        ("science", "What is H2O?", "Two hydrogens, one oxygen.", "Water."),
    ]
    inventory = []
    for index, (domain, question, thought, answer) in enumerate(rows):
        cid = f"c{index:03d}"
        trajectories = [_trajectory(f"{cid}-t0", question, thought, answer)]
        if index in (2, 7):  # two sampled solutions of the same problem form one group
            trajectories.append(_trajectory(f"{cid}-t1", question, thought + " Check it again.", answer))
        inventory.append(
            {"candidate_id": cid, "domain": domain, "problem_id": f"p{index:03d}", "trajectories": trajectories}
        )
    call = StrategyCall(
        entry_point="select_trajectories", arguments={"candidate_inventory": inventory, "select_size": 5}
    )
    return TaskInputs(calls=(call,), description="twelve synthetic candidate groups (math, code, science)")
