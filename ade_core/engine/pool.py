"""The SFT candidate pool from the config's source, as flat candidate rows (Data Selection's inventory).

A candidate's messages are the user prompt and the assistant target; a source's own system
prompt is not part of the target (evaluation uses 𝓑's ``[evaluation].system_prompt``).

Sources: the tiny world (group form, one trajectory per group) or a local OpenThoughts-format file (JSONL or
parquet; rows with ``conversations: [{from, value}]`` or ``messages: [{role, content}]``), drawn
to ``[data.pool]`` with the pool builder (largest-remainder allocation over groups, per-group
seeded reservoir sampling, a final seeded shuffle). The Engine and the task read the same pool.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ade_core.engine import data
from ade_core.engine.model import EngineError, EngineInputMissing
from ade_core.engine.prompts import conversation
from ade_core.schemas.config import ExperimentConfig

# OpenThoughts writes reasoning and answer between these markers; ADE's format is <think>...</think>answer.
THOUGHT = re.compile(
    r"^\s*<\|begin_of_thought\|>(.*?)<\|end_of_thought\|>\s*<\|begin_of_solution\|>(.*?)<\|end_of_solution\|>\s*$",
    re.DOTALL,
)
ROLES = {"human": "user", "user": "user", "gpt": "assistant", "assistant": "assistant", "system": "system"}
LENGTH_BINS = ("le_4096", "4097_8192", "8193_16384")  # the paper's names, at every cap


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


def as_rows(row: Mapping[str, Any], index: int, where: str) -> list[dict[str, Any]]:
    """One source row as flat candidate rows, one trajectory per candidate (the paper's pool).

    A row in group form (``trajectories: [...]``, the tiny world's file) gives one candidate per
    trajectory: a single trajectory keeps the group's ``candidate_id``, several take their own
    ``trajectory_id``s and share the ``problem_id``.
    """
    if "trajectories" in row:
        trajectories = list(row["trajectories"])
        single = len(trajectories) == 1
        return [
            _row(row, str(row["candidate_id"]) if single else str(t["trajectory_id"]), list(t["messages"]), where)
            for t in trajectories
        ]
    candidate_id = str(row.get("candidate_id") or row.get("id") or f"ot{index:06d}")
    return [_row(row, candidate_id, _messages(row, where), where)]


def _row(source: Mapping[str, Any], candidate_id: str, messages: list[dict[str, str]], where: str) -> dict[str, Any]:
    if not any(m["role"] == "assistant" for m in messages):
        raise EngineError(f"{where}: candidate {candidate_id!r} has no assistant turn")
    domain = str(source.get("domain") or "math")
    level = source.get("difficulty", source.get("level"))
    quality = source.get("quality_score")
    return {
        "candidate_id": candidate_id,
        "problem_id": str(source.get("problem_id") or source.get("source_id") or candidate_id),
        "trajectory_ids": [candidate_id],
        "domain": domain,
        # Sec 4 / App. D: the paper's pool is unlabeled; a math source's level is kept when it has one.
        "difficulty": level if level is not None and domain == "math" else "unlabeled",
        "quality_score": float(quality) if isinstance(quality, (int, float)) and not isinstance(quality, bool) else 1.0,
        "messages": messages,
    }


def candidate_rows(config: ExperimentConfig, base_dir: Path) -> list[dict[str, Any]]:
    """The frozen candidate pool of ``config`` as flat rows, drawn with the pool builder."""
    from ade_core.tiny.splits import build_pool

    path = data.resolve_path(base_dir, config.data.source, "sft")
    rows = [r for i, row in enumerate(read_rows(path)) for r in as_rows(row, i, f"{path}:{i + 1}")]
    pool = config.data.pool
    weights = pool.groups or {g: 1.0 for g in sorted({row["domain"] for row in rows})}
    if not pool.groups and len(rows) <= pool.size:
        return rows
    try:
        chosen, _ = build_pool(rows, lambda r: r["domain"], weights, min(pool.size, len(rows)), pool.seed)
    except ValueError as exc:
        raise EngineError(f"[data.pool] cannot be drawn from {path}: {exc}") from None
    return [dict(r) for r in chosen]


def length_bin(tokens: int, cap: int) -> str:
    """The paper's length bin of a capped token count: edges at cap/4, cap/2 and cap, named as at its
    16,384 cutoff whatever the cap (over the cap is the ``over_cap`` flag, never a bin)."""
    if tokens <= cap // 4:
        return LENGTH_BINS[0]
    return LENGTH_BINS[1] if tokens <= cap // 2 else LENGTH_BINS[2]


def annotate_lengths(
    rows: Sequence[dict[str, Any]], tokenizer: Any, cap: int, template_kwargs: Mapping[str, Any] | None = None
) -> list[dict[str, Any]]:
    """Each row's chat-template token count capped at the training cutoff, the uncapped count, its
    length bin and an over-cap flag (over-cap rows stay admissible: the Engine truncates them)."""
    out = []
    for row in rows:
        rendered = tokenizer.apply_chat_template(row["messages"], tokenize=False, **(template_kwargs or {}))
        count = len(tokenizer(rendered, add_special_tokens=False)["input_ids"])
        capped = min(count, cap)
        out.append(
            {
                **row,
                "token_count": capped,
                "uncapped_token_count": count,
                "over_cap": count > cap,
                "length_bin": length_bin(capped, cap),
            }
        )
    return out


def inventory(config: ExperimentConfig, base_dir: Path) -> list[dict[str, Any]]:
    """What a Data Selection strategy sees: the pool's flat rows with token counts and length bins."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(data.resolve_model(base_dir, config.model.target))
    rows = candidate_rows(config, base_dir)
    return annotate_lengths(rows, tokenizer, config.data.max_tokens_per_example, config.model.chat_template_kwargs)


def rft_pool(config: ExperimentConfig, base_dir: Path) -> list[dict[str, Any]]:
    """The RFT training pool of ``config`` as rows ``{problem_id, source_order, question,
    reference_answer, subject, level}`` (subject and level when the source has them)."""
    path = data.resolve_path(Path(base_dir), config.data.source, "grpo")
    rows = []
    for order, row in enumerate(data.read_jsonl(path)):
        if "problem" not in row or "answer" not in row:
            raise EngineError(f"{path}:{order + 1}: RFT rows need 'problem' and 'answer'; got {sorted(row)}")
        rows.append(
            {
                "problem_id": data.row_id(row),
                "source_order": order,
                "question": str(row["problem"]),
                "reference_answer": str(row["answer"]),
                "subject": str(row.get("subject", row.get("type", "unlabeled"))),
                "level": row.get("level"),
            }
        )
    return rows


LEVEL_TEXT = re.compile(r"^\s*(?:level\s*)?(\d+|\?)\s*$", re.IGNORECASE)


def integer_level(value: Any) -> Any:
    """A MATH level as an integer where it reads as one (``3``, ``"3"``, ``"Level 3"``; ``"Level ?"`` is 0);
    any other value unchanged (the Engine does not need levels; a task that does checks them)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    match = LEVEL_TEXT.match(str(value)) if value is not None else None
    if match is None:
        return value
    return 0 if match.group(1) == "?" else int(match.group(1))


@dataclass(frozen=True)
class RFTInventory:
    """The RFT pool under the recipe's prompt limit: eligible rows and what the limit excluded."""

    rows: list[dict[str, Any]]
    source_rows: int
    overlength: tuple[str, ...]
    prompt_limit: int

    @property
    def counts(self) -> dict[str, int]:
        return {
            "source_rows": self.source_rows,
            "eligible_rows": len(self.rows),
            "overlength_rows": len(self.overlength),
            "max_prompt_tokens": self.prompt_limit,
        }


def prompt_token_counter(config: ExperimentConfig, tokenizer: Any) -> Callable[[str], int]:
    """Tokens of a problem's rollout prompt as GRPO renders it: 𝓑's system prompt and template, the
    target's chat template with the generation prompt."""
    kwargs = dict(config.model.chat_template_kwargs)

    def count(question: str) -> int:
        rendered = tokenizer.apply_chat_template(
            conversation(config, question), tokenize=False, add_generation_prompt=True, **kwargs
        )
        return len(tokenizer(rendered, add_special_tokens=False, verbose=False)["input_ids"])

    return count


def rft_inventory(config: ExperimentConfig, base_dir: Path, tokenizer: Any = None) -> RFTInventory:
    """𝓑's RFT pool as inventory rows ``{problem_id, source_order, subject, level, prompt_tokens,
    question, reference_answer}`` (level an integer where it reads as one), without the
    prompts over ``[training.grpo].max_prompt_tokens`` (paper: 3 of 3,072 excluded). The Engine
    trains on the same eligible rows."""
    recipe = config.training.grpo
    if recipe is None:
        raise EngineError("an RFT inventory needs [training].paradigm = 'grpo' and [training.grpo]")
    if tokenizer is None:
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(data.resolve_model(Path(base_dir), config.model.target))
    count = prompt_token_counter(config, tokenizer)
    rows, overlength = [], []
    source = rft_pool(config, base_dir)
    for row in source:
        tokens = count(row["question"])
        if tokens > recipe.max_prompt_tokens:
            overlength.append(row["problem_id"])
            continue
        rows.append(
            {
                "problem_id": row["problem_id"],
                "source_order": row["source_order"],
                "subject": row["subject"],
                "level": integer_level(row["level"]),
                "prompt_tokens": tokens,
                "question": row["question"],
                "reference_answer": row["reference_answer"],
            }
        )
    return RFTInventory(rows, len(source), tuple(overlength), recipe.max_prompt_tokens)
