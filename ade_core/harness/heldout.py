"""``ade heldout RUN``: operator-run held-out evaluation of the frozen final selection (paper Sec 3.4).

Held-out results never feed search. They live only in the operator-only store ``<run>/heldout/``:

- ``evaluations/NNNN.json``: one ``HeldOutEvaluation`` per run of ``ade heldout`` (append-only,
  written atomically, read-only once written);
- ``responses/NNNN/<benchmark>.jsonl``: that evaluation's graded responses, with the problems.

The run store (SQLite + object store) receives only a ``held_out_evaluation`` entry in the
operator ledger naming the record file and its digest — never a benchmark name or a score — and
no search-side module (views, snapshot, memory, ranking, plans, trials, analysis) imports this
one. Each checkpoint is one ``heldout`` request to the Run's executor kind, which runs them side
by side as its resources allow and never beside in-loop work. Dry runs get the simulated Engine's
evaluation (deterministic, no torch), which still reads the held-out problems, so isolation is
tested on real held-out data.
"""

from __future__ import annotations

import asyncio
import getpass
import hashlib
import json
import os
import shutil
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ade_core.errors import AdeError
from ade_core.executors.base import AttemptOutcome, Executor, run
from ade_core.executors.requests import heldout_request, heldout_share, read_scored
from ade_core.harness.operator import append_action
from ade_core.harness.run import RunSettings, checkpoint_selection, frozen_config, read_settings
from ade_core.plugins import PluginRegistry, load_plugins
from ade_core.schemas.artifact import BoundCommand
from ade_core.schemas.common import canonical_json
from ade_core.schemas.config import ExperimentConfig
from ade_core.schemas.heldout import HeldOutBenchmarkResult, HeldOutEvaluation
from ade_core.schemas.run import FinalSelection, RunRecord
from ade_core.schemas.trial import Trial
from ade_core.store import RunStore

if TYPE_CHECKING:
    from ade_core.engine.job import EngineJob

HELDOUT_DIR = "heldout"
WORK_DIR = "work"  # under HELDOUT_DIR: a pass's scratch (the Engine's scores before they are recorded)


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


# -- scoring: one executor request per checkpoint ------------------------------------------------


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

    Each checkpoint is one ``heldout`` request to the Run's executor kind, which scores as many at
    once as its resources allow (one core and one thread each on CPU, the per-attempt GPUs on CUDA;
    at most ``workers`` when given); they are recorded in Trial order as each finishes in turn, and
    ``progress(done, total)`` follows them.
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
    for (target, _, _), job in zip(targets, jobs, strict=True):
        if not settings.dry_run:
            _checkpoint(target.checkpoint_path)
        if job is None:
            raise HeldOutError(f"{target.trial_id} has no bound command; its checkpoint cannot be evaluated")
    engine = "simulated" if settings.dry_run else "engine"
    if progress is not None:
        progress(0, len(targets))
    done: list[tuple[HeldOutEvaluation, Path]] = []
    executor = _executor(settings, config, registry)
    ready = [job for job in jobs if job is not None]  # all of them: checked above
    checkpoints = [Path(str(target.checkpoint_path)) for target, _, _ in targets]
    for index, scored in score_through(executor, ready, checkpoints, HeldOutStore(store.run_dir), config, workers):
        target, scope, reason = targets[index]
        done.append(_record(store, record, target, scope, operator, reason, scored, engine))
        if progress is not None:
            progress(len(done), len(targets))
    return done


def _executor(settings: RunSettings, config: ExperimentConfig, registry: PluginRegistry) -> Executor:
    """The Run's executor kind for held-out requests (the simulated Engine for a dry run)."""
    from ade_core.executors.factory import Simulation, make_executor

    simulation = None
    if settings.dry_run:
        from ade_core.harness.simulated import VirtualClock

        simulation = Simulation(registry.task(config.task), VirtualClock())
    return make_executor(settings.operational.executor, config.resources, simulation=simulation)


def score_through(
    executor: Executor,
    jobs: list[EngineJob],
    checkpoints: list[Path],
    held: HeldOutStore,
    config: ExperimentConfig,
    workers: int | None = None,
) -> Iterator[tuple[int, dict[str, Any]]]:
    """Held-out scores of ``jobs`` (each with its checkpoint), in as few ``heldout`` requests as run at once.

    The checkpoints are split in order into one batch per request the executor can run side by side
    (one core and one thread each on CPU; at most ``workers`` when given); each request scores its
    batch in one process, so torch and the plugins load once per core, not once per checkpoint. The
    requests never run beside in-loop work. Yields ``(index, scored)`` in input order as each batch
    finishes in turn; a failure cancels the remaining requests and is raised.
    """
    work = held.root / WORK_DIR / datetime.now(UTC).strftime("%Y%m%dT%H%M%S%f")
    work.mkdir(parents=True, exist_ok=True)
    os.chmod(held.root, 0o700)  # operator-only: the graded responses pass through here
    lanes = min(executor.capacity(heldout_share(config.resources)), workers or len(jobs), len(jobs))
    batches = split_batches(list(range(len(jobs))), lanes)
    requests = [
        heldout_request([(jobs[i], checkpoints[i]) for i in batch], work / f"{n:04d}", config.resources, request_id)
        for n, batch in enumerate(batches)
        for request_id in [f"heldout-{n:04d}"]
    ]
    loop = asyncio.new_event_loop()

    async def start() -> list[asyncio.Task[AttemptOutcome]]:
        return [asyncio.ensure_future(run(executor, request)) for request in requests]

    async def stop(tasks: list[asyncio.Task[AttemptOutcome]]) -> None:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await executor.close()

    tasks = loop.run_until_complete(start())
    try:
        for batch, request, task in zip(batches, requests, tasks, strict=True):
            outcome = loop.run_until_complete(task)
            if outcome.status != "succeeded":
                names = ", ".join(jobs[i].trial_id for i in batch)
                raise HeldOutError(
                    f"the held-out evaluation of {names} failed ({outcome.failure}): {outcome.detail[-800:]}"
                )
            yield from zip(batch, read_scored(outcome), strict=True)  # each recorded before the next is asked for
            shutil.rmtree(request.directory, ignore_errors=True)  # scratch: the records keep the responses
    finally:
        loop.run_until_complete(stop(tasks))
        loop.close()
        shutil.rmtree(work, ignore_errors=True)


def split_batches(indices: list[int], lanes: int) -> list[list[int]]:
    """``indices`` in order as ``lanes`` contiguous batches whose sizes differ by at most one."""
    size, extra = divmod(len(indices), lanes)
    batches, at = [], 0
    for lane in range(lanes):
        count = size + (1 if lane < extra else 0)
        batches.append(indices[at : at + count])
        at += count
    return batches


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
    "score_through",
    "split_batches",
    "lineage_seen",
    "run_heldout",
    "trial_target",
]
