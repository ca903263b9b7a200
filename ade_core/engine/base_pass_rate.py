"""Each RFT pool problem's base pass rate: the fraction of K samples of the target model graded correct.

An optional Curriculum inventory column beyond the paper (``[data].base_pass_rate_samples = K``), for
schedules that target the base model's frontier. Sampled once with 𝓑's evaluation decoding and in-loop
grader, and cached under the model's digest (its files' bytes), the decoding, the grader and the pool's
problems, so every Trial and Run on the same base and pool reads the same column. Only RFT training
rows are sampled: evaluation data never enters.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ade_core.engine import data
from ade_core.engine.model import EngineError
from ade_core.schemas.config import ExperimentConfig

CACHE_VERSION = 1


def cache_dir() -> Path:
    base = os.environ.get("ADE_CACHE_DIR") or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "ade"
    return Path(base) / "base-pass-rate"


def model_digest(model_dir: Path) -> str:
    """sha256 over the model directory's files (name and bytes), in name order."""
    digest = hashlib.sha256()
    for path in sorted(p for p in model_dir.rglob("*") if p.is_file()):
        digest.update(str(path.relative_to(model_dir)).encode())
        with path.open("rb") as handle:
            for chunk in iter(lambda: handle.read(1 << 20), b""):
                digest.update(chunk)
    return digest.hexdigest()


def cache_key(config: ExperimentConfig, model_dir: Path, rows: Sequence[Mapping[str, Any]]) -> str:
    problems = [(r["problem_id"], r["question"], r["reference_answer"]) for r in rows]
    material = {
        "version": CACHE_VERSION,
        "model": model_digest(model_dir),
        "samples": config.data.base_pass_rate_samples,
        "decoding": config.evaluation.decoding.model_dump(mode="json"),
        "system_prompt": config.evaluation.system_prompt,
        "prompt_template": config.evaluation.prompt_template,
        "chat_template_kwargs": dict(config.model.chat_template_kwargs),
        "grader": config.evaluation.in_loop.grader,
        "seed": config.seeds.data,
        "problems": hashlib.sha256(json.dumps(problems).encode()).hexdigest(),
    }
    return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()


def base_pass_rates(config: ExperimentConfig, base_dir: Path, rows: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """``{problem_id: fraction correct}`` over K base samples of each inventory row (cached)."""
    from ade_core.engine.evaluation import evaluate
    from ade_core.engine.generation import make_generator
    from ade_core.plugins import load_plugins

    samples = config.data.base_pass_rate_samples
    if samples <= 0:
        raise EngineError("[data].base_pass_rate_samples is 0: no base pass rate is computed")
    model_dir = data.resolve_model(base_dir, config.model.target)
    path = cache_dir() / f"{cache_key(config, model_dir, rows)}.json"
    if path.is_file():
        return json.loads(path.read_text(encoding="utf-8"))["rates"]
    grader = load_plugins().graders().get(config.evaluation.in_loop.grader)
    if grader is None:
        raise EngineError(f"unknown grader {config.evaluation.in_loop.grader!r} for the base pass rate")
    problems = [
        {"problem_id": r["problem_id"], "problem": r["question"], "answer": r["reference_answer"]} for r in rows
    ]
    # Always sampled with transformers: the column is cached per model and pool across configs, and a
    # plugin computes it without [operational.generation], so it never waits on a generation server.
    try:
        generator = make_generator("hf", model_dir, chat_template_kwargs=config.model.chat_template_kwargs)
    except Exception as exc:
        raise EngineError(f"the base pass rate could not be sampled: {type(exc).__name__}: {exc}"[:500]) from None
    try:
        result = evaluate(
            model_dir,
            problems,
            samples,
            config=config,
            grader=grader,
            metrics={},
            seed=config.seeds.data,
            benchmark="base_pass_rate",
            generator=generator,
        )
    finally:
        generator.close()
    if result.missing:
        raise EngineError(f"the base pass rate could not be sampled: {result.missing_reason}")
    rates = {
        row["problem_id"]: sum(correct) / len(correct) for row, correct in zip(problems, result.matrix, strict=True)
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(f".{os.getpid()}.tmp")
    partial.write_text(json.dumps({"samples": samples, "rates": rates}), encoding="utf-8")
    partial.replace(path)  # never half-written
    return rates
