"""The SFT candidate pool from the config's source, as candidate groups (Data Selection's inventory).

A candidate's messages are the user prompt and the assistant target; a source's own system
prompt is not part of the target (evaluation uses 𝓑's ``[evaluation].system_prompt``).

Sources: the tiny world (already in group form) or a local OpenThoughts-format file (JSONL or
parquet; rows with ``conversations: [{from, value}]`` or ``messages: [{role, content}]``), drawn
to ``[data.pool]`` with the pool builder (largest-remainder allocation over groups, per-group
seeded reservoir sampling, a final seeded shuffle). The Engine and the task read the same pool.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ade_core.engine import data
from ade_core.engine.model import EngineError, EngineInputMissing
from ade_core.schemas.config import ExperimentConfig

# OpenThoughts writes reasoning and answer between these markers; ADE's format is <think>...</think>answer.
THOUGHT = re.compile(
    r"^\s*<\|begin_of_thought\|>(.*?)<\|end_of_thought\|>\s*<\|begin_of_solution\|>(.*?)<\|end_of_solution\|>\s*$",
    re.DOTALL,
)
ROLES = {"human": "user", "user": "user", "gpt": "assistant", "assistant": "assistant", "system": "system"}
LENGTH_BINS = ("short", "medium", "long", "over_cap")


def read_rows(path: Path) -> list[dict[str, Any]]:
    """Rows of a JSONL or parquet file."""
    if path.suffix == ".parquet":
        if not path.is_file():
            raise EngineInputMissing(f"data file not found: {path}")
        import pyarrow.parquet as pq

        return pq.read_table(path).to_pylist()
    return data.read_jsonl(path)


def _messages(row: Mapping[str, Any], where: str) -> list[dict[str, str]]:
    if "messages" in row:
        return [{"role": m["role"], "content": m["content"]} for m in row["messages"]]
    if "conversations" in row:
        out = []
        for turn in row["conversations"]:
            role = ROLES.get(str(turn.get("from", turn.get("role", ""))).lower())
            if role is None:
                raise EngineError(f"{where}: unknown speaker {turn.get('from')!r} (expected human/user, gpt/assistant)")
            out.append({"role": role, "content": as_think_format(turn.get("value", turn.get("content", "")))})
        return out
    raise EngineError(f"{where}: a candidate row needs 'conversations' (OpenThoughts) or 'messages'; got {sorted(row)}")


def as_think_format(content: str) -> str:
    """OpenThoughts' thought/solution markers as one ``<think>`` span followed by the answer."""
    match = THOUGHT.match(content)
    if match is None:
        return content
    thought, solution = (part.strip() for part in match.groups())
    return f"<think>\n{thought}\n</think>\n\n{solution}"


def as_group(row: Mapping[str, Any], index: int, where: str) -> dict[str, Any]:
    """One source row as a candidate group (rows already in group form pass through)."""
    if "trajectories" in row:
        return dict(row)
    candidate_id = str(row.get("candidate_id") or row.get("id") or f"ot{index:06d}")
    messages = _messages(row, where)
    if not any(m["role"] == "assistant" for m in messages):
        raise EngineError(f"{where}: candidate {candidate_id!r} has no assistant turn")
    return {
        "candidate_id": candidate_id,
        "domain": str(row.get("domain") or "math"),
        "problem_id": str(row.get("problem_id") or row.get("source_id") or candidate_id),
        "trajectories": [{"trajectory_id": f"{candidate_id}-t0", "messages": messages}],
    }


def candidate_groups(config: ExperimentConfig, base_dir: Path) -> list[dict[str, Any]]:
    """The frozen candidate pool of ``config`` as groups, drawn with the pool builder."""
    from ade_core.tiny.splits import build_pool

    path = data.resolve_path(base_dir, config.data.source, "sft")
    groups = [as_group(row, i, f"{path}:{i + 1}") for i, row in enumerate(read_rows(path))]
    pool = config.data.pool
    weights = pool.groups or {g: 1.0 for g in sorted({group["domain"] for group in groups})}
    if not pool.groups and len(groups) <= pool.size:
        return groups
    try:
        chosen, _ = build_pool(groups, lambda g: g["domain"], weights, min(pool.size, len(groups)), pool.seed)
    except ValueError as exc:
        raise EngineError(f"[data.pool] cannot be drawn from {path}: {exc}") from None
    return [dict(g) for g in chosen]


def length_bin(tokens: int, cap: int) -> str:
    """Length bins scaled to the per-example cap (the paper's 4,096 / 8,192 / 16,384 at cap 16,384)."""
    if tokens > cap:
        return "over_cap"
    if tokens <= cap // 4:
        return "short"
    return "medium" if tokens <= cap // 2 else "long"


def annotate_lengths(groups: Sequence[dict[str, Any]], tokenizer: Any, cap: int) -> list[dict[str, Any]]:
    """Each trajectory's chat-template token count, its length bin and an over-cap flag (over-cap
    trajectories stay admissible: the Engine truncates them)."""
    out = []
    for group in groups:
        trajectories = []
        for t in group["trajectories"]:
            rendered = tokenizer.apply_chat_template(t["messages"], tokenize=False)
            count = len(tokenizer(rendered, add_special_tokens=False)["input_ids"])
            trajectories.append(
                {**t, "token_count": count, "length_bin": length_bin(count, cap), "over_cap": count > cap}
            )
        out.append({**group, "trajectories": trajectories})
    return out


def inventory(config: ExperimentConfig, base_dir: Path) -> list[dict[str, Any]]:
    """What a Data Selection strategy sees: the pool's groups with token counts and length bins."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(data.resolve_model(base_dir, config.model.target))
    groups = candidate_groups(config, base_dir)
    return annotate_lengths(groups, tokenizer, config.data.max_tokens_per_example)
