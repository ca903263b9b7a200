"""Evaluating a checkpoint on a benchmark with K samples per problem (paper Sec 3.2, Appendix D.5).

Per-sample failures (no answer, grader timeout or error) score 0 and stay in the denominator;
a process-level failure that stops the evaluation is *missing*, never zero.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ade_core.engine.data import reference_of, row_id
from ade_core.engine.generation import load_generator
from ade_core.engine.generation.base import Generator, SamplingParams
from ade_core.engine.grading.pool import GradingPool, grade_batch
from ade_core.engine.metrics import coverage_at_ks, extra_metric_names, unbiased_pass_at_ks
from ade_core.engine.prompts import conversation
from ade_core.schemas.config import ExperimentConfig, GenerationSettings
from ade_core.specs import GraderSpec, MetricSpec


@dataclass(frozen=True)
class Evaluation:
    """Scores (None when missing), the correctness matrix and every graded response."""

    scores: dict[str, float] | None
    matrix: list[list[bool]] = field(default_factory=list)
    responses: list[dict[str, Any]] = field(default_factory=list)
    missing_reason: str | None = None

    @property
    def missing(self) -> bool:
        return self.scores is None


def evaluate(
    checkpoint: Path,
    rows: Sequence[Mapping[str, Any]],
    k: int,
    *,
    config: ExperimentConfig,
    grader: GraderSpec,
    metrics: Mapping[str, MetricSpec],
    seed: int,
    benchmark: str,
    server: GenerationSettings | None = None,
    workers: int = 2,
    generator: Generator | None = None,
    pool: GradingPool | None = None,
) -> Evaluation:
    """Generate K samples per problem, grade them, and compute every metric.

    Every response record names its problem (the row's id), ``benchmark`` and sample index, so
    reviews, reports and analyses can join it back to the problem it answers.

    An evaluation of several benchmarks on one checkpoint passes its own ``generator`` (loaded
    from ``checkpoint`` once) and grading ``pool`` (for ``grader``); they stay open. Without them
    the call loads and closes its own: 𝓑's [engine.generation].backend, at ``server`` for
    ``"openai"``.
    """
    params = SamplingParams.from_decoding(config.evaluation.decoding, k=k, seed=seed)
    prompts = [conversation(config, str(row["problem"])) for row in rows]
    try:
        if generator is not None:
            samples = generator.generate(prompts, params)
        else:
            own = load_generator(checkpoint, config, server)
            try:
                samples = own.generate(prompts, params)
            finally:
                own.close()
        pairs = [(s.text, reference_of(row)) for row, group in zip(rows, samples, strict=True) for s in group]
        outcomes = pool.grade(pairs) if pool is not None else grade_batch(grader, pairs, workers=workers)
    except Exception as exc:  # the evaluation could not finish: missing, not zero
        return Evaluation(None, missing_reason=f"{type(exc).__name__}: {exc}"[:500])
    matrix: list[list[bool]] = []
    values: list[list[float | None]] = []  # the grader's continuous scores, where it has a ``score``
    responses: list[dict[str, Any]] = []
    position = 0
    for row, group in zip(rows, samples, strict=True):
        correct_row = []
        values.append([])
        for index, sample in enumerate(group):
            outcome = outcomes[position]
            position += 1
            correct_row.append(outcome.correct)
            values[-1].append(outcome.score)
            responses.append(
                {
                    "problem_id": row_id(row),
                    "benchmark": benchmark,
                    "sample": index,
                    "response": sample.text,
                    "correct": outcome.correct,
                    "grade_status": outcome.status,
                    "num_tokens": sample.num_tokens,
                    "finish_reason": sample.finish_reason,
                    **({"score": outcome.score} if grader.score is not None else {}),
                }
            )
        matrix.append(correct_row)
    scores = score_matrix(matrix, metrics, config.evaluation.pass_k)
    coverage = config.evaluation
    if coverage.coverage_k and grader.score is not None:
        scores.update(coverage_at_ks(values, coverage.coverage_k, coverage.coverage_thresholds))
    return Evaluation(scores, matrix, responses)


def score_matrix(
    matrix: Sequence[Sequence[bool]], metrics: Mapping[str, MetricSpec], pass_k: Sequence[int] = ()
) -> dict[str, float]:
    """Every metric's value on ``matrix`` by the metric's own definition, then [evaluation].pass_k's
    unbiased ``pass@k`` (the k the samples allow)."""
    rows = [list(row) for row in matrix]
    scores = {name: metric.compute(rows) for name, metric in metrics.items()}
    return {**scores, **(unbiased_pass_at_ks(rows, pass_k) if pass_k else {})}


def metric_names(metrics: Mapping[str, MetricSpec], config: ExperimentConfig) -> list[str]:
    """The names an evaluation under ``config`` reports: the task's metrics, then the configured pass@k and
    coverage@k."""
    evaluation = config.evaluation
    return list(metrics) + extra_metric_names(evaluation.pass_k, evaluation.coverage_k, evaluation.coverage_thresholds)
