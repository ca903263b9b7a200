"""Data Selection: a strategy picks ``select_size`` complete trajectories for SFT.

The candidate inventory is the paper's: flat rows, one complete user-assistant trajectory per
candidate, with ``trajectory_ids == [candidate_id]``. A selector returns trajectory ids and takes
a row's ids whole or not at all (paper Appendix D.1: a trajectory is never split, and
cardinality is never repaired with a post-hoc subset).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
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
    candidate_inventory,
    length_bin,
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
    "List of flat rows, one trajectory per candidate: {candidate_id, problem_id, trajectory_ids "
    "(== [candidate_id]), token_count, uncapped_token_count, over_cap, length_bin, domain, difficulty, "
    "quality_score, messages: [{role, content}]}; token_count counts chat-template tokens of the target "
    "model, capped at the training cutoff (uncapped_token_count is the full count; over_cap is true when it "
    "exceeds the cutoff: truncated in training, still admissible); length_bin is exactly le_4096 (<= cap/4), "
    "4097_8192 (<= cap/2) or 8193_16384 (<= cap), the paper's names at every cutoff; difficulty is the level "
    'for math when the source has one, else "unlabeled"; quality_score is 1.0 unless the source gives one; '
    "messages are the user prompt and the complete assistant target, which holds one <think>...</think> "
    "span followed by a non-empty final answer."
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
        "Take a row's trajectory_ids whole or not at all: never split a group.",
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
"""Generic reference: one seeded random collection of complete candidate rows."""

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
    rows = sorted(candidate_inventory, key=lambda row: row["candidate_id"])
    chosen = []
    for row in _shuffled(rows, SEED):
        ids = list(row["trajectory_ids"])
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


DEV_CAP = 13  # token cap of the development inputs (word counts): every length bin and over-cap rows occur


def _rows_by_trajectory(inventory: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {tid: row for row in inventory for tid in row["trajectory_ids"]}


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
    owner = _rows_by_trajectory(inventory)
    unknown = sorted(i for i in set(output) if i not in owner)
    if unknown:
        errors.append(f"ids not in the inventory: {unknown[:10]}")
    chosen = set(output)
    split = sorted(
        {owner[i]["candidate_id"] for i in chosen if i in owner}
        - {r["candidate_id"] for r in inventory if all(tid in chosen for tid in r["trajectory_ids"])}
    )
    if split:
        errors.append(f"candidate groups split (take all of their trajectories or none): {split[:10]}")
    if errors:
        return OutputValidation(ok=False, errors=tuple(errors))
    selected = [r for r in inventory if chosen.intersection(r["trajectory_ids"])]
    tokens = [r["token_count"] for r in selected]
    statistics = {
        "selected": len(chosen),
        "groups": len({owner[i]["candidate_id"] for i in chosen}),
        "total_tokens": sum(tokens),
        "mean_tokens": sum(tokens) / len(tokens) if tokens else 0.0,
        "max_tokens": max(tokens, default=0),
        **pool_shape(selected, ""),
        "pool_trajectories": sum(len(r["trajectory_ids"]) for r in inventory),
        "pool_mean_tokens": sum(r["token_count"] for r in inventory) / len(inventory) if inventory else 0.0,
        **pool_shape(inventory, "pool_"),
    }
    return OutputValidation(ok=True, canonical=sorted(chosen), statistics=statistics)


def pool_shape(rows: list[dict[str, Any]], prefix: str = "") -> dict[str, Any]:
    """Counts by domain and length bin, and the over-cap count, of a set of inventory rows."""
    domains = Counter(r["domain"] for r in rows)
    bins = Counter(r.get("length_bin", "unknown") for r in rows)
    return {
        **{f"{prefix}domain_{name}": count for name, count in sorted(domains.items())},
        **{f"{prefix}bin_{name}": count for name, count in sorted(bins.items())},
        f"{prefix}over_cap": sum(1 for r in rows if r.get("over_cap")),
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


def _row(cid: str, problem_id: str, domain: str, question: str, thought: str, answer: str) -> dict[str, Any]:
    content = f"<think>{thought}</think>{answer}"
    tokens = len(question.split()) + len(content.split())
    return {
        "candidate_id": cid,
        "problem_id": problem_id,
        "trajectory_ids": [cid],
        "token_count": min(tokens, DEV_CAP),
        "uncapped_token_count": tokens,
        "over_cap": tokens > DEV_CAP,
        "length_bin": length_bin(min(tokens, DEV_CAP), DEV_CAP),
        "domain": domain,
        "difficulty": "unlabeled",
        "quality_score": 1.0,
        "messages": [{"role": "user", "content": question}, {"role": "assistant", "content": content}],
    }


def frozen_inputs(config: Any, base_dir: str) -> TaskInputs:
    """The candidate inventory of 𝓑's pool (no world ground truth: labels live apart and never load)."""
    if config.data.select_size is None:
        raise ValueError("[data].select_size must be set for the data_selection task (paper: 384)")
    rows = candidate_inventory(config, Path(base_dir))
    call = StrategyCall(
        entry_point="select_trajectories",
        arguments={"candidate_inventory": rows, "select_size": config.data.select_size},
    )
    return TaskInputs(
        calls=(call,),
        description=f"{len(rows)} candidates from {config.data.source}",
        statistics=inventory_statistics(rows, config.data.select_size),
        sample=sample_rows(rows),
    )


SAMPLE_ROWS = 8
SAMPLE_TEXT_CHARS = 600


def inventory_statistics(rows: list[dict[str, Any]], select_size: int) -> dict[str, Any]:
    """The candidate pool as the Builder sees it: counts per domain and length bin, token totals
    (overall and per domain), the over-cap count."""
    tokens = [r["token_count"] for r in rows]
    per_domain: Counter[str] = Counter()
    for row in rows:
        per_domain[row["domain"]] += row["token_count"]
    return {
        "candidates": len(rows),
        "select_size": select_size,
        "total_tokens": sum(tokens),
        "mean_tokens": round(sum(tokens) / len(tokens), 2) if tokens else 0.0,
        "max_tokens": max(tokens, default=0),
        "uncapped_total_tokens": sum(r["uncapped_token_count"] for r in rows),
        **pool_shape(rows),
        **{f"tokens_domain_{name}": total for name, total in sorted(per_domain.items())},
    }


def sample_rows(rows: list[dict[str, Any]], size: int = SAMPLE_ROWS) -> tuple[dict[str, Any], ...]:
    """Real rows with every field, taken round-robin over the domains in inventory order; message texts
    longer than ``SAMPLE_TEXT_CHARS`` keep their start and end around a marked cut."""
    by_domain: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        by_domain.setdefault(row["domain"], []).append(row)
    picked: list[dict[str, Any]] = []
    for index in range(size):
        for domain in sorted(by_domain):
            if index < len(by_domain[domain]) and len(picked) < size:
                picked.append(by_domain[domain][index])
    return tuple({**row, "messages": [_shortened(m) for m in row["messages"]]} for row in picked)


def _shortened(message: dict[str, Any]) -> dict[str, Any]:
    text = str(message.get("content", ""))
    if len(text) <= SAMPLE_TEXT_CHARS:
        return dict(message)
    half = SAMPLE_TEXT_CHARS // 2
    return {**message, "content": f"{text[:half]} …[{len(text) - 2 * half} chars cut]… {text[-half:]}"}


def development_inputs() -> TaskInputs:
    """Fourteen small candidates over three domains (two problems have a second sampled solution)."""
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
        inventory.append(_row(f"c{index:03d}", f"p{index:03d}", domain, question, thought, answer))
        if index in (2, 7):  # a second sampled solution of the same problem is its own candidate
            inventory.append(_row(f"c{index:03d}b", f"p{index:03d}", domain, question, thought + " Check it.", answer))
    call = StrategyCall(
        entry_point="select_trajectories", arguments={"candidate_inventory": inventory, "select_size": 5}
    )
    return TaskInputs(calls=(call,), description="fourteen synthetic candidates (math, code, science)")
