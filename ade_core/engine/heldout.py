"""Operator-tier held-out evaluation into a record store kept apart from research state.

Sec 3.4: held-out results never feed search. They go to their own store, never into an
Experiment Package, a view or a memory; the report reads them for its held-out curves only.
"""

from __future__ import annotations

import json
import os
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from ade_core.engine import data
from ade_core.engine.evaluation import Evaluation, evaluate, metric_names
from ade_core.engine.generation import load_generator
from ade_core.engine.grading.pool import GradingPool
from ade_core.engine.job import EngineJob
from ade_core.engine.metrics import Missing, macro_average
from ade_core.engine.model import EngineError
from ade_core.plugins import PluginRegistry, load_plugins
from ade_core.schemas.common import canonical_json


def score_heldout(job: EngineJob, checkpoint: Path, registry: PluginRegistry | None = None) -> dict[str, Any]:
    """Evaluate ``checkpoint`` on every held-out benchmark of the job's (full) 𝓑.

    The checkpoint is loaded once and each grader's worker pool started once for all benchmarks;
    each benchmark draws its samples as a lone evaluation with the same seed would. A checkpoint
    that cannot be loaded makes every benchmark missing (never zero).

    Returns ``{"benchmarks": {name: {k, problems, scores, missing_reason, responses}}, "macro_avg"}``.
    """
    job.check()
    registry = registry or load_plugins()
    task = registry.task(job.config.task)
    graders, metrics = registry.graders(), task.metrics()
    names = metric_names(metrics, job.config)  # the configured pass@k are macro-averaged too
    base = Path(job.base_dir)
    if not job.config.evaluation.held_out:
        raise EngineError("the configuration declares no [[evaluation.held_out]] benchmarks")
    for bench in job.config.evaluation.held_out:
        if bench.grader not in graders:
            raise EngineError(f"held-out benchmark {bench.name!r}: unknown grader {bench.grader!r}")
    suite = [
        (bench, data.benchmark_rows(data.resolve_path(base, bench.source))[: bench.limit])
        for bench in job.config.evaluation.held_out
    ]
    benchmarks: dict[str, Any] = {}
    with ExitStack() as stack:
        try:
            generator = load_generator(checkpoint, job.config, job.generation)
        except Exception as exc:  # every benchmark is missing, not zero
            reason = f"{type(exc).__name__}: {exc}"[:500]
            for bench, rows in suite:
                benchmarks[bench.name] = _result(bench.k, rows, Evaluation(None, missing_reason=reason))
            return {"benchmarks": benchmarks, "macro_avg": macro_scores(benchmarks, names)}
        stack.callback(generator.close)
        pools = {
            name: stack.enter_context(GradingPool(graders[name], job.grading_workers))
            for name in dict.fromkeys(bench.grader for bench, _ in suite)
        }
        for bench, rows in suite:
            result = evaluate(
                checkpoint,
                rows,
                bench.k,
                config=job.config,
                grader=graders[bench.grader],
                metrics=metrics,
                seed=job.command.seeds.get("evaluation", 0),
                benchmark=bench.name,
                generator=generator,
                pool=pools[bench.grader],
            )
            benchmarks[bench.name] = _result(bench.k, rows, result)
    return {"benchmarks": benchmarks, "macro_avg": macro_scores(benchmarks, names)}


def _result(k: int, rows: list[dict[str, Any]], result: Evaluation) -> dict[str, Any]:
    return {
        "k": k,
        "problems": len(rows),
        "scores": result.scores,
        "missing_reason": result.missing_reason,
        "responses": result.responses,
    }


def macro_scores(benchmarks: dict[str, Any], metric_names: list[str]) -> dict[str, float | None]:
    """Per metric, the macro average over benchmarks; None when any benchmark is missing."""
    macro: dict[str, float | None] = {}
    for name in metric_names:
        values = [b["scores"][name] if b["scores"] else Missing(b["missing_reason"]) for b in benchmarks.values()]
        value = macro_average(values)
        macro[name] = None if isinstance(value, Missing) else value
    return macro


def evaluate_heldout(
    job: EngineJob, checkpoint: Path, store: Path, registry: PluginRegistry | None = None
) -> dict[str, Any]:
    """Evaluate ``checkpoint`` on every held-out benchmark; write and return the record."""
    scored = score_heldout(job, checkpoint, registry)
    benchmarks = {
        name: {k: v for k, v in result.items() if k not in ("responses", "problems")}
        for name, result in scored["benchmarks"].items()
    }
    record = {
        "trial_id": job.trial_id,
        "attempt_id": job.attempt_id,
        "checkpoint": str(checkpoint),
        "config_digest": job.command.config_digest,
        "benchmarks": benchmarks,
        "macro_avg": scored["macro_avg"],
        "evaluated_at": time.time(),
    }
    store.mkdir(parents=True, exist_ok=True)
    path = store / f"{job.trial_id.replace('/', '_')}--{job.attempt_id}.json"
    if path.exists():
        raise EngineError(f"{path} exists: held-out records are append-only; evaluate under a new attempt id")
    path.write_text(canonical_json(record) + "\n", encoding="utf-8")
    os.chmod(path, 0o444)
    return json.loads(path.read_text())
