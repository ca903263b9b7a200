"""Evaluating the untrained base model on the in-loop benchmark (bootstrap, paper App. D.3).

The base model is the reference point of the bootstrap Plan P000, so it is scored exactly as a
Trial's selected checkpoint is: the in-loop benchmark with K_offline samples and the
evaluation seed of 𝓑. The job carries the search-side copy of 𝓑 (no held-out benchmarks).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import Field

from ade_core.config import check_generation
from ade_core.engine import data
from ade_core.engine.evaluation import evaluate
from ade_core.engine.job import read_job_file
from ade_core.engine.model import EngineError
from ade_core.plugins import PluginRegistry, load_plugins
from ade_core.schemas.common import DigestField, Model
from ade_core.schemas.config import ExperimentConfig, GenerationSettings


class BaseEvaluationJob(Model):
    """What ``ade engine base-eval`` needs: the search-side 𝓑 and the digest it must prove."""

    config: ExperimentConfig = Field(description="Search-side 𝓑 (config.for_search()).")
    config_digest: str = DigestField("Digest of the whole frozen 𝓑.")
    held_out_digest: str = DigestField("Digest of the held-out suite left out of ``config``.")
    base_dir: str = Field(description="Directory that relative paths in the config resolve against.")
    generation: GenerationSettings = Field(
        default_factory=GenerationSettings,
        description="[operational.generation]: where the generation servers are (𝓑 names the backend).",
    )
    grading_workers: int = Field(default=2, ge=1, description="Grader processes.")

    @classmethod
    def of(
        cls, config: ExperimentConfig, base_dir: str, generation: GenerationSettings | None = None
    ) -> BaseEvaluationJob:
        """The job for the frozen ``config`` (held-out benchmarks left out), generating at ``generation``."""
        return cls(
            config=config.for_search(),
            config_digest=config.digest(),
            held_out_digest=config.held_out_digest(),
            base_dir=base_dir,
            generation=generation or GenerationSettings(),
        )

    def check(self) -> None:
        """Refuse a job whose config does not prove the frozen digest, or that carries held-out benchmarks."""
        if self.config.evaluation.held_out:
            raise EngineError("a base-model evaluation job must not carry held-out benchmarks; use config.for_search()")
        digest = self.config.digest(self.held_out_digest)
        if digest != self.config_digest:
            raise EngineError(f"config digest {digest} does not match the job's frozen {self.config_digest}")
        check_generation(self.config, self.generation)


def evaluate_base_model(job: BaseEvaluationJob, registry: PluginRegistry | None = None) -> dict[str, Any]:
    """In-loop scores of the untrained target model: ``{"scores", "missing_reason", "k", "problems"}``."""
    job.check()
    registry = registry or load_plugins()
    config, base = job.config, Path(job.base_dir)
    task = registry.task(config.task)
    graders = registry.graders()
    in_loop = config.evaluation.in_loop
    if in_loop.grader not in graders:
        raise EngineError(f"unknown grader {in_loop.grader!r}; installed: {sorted(graders)}")
    rows = data.benchmark_rows(data.resolve_path(base, in_loop.source))[: in_loop.limit]
    result = evaluate(
        data.resolve_model(base, config.model.target),
        rows,
        in_loop.k_offline,
        config=config,
        grader=graders[in_loop.grader],
        metrics=task.metrics(),
        seed=config.seeds.evaluation,
        benchmark=in_loop.name,
        server=job.generation,
        workers=job.grading_workers,
    )
    return {
        "scores": result.scores,
        "missing_reason": result.missing_reason,
        "k": in_loop.k_offline,
        "problems": len(rows),
    }


def load_base_job(path: Path) -> BaseEvaluationJob:
    job = read_job_file(BaseEvaluationJob, path, "base-model evaluation job", "base-model evaluation job")
    job.check()
    return job
