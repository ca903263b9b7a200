"""One sampling run, as ``ade engine sample`` executes it: problems in, graded records and a filtered dataset out.

``ade sample`` builds a :class:`SamplingJob` and submits it to the configured executor as a
``sampling`` request; the executor's worker runs :func:`run_sampling`. The problems are rows with an
id, a ``problem`` (or ``question``) and an ``answer`` (or ``reference_answer``, or code ``tests``);
they are graded with 𝓑's in-loop grader. The model is 𝓑's base model (or ``model``) on 𝓑's generation
backend, or a model an OpenAI-compatible server serves under a name (``server`` + ``served_model``),
which renders the chat template itself.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from ade_core.engine.model import EngineError
from ade_core.schemas.common import Model
from ade_core.schemas.config import ExperimentConfig, GenerationSettings

DATASET_FILE = "{filter}.jsonl"
PLAN_STATUSES = ("ok", "shortfall", "malformed")
SUMMARY_FILE = "summary.json"
RSA_FILE = "rsa.json"


class SamplingJob(Model):
    """Everything ``ade engine sample`` needs."""

    config: ExperimentConfig = Field(description="The configuration: model, prompt template, grader, backend.")
    base_dir: str = Field(description="Directory that relative paths resolve against.")
    generation: GenerationSettings = Field(default_factory=GenerationSettings)
    sampling: dict[str, Any] = Field(description="SamplingConfig fields (sampler, budget, decoding, seed, chunk).")
    problems: str = Field(description="The problem file (a path, or tiny:<split>).")
    limit: int | None = Field(default=None, ge=1, description="Only the first LIMIT problems.")
    model: str | None = Field(default=None, description="A checkpoint to sample instead of the base model.")
    server: str | None = Field(default=None, description="An OpenAI-compatible API root serving the model.")
    served_model: str | None = Field(default=None, description="The model name the server serves.")
    filter: Literal["rft", "sft", "anti"] | None = Field(default=None)
    size: int | None = Field(default=None, ge=0, description="Filtered dataset size (default: the filter's).")
    match_rft: bool = Field(default=False, description="ANTI: as many responses as RFT keeps.")
    grading_workers: int = Field(default=2, ge=1)
    rsa: dict[str, Any] | None = Field(default=None, description="RSAConfig fields: run RSA instead of sampling.")
    rl: dict[str, Any] | None = Field(
        default=None, description="RLConfig fields: RL from the model, validated per checkpoint, instead of sampling."
    )


def load_sampling_job(path: Path) -> SamplingJob:
    from ade_core.engine.job import read_job_file

    return read_job_file(SamplingJob, path, "sampling job file", "sampling job")


def _field(row: dict[str, Any], *names: str) -> Any:
    for name in names:
        if name in row:
            return row[name]
    return None


def read_problems(job: SamplingJob) -> list[Any]:
    """The job's problems as sampler inputs, in file order (at most ``limit``)."""
    from ade_core.engine import data, prompts
    from ade_core.sampling.samplers import Problem

    path = data.resolve_path(Path(job.base_dir), job.problems, "grpo")
    rows = data.read_jsonl(path)[: job.limit]
    if not rows:
        raise EngineError(f"{path} holds no problems")
    problems = []
    for number, row in enumerate(rows, 1):
        text = _field(row, "problem", "question")
        reference = data.reference_of(row) if "tests" in row else _field(row, "answer", "reference_answer")
        if text is None or reference is None:
            raise EngineError(
                f"{path}:{number}: a problem needs 'problem' (or 'question') and 'answer' (or 'reference_answer', "
                f"or 'tests'); got {sorted(row)}"
            )
        problems.append(
            Problem(
                data.row_id(row),
                str(text),
                reference,
                prompts.conversation(job.config, str(text)),
                str(row.get("domain") or "math"),
            )
        )
    return problems


def _generator(job: SamplingJob) -> Any:
    from ade_core.engine import data
    from ade_core.engine.generation import load_generator, make_generator

    if job.server is not None:
        return make_generator(
            "openai",
            job.served_model or "default",
            base_url=job.server,
            timeout=job.generation.timeout_s,
            max_concurrency=job.generation.max_concurrency,
            retries=job.generation.max_retries,
            chat_template_kwargs=job.config.model.chat_template_kwargs,
        )
    model = Path(job.model) if job.model else data.resolve_model(Path(job.base_dir), job.config.model.target)
    return load_generator(model, job.config, job.generation)


def settings_of(job: SamplingJob, sampling: dict[str, Any]) -> dict[str, Any]:
    """What a resumed run must share with the run it resumes."""
    return {
        **sampling,
        "problems": job.problems,
        "limit": job.limit,
        "model": job.model or job.config.model.target,
        "server": job.server,
        "served_model": job.served_model,
        "config_digest": job.config.digest(),
    }


def run_sampling(job: SamplingJob, out: Path, progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
    """Sample (or resume sampling) every problem of ``job`` into ``out``; filter when asked; return the summary."""
    from ade_core.engine.grading.pool import GradingPool
    from ade_core.plugins import load_plugins
    from ade_core.sampling.filters import candidates, select
    from ade_core.sampling.samplers import SamplingConfig, sample_chunk
    from ade_core.sampling.store import SampleStore, run_chunks

    if job.rsa is not None:
        return _run_rsa(job, out)
    if job.rl is not None:
        from ade_core.sampling.rl import run_rl

        return run_rl(job, out)
    config = SamplingConfig(**job.sampling)
    problems = read_problems(job)
    ids = [p.problem_id for p in problems]
    if len(set(ids)) != len(ids):
        raise EngineError(f"{job.problems}: problem ids repeat; every problem needs its own id")
    grader = load_plugins().graders().get(job.config.evaluation.in_loop.grader)
    if grader is None:
        raise EngineError(f"unknown grader {job.config.evaluation.in_loop.grader!r} ([evaluation.in_loop].grader)")
    store = SampleStore(out)
    done = store.open(settings_of(job, config.to_json()))
    generator = _generator(job) if not set(ids) <= done else None
    try:
        with GradingPool(grader, job.grading_workers) as pool:

            def grade(pairs: list[tuple[str, Any]]) -> list[bool]:
                return [outcome.correct for outcome in pool.grade(pairs)]

            def draw(index: int, members: range) -> list[Any]:
                assert generator is not None, "only a chunk not yet recorded is drawn"
                return sample_chunk([problems[i] for i in members], generator, config, index, grade)

            run_chunks(ids, config.chunk, done, draw, store, progress)
    finally:
        if generator is not None:
            generator.close()
    records = {r.problem_id: r for r in store.records()}
    ordered = [records[i] for i in ids]
    summary = summarize(ordered, config)
    if job.filter is not None:
        kept = select(ordered, job.filter, size=job.size, match_rft=job.match_rft, seed=config.seed)
        messages = {p.problem_id: p.messages for p in problems}
        rows = candidates(kept, messages, problems[0].domain)
        path = out / DATASET_FILE.format(filter=job.filter)
        staging = path.with_suffix(".tmp")
        staging.write_text("".join(json.dumps(row, sort_keys=True) + "\n" for row in rows), encoding="utf-8")
        staging.replace(path)
        summary["filter"] = {"name": job.filter, "responses": len(kept), "problems": len(rows), "path": str(path)}
    summary_path = out / SUMMARY_FILE
    staging = summary_path.with_suffix(".tmp")
    staging.write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    staging.replace(summary_path)
    return summary


def _run_rsa(job: SamplingJob, out: Path) -> dict[str, Any]:
    """RSA of the job's model on its problems; the whole result (every member's lineage) to ``out/rsa.json``."""
    from ade_core.engine.grading.pool import GradingPool
    from ade_core.plugins import load_plugins
    from ade_core.sampling.rsa import RSAConfig, run_rsa

    assert job.rsa is not None
    config = RSAConfig(**job.rsa)
    problems = read_problems(job)
    grader = load_plugins().graders().get(job.config.evaluation.in_loop.grader)
    if grader is None:
        raise EngineError(f"unknown grader {job.config.evaluation.in_loop.grader!r} ([evaluation.in_loop].grader)")
    generator = _generator(job)
    try:
        with GradingPool(grader, job.grading_workers) as pool:
            result = run_rsa(problems, generator, config, lambda pairs: [o.correct for o in pool.grade(pairs)])
    finally:
        generator.close()
    out.mkdir(parents=True, exist_ok=True)
    path = out / RSA_FILE
    staging = path.with_suffix(".tmp")
    staging.write_text(json.dumps(result, sort_keys=True) + "\n", encoding="utf-8")
    staging.replace(path)
    runs = [{"pass@1": run["pass@1"], "pass@1_by_round": run["pass@1_by_round"]} for run in result["runs"]]
    return {"rsa": {"pass@1": result["pass@1"], "runs": runs, "config": result["config"], "path": str(path)}}


def summarize(records: list[Any], config: Any) -> dict[str, Any]:
    """Counts a researcher reads first: responses kept and leaked, plan outcomes, tokens, problems solved."""
    plans = [r.plan for r in records if r.plan is not None]
    kept = [s for r in records for s in r.kept()]
    return {
        "sampler": config.sampler,
        "budget": config.budget,
        "problems": len(records),
        "responses": sum(len(r.samples) for r in records),
        "kept": len(kept),
        "leaked": sum(r.leaked for r in records),
        "correct": sum(1 for s in kept if s["correct"]),
        "solved": sum(1 for r in records if any(s["correct"] for s in r.kept())),
        "response_tokens": sum(s["tokens"] for r in records for s in r.samples),
        "planning_tokens": sum(p["tokens"] for p in plans),
        "plans": {
            status: sum(1 for p in plans if p["status"] == status) for status in ("ok", "shortfall", "malformed")
        },
    }
