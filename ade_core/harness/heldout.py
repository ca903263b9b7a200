"""``ade heldout RUN``: operator-run held-out evaluation of the frozen final selection (paper Sec 3.4).

Held-out results never feed search. They live only in the operator-only store ``<run>/heldout/``:

- ``evaluations/NNNN.json``: one ``HeldOutEvaluation`` per run of ``ade heldout`` (append-only,
  written atomically, read-only once written);
- ``responses/NNNN/<benchmark>.jsonl``: that evaluation's graded responses, with the problems.

The run store (SQLite + object store) receives only a ``held_out_evaluation`` entry in the
operator ledger naming the record file and its digest — never a benchmark name or a score — and
no search-side module (views, snapshot, memory, ranking, plans, trials, analysis) imports this
one. Dry runs use a simulated evaluation (deterministic, no torch) that still reads the
held-out problems, so isolation is tested on real held-out data.
"""

from __future__ import annotations

import getpass
import hashlib
import json
import os
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ade_core.engine import data
from ade_core.engine.heldout import macro_scores
from ade_core.errors import AdeError
from ade_core.harness.operator import append_action
from ade_core.harness.run import RunSettings, checkpoint_selection, frozen_config, read_settings
from ade_core.plugins import PluginRegistry, TaskHandle, load_plugins
from ade_core.schemas.artifact import BoundCommand
from ade_core.schemas.common import canonical_json
from ade_core.schemas.config import ExperimentConfig, ResourceConfig
from ade_core.schemas.heldout import HeldOutBenchmarkResult, HeldOutEvaluation
from ade_core.schemas.run import FinalSelection, RunRecord
from ade_core.schemas.trial import Trial
from ade_core.store import RunStore

if TYPE_CHECKING:
    from ade_core.engine.job import EngineJob

HELDOUT_DIR = "heldout"


class HeldOutError(AdeError):
    """A held-out evaluation cannot run as asked (no final selection, no held-out suite, a lost checkpoint)."""


class HeldOutStore:
    """The operator-only held-out store of one run directory (``<run>/heldout/``)."""

    def __init__(self, run_dir: Path | str):
        self.root = Path(run_dir) / HELDOUT_DIR

    def evaluations(self) -> list[HeldOutEvaluation]:
        """Every recorded evaluation, in sequence order."""
        folder = self.root / "evaluations"
        if not folder.is_dir():
            return []
        return [
            HeldOutEvaluation.model_validate_json(path.read_text(encoding="utf-8"))
            for path in sorted(folder.glob("[0-9][0-9][0-9][0-9].json"))
        ]

    def next_sequence(self) -> int:
        return len(self.evaluations()) + 1

    def record_path(self, sequence: int) -> Path:
        return self.root / "evaluations" / f"{sequence:04d}.json"

    def write_responses(self, sequence: int, benchmark: str, rows: list[dict[str, Any]]) -> str:
        """Write one benchmark's graded responses; returns the path relative to the store."""
        relative = Path("responses") / f"{sequence:04d}" / f"{_safe(benchmark)}.jsonl"
        _write_once(self.root, self.root / relative, "".join(canonical_json(row) + "\n" for row in rows))
        return relative.as_posix()

    def write(self, evaluation: HeldOutEvaluation) -> tuple[Path, str]:
        """Append ``evaluation``; returns its path and the digest of its content."""
        text = evaluation.model_dump_json(indent=2) + "\n"
        path = self.record_path(evaluation.sequence)
        _write_once(self.root, path, text)
        return path, "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name) or "benchmark"


def _write_once(root: Path, path: Path, text: str) -> None:
    """Atomically create ``path`` read-only; an existing record is never overwritten (append-only)."""
    root.mkdir(parents=True, exist_ok=True)
    os.chmod(root, 0o700)  # operator-only
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists():
        raise HeldOutError(f"{path} exists: the held-out store is append-only")
    staging = path.with_name(path.name + f".tmp{os.getpid()}")
    staging.write_text(text, encoding="utf-8")
    os.chmod(staging, 0o444)
    os.link(staging, path)  # fails if another writer got there first
    staging.unlink()


# -- scoring: the simulated evaluator (dry runs) and the Engine jobs ----------------------------


def simulated_heldout(
    config: ExperimentConfig, base_dir: str, selection: FinalSelection, task: TaskHandle
) -> dict[str, Any]:
    """A deterministic stand-in for the Engine's held-out evaluation (dry runs; no torch).

    It reads every held-out problem (so isolation tests run on real held-out data) and draws each
    sample's correctness from the selected command's simulated ability, the problem and the
    benchmark (``ade_core.harness.simulated``), then scores the matrix with the task's metrics.
    """
    from ade_core.harness.simulated import correctness_matrix, heldout_shift, score_matrix, simulated_ability

    metrics = task.metrics()
    ability = simulated_ability(selection.command_digest)
    benchmarks: dict[str, Any] = {}
    for bench in config.evaluation.held_out:
        rows = data.benchmark_rows(data.resolve_path(Path(base_dir), bench.source))[: bench.limit]
        problems = [f"{bench.name}:{row['problem']}" for row in rows]
        key = f"{selection.command_digest}:{bench.name}"
        matrix = correctness_matrix(key, ability, problems, bench.k, shift=heldout_shift(bench.name))
        responses = [
            {
                "problem_id": str(row.get("problem_id", row.get("id"))),
                "problem": row["problem"],
                "sample": j,
                "correct": c,
                "response": "simulated",
            }
            for row, correct in zip(rows, matrix, strict=True)
            for j, c in enumerate(correct)
        ]
        benchmarks[bench.name] = {
            "k": bench.k,
            "problems": len(rows),
            "scores": score_matrix(matrix, metrics) if matrix else None,
            "missing_reason": None if matrix else "the benchmark has no problems",
            "responses": responses,
        }
    return {"benchmarks": benchmarks, "macro_avg": macro_scores(benchmarks, list(metrics))}


def _engine_job(
    store: RunStore, config: ExperimentConfig, settings: RunSettings, target: FinalSelection
) -> EngineJob | None:
    """The Engine job that evaluates ``target`` (None for a Trial without a bound command)."""
    from ade_core.engine.job import EngineJob

    trial: Trial | None = store.get_model("trial", target.trial_id)
    if trial is None or not isinstance(trial.records.command, str):
        return None
    command = BoundCommand.model_validate(store.objects.read_json(trial.records.command))
    return EngineJob(
        trial_id=target.trial_id,
        attempt_id="heldout",
        command=command,
        config=config,
        base_dir=settings.base_dir,
        generation=settings.operational.generation,
    )


def _checkpoint(path: str | None) -> Path:
    if not path or not Path(path).is_dir():
        raise HeldOutError(
            f"the selected checkpoint {path!r} does not exist; held-out evaluation needs the frozen checkpoint "
            "— restore the attempt directory it lived in"
        )
    return Path(path)


# -- the operator command ------------------------------------------------------------------------


def run_heldout(
    run_dir: Path | str, *, operator: str | None = None, reason: str = "", registry: PluginRegistry | None = None
) -> tuple[HeldOutEvaluation, Path]:
    """Evaluate ``run_dir``'s frozen final selection on the held-out suite; record it operator-only.

    Returns the evaluation and the path of its record.
    """
    run_dir = Path(run_dir)
    registry = registry or load_plugins()
    with RunStore.open(run_dir) as store:
        record = _completed_run(store, run_dir)
        selection = record.selection
        if not isinstance(selection, FinalSelection):
            raise HeldOutError(
                f"run {record.run_id} has no frozen final selection (no Trial had in-loop scores); held-out "
                "evaluation comes after final selection"
            )
        target = (selection, "final_selection", reason)
        return _evaluate_all(store, record, [target], operator, registry, workers=1, progress=None)[0]


def heldout_per_trial(
    run_dir: Path | str,
    *,
    operator: str | None = None,
    registry: PluginRegistry | None = None,
    final: bool = False,
    per_trial: bool = True,
    workers: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> list[tuple[HeldOutEvaluation, Path]]:
    """Evaluate every scored Trial's selected checkpoint on the held-out suite, for the report only.

    Runs after final selection (so nothing it learns can steer search) and skips Trials the store
    already holds an evaluation of, so an interrupted pass resumes where it stopped. With ``final``
    the frozen selection is evaluated first, as ``ade heldout`` would (scope ``final_selection``),
    unless the store already holds that evaluation; ``per_trial=False`` evaluates only that.

    The checkpoints are scored in parallel worker processes (``workers``; default: one per CPU
    slot of one thread, or per GPU slot, see :func:`heldout_workers`) and recorded in Trial order
    as each finishes in turn; ``progress(done, total)`` follows them. Dry runs and a single worker
    score in this process.
    """
    run_dir = Path(run_dir)
    registry = registry or load_plugins()
    with RunStore.open(run_dir) as store:
        record = _completed_run(store, run_dir)
        existing = HeldOutStore(run_dir).evaluations()
        evaluated = {e.trial_id for e in existing}
        targets: list[tuple[FinalSelection, str, str]] = []
        if final and isinstance(record.selection, FinalSelection):
            if not any(e.scope == "final_selection" for e in existing):
                targets.append((record.selection, "final_selection", "end of ade run: the final selection"))
            evaluated.add(record.selection.trial_id)
        for document in store.list("trial") if per_trial else []:
            target = trial_target(Trial.model_validate(document.document))
            if target is not None and target.trial_id not in evaluated:
                targets.append((target, "trial", "report: held-out score of each Trial"))
                evaluated.add(target.trial_id)
        return _evaluate_all(store, record, targets, operator, registry, workers=workers, progress=progress)


def _evaluate_all(
    store: RunStore,
    record: RunRecord,
    targets: list[tuple[FinalSelection, str, str]],
    operator: str | None,
    registry: PluginRegistry,
    *,
    workers: int | None,
    progress: Callable[[int, int], None] | None,
) -> list[tuple[HeldOutEvaluation, Path]]:
    """Score each ``(target, scope, reason)`` on the held-out suite and append the records in that order."""
    if not targets:
        return []
    config = frozen_config(store, record)
    settings = read_settings(store.run_dir)
    if not config.evaluation.held_out:
        raise HeldOutError(f"run {record.run_id}'s config declares no [[evaluation.held_out]] benchmarks")
    jobs = [_engine_job(store, config, settings, target) for target, _, _ in targets]
    if not settings.dry_run:
        for (target, _, _), job in zip(targets, jobs, strict=True):
            _checkpoint(target.checkpoint_path)
            if job is None:
                raise HeldOutError(f"{target.trial_id} has no bound command; its checkpoint cannot be evaluated")
    count = 1 if settings.dry_run else min(len(targets), workers or heldout_workers(config.resources))
    engine = "simulated" if settings.dry_run else "engine"
    if progress is not None:
        progress(0, len(targets))
    done: list[tuple[HeldOutEvaluation, Path]] = []

    def record_one(index: int, scored: dict[str, Any]) -> None:
        target, scope, reason = targets[index]
        done.append(_record(store, record, target, scope, operator, reason, scored, engine))
        if progress is not None:
            progress(len(done), len(targets))

    if count <= 1:
        for index, (target, _, _) in enumerate(targets):
            if settings.dry_run:
                scored = simulated_heldout(config, settings.base_dir, target, registry.task(config.task))
            else:
                from ade_core.engine.heldout import score_heldout

                scored = score_heldout(jobs[index], _checkpoint(target.checkpoint_path), registry)  # type: ignore[arg-type]  # every job is built: checked before scoring starts
            record_one(index, scored)
        return done
    ready = [job for job in jobs if job is not None]  # all of them: checked above
    checkpoints = [str(target.checkpoint_path) for target, _, _ in targets]
    for index, scored in score_in_workers(config.resources, ready, checkpoints, count):
        record_one(index, scored)
    return done


def heldout_workers(resources: ResourceConfig) -> int:
    """How many checkpoints the report's held-out pass scores at once: one per executor slot of the
    same resources with one torch thread each on CPU (a small model decodes faster as several one-thread
    processes than as one many-thread process), one per GPU slot on CUDA."""
    from ade_core.executors.slots import slots_from_resources

    return len(slots_from_resources(_worker_resources(resources)))


def _worker_resources(resources: ResourceConfig) -> ResourceConfig:
    return resources if resources.device == "cuda" else resources.model_copy(update={"cpu_threads": 1})


def score_in_workers(
    resources: ResourceConfig, jobs: list[EngineJob], checkpoints: list[str], count: int
) -> Iterator[tuple[int, dict[str, Any]]]:
    """Held-out scores of ``jobs`` (each with its checkpoint) from ``count`` spawned worker processes.

    Each worker takes one slot of ``resources`` (its cores, one torch thread on CPU; its GPUs on
    CUDA) and loads each checkpoint once for the whole suite. Yields ``(index, scored)`` in input
    order; a failure stops the remaining work and is raised.
    """
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    from ade_core.executors.slots import slots_from_resources

    context = multiprocessing.get_context("spawn")
    slots = context.Queue()
    for slot in slots_from_resources(_worker_resources(resources))[:count]:
        slots.put((slot.cpus, slot.gpus))
    with ProcessPoolExecutor(count, mp_context=context, initializer=_enter_slot, initargs=(slots,)) as pool:
        futures = [
            pool.submit(_score_job, job.model_dump_json(), checkpoint)
            for job, checkpoint in zip(jobs, checkpoints, strict=True)
        ]
        try:
            for index, future in enumerate(futures):
                yield index, future.result()
        except BaseException:
            pool.shutdown(wait=True, cancel_futures=True)
            raise


def _enter_slot(slots: Any) -> None:
    """Worker start-up: take one slot's cores (one torch thread on CPU) or GPUs before torch starts."""
    cpus, gpus = slots.get()
    if gpus:
        os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(gpus)
    if cpus and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, cpus)
    import torch

    torch.set_num_threads(max(1, len(cpus)) if gpus else 1)


def _score_job(job_json: str, checkpoint: str) -> dict[str, Any]:
    from ade_core.engine.heldout import score_heldout
    from ade_core.engine.job import EngineJob

    return score_heldout(EngineJob.model_validate_json(job_json), _checkpoint(checkpoint))


def trial_target(trial: Trial) -> FinalSelection | None:
    """What a held-out evaluation of ``trial`` evaluates: its package's selected checkpoint (None if unscored)."""
    target = checkpoint_selection(trial)
    return target if target is not None and target.selected_step is not None else None


def _completed_run(store: RunStore, run_dir: Path) -> RunRecord:
    record: RunRecord | None = store.get_model("run", "run")
    if record is None:
        raise HeldOutError(f"{run_dir} holds no initialized run")
    if record.phase != "completed":
        raise HeldOutError(
            f"run {record.run_id} has no frozen final selection (phase {record.phase}); held-out evaluation comes "
            f"after final selection — complete it with `ade resume {run_dir}` (or `ade finish {run_dir}` then resume)"
        )
    return record


def _record(
    store: RunStore,
    record: RunRecord,
    target: FinalSelection,
    scope: str,
    operator: str | None,
    reason: str,
    scored: dict[str, Any],
    engine: str,
) -> tuple[HeldOutEvaluation, Path]:
    """Append one scored evaluation to the held-out store and name it in the operator ledger."""
    run_dir = store.run_dir
    checkpoint = None if engine == "simulated" else target.checkpoint_path
    held = HeldOutStore(run_dir)
    sequence = held.next_sequence()
    results = tuple(
        HeldOutBenchmarkResult(
            name=name,
            k=result["k"],
            problems=result["problems"],
            scores=result["scores"],
            missing_reason=result["missing_reason"],
            responses=held.write_responses(sequence, name, result["responses"]),
        )
        for name, result in scored["benchmarks"].items()
    )
    who = operator or getpass.getuser()
    evaluation = HeldOutEvaluation(
        sequence=sequence,
        run_id=record.run_id,
        scope=scope,
        plan_id=target.plan_id,
        trial_id=target.trial_id,
        strategy_digest=target.strategy_digest,
        command_digest=target.command_digest,
        config_digest=record.config_digest,
        checkpoint=checkpoint,
        engine=engine,
        benchmarks=results,
        macro_avg=scored["macro_avg"],
        fresh=not record.held_out_seen,
        seen_before=record.held_out_seen,
        operator=who,
        evaluated_at=datetime.now(UTC),
    )
    path, digest = held.write(evaluation)
    # The ledger names the record, never its benchmarks or scores (they stay under heldout/).
    details = {
        "sequence": sequence,
        "scope": scope,
        "record": path.relative_to(run_dir).as_posix(),
        "record_digest": digest,
        "fresh": evaluation.fresh,
    }
    append_action(store, "held_out_evaluation", operator=who, reason=reason, details=details)
    return evaluation, path


def lineage_seen(run_dir: Path | str, record: RunRecord) -> tuple[str, ...]:
    """Held-out evaluations a fork of ``run_dir`` made now has seen: the run's own and its lineage's."""
    own = tuple(f"{Path(run_dir).name}#{e.sequence}" for e in HeldOutStore(run_dir).evaluations())
    return (*record.held_out_seen, *own)


def format_evaluation(evaluation: HeldOutEvaluation) -> str:
    """The evaluation as a few readable lines (operator output only)."""
    fresh = "fresh" if evaluation.fresh else f"NOT FRESH (lineage saw {', '.join(evaluation.seen_before)})"
    lines = [
        f"held-out #{evaluation.sequence} of {evaluation.run_id}: {evaluation.trial_id} ({evaluation.engine}), {fresh}"
    ]
    for bench in evaluation.benchmarks:
        shown = json.dumps(bench.scores) if bench.scores is not None else f"missing: {bench.missing_reason}"
        lines.append(f"  {bench.name:24} k={bench.k} n={bench.problems} {shown}")
    lines.append(f"  macro avg: {json.dumps(evaluation.macro_avg)}")
    return "\n".join(lines)


__all__ = [
    "HELDOUT_DIR",
    "HeldOutError",
    "HeldOutStore",
    "heldout_per_trial",
    "heldout_workers",
    "score_in_workers",
    "lineage_seen",
    "run_heldout",
    "trial_target",
]
