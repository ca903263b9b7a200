"""One complete Trial outside any agent loop: admission -> realization -> Bind -> Engine -> package.

Researchers use this (``ade admit`` / ``ade trial``) to test a hand-written strategy under the
frozen protocol. The untrained Base model's evaluation and the generic reference's Trial are
computed once per comparison key and cached, so every strategy under the same 𝓑 is compared
with the same numbers. The key covers the config digest, the ADE and sandbox versions, the task
plugin's version and a digest of the Engine's code: an Engine change never compares against a
stale reference.

Tasks whose references train identically declare one ``SharedReference`` (paper Sec 4: Curriculum
shares the Reward Design reference). Their key covers the config without its task-only fields, so
the first of them to run trains the reference and the others reuse it; the cached summary names the
task that trained it and its version, both checked on every reuse.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import functools
import hashlib
import json
import os
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ade_core import exit_codes
from ade_core.config import LoadedConfig
from ade_core.errors import AdeError, MissingHookError, UnknownTaskError
from ade_core.executors.base import AttemptOutcome, Executor, run
from ade_core.executors.requests import attempt_request
from ade_core.harness.admission import AdmissionResult, Realization, admit, bind, realize, strategy_digest
from ade_core.plugins import PluginRegistry, TaskHandle, load_plugins
from ade_core.schemas.common import Digest, sha256_digest
from ade_core.schemas.config import ExperimentConfig
from ade_core.specs import SharedReference

if TYPE_CHECKING:
    from ade_core.engine.job import EngineJob


class ReferenceTrialError(AdeError):
    """The task's own generic reference cannot run under this configuration."""


ENGINE_DIR = Path(__file__).resolve().parents[1] / "engine"


def cache_root() -> Path:
    """$ADE_CACHE_DIR, else $XDG_CACHE_HOME/ade, else ~/.cache/ade."""
    base = os.environ.get("ADE_CACHE_DIR") or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "ade"
    return Path(base)


def engine_code_digest(directory: Path = ENGINE_DIR) -> str:
    """sha256 over the Engine's Python sources (path and bytes of each, in path order)."""
    digest = hashlib.sha256()
    for path in sorted(directory.rglob("*.py")):
        digest.update(str(path.relative_to(directory)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


@functools.lru_cache(maxsize=8)
def _versions(plugin_version: str | None) -> tuple[str, ...]:
    import ade_sandbox
    from ade_core import __version__

    return (__version__, ade_sandbox.__version__, plugin_version or "", engine_code_digest())


def comparison_key(config_digest: str, plugin_version: str | None = None) -> str:
    """What the cached Base and reference numbers depend on: 𝓑, ADE, the sandbox, the task plugin, the Engine."""
    parts = (config_digest, *_versions(plugin_version))
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


# Config fields a shared reference's training does not read: the task's identity, the research budget and
# method, strategy limits, services only a strategy calls (the judge), Reward Design's probes, the Curriculum's
# inventory column, and the data order (settled by each task's SharedReference.data_order instead).
TASK_ONLY_FIELDS = (
    "task",
    "name",
    "budget",
    "research",
    "sandbox",
    "judge",
    "hacking",
    "replay",
    "data.base_pass_rate_samples",
    "training.grpo.shuffle_data",
    "training.grpo.shuffle_actor",
)


def shared_reference(config: ExperimentConfig, task: TaskHandle) -> SharedReference | None:
    """The reference ``task`` shares under ``config``, or None when it trains its own: a task whose reference
    leaves the data order to the Engine shares it only when the Engine shuffles the data (an in-order pool is
    not a random order)."""
    shared = task.spec.shared_reference
    recipe = config.training.grpo
    if shared is None or recipe is None:
        return None
    if shared.data_order == "engine" and not recipe.shuffle_data:
        return None
    return shared


def shared_digest(config: ExperimentConfig) -> Digest:
    """𝓑's digest without its task-only fields (``TASK_ONLY_FIELDS``): equal for two tasks' configs exactly
    when base model, pool, recipe, checkpoint rule, evaluation, resources and seeds match."""
    body = config.digest_body()
    for dotted in TASK_ONLY_FIELDS:
        *parents, leaf = dotted.split(".")
        section = body
        for key in parents:
            section = section.get(key) or {}
        section.pop(leaf, None)
    return sha256_digest(body)


def comparison_dir(loaded: LoadedConfig, registry: PluginRegistry | None = None) -> Path:
    """The cache directory of this config's Base evaluation and reference Trial: the task's own, or the
    shared reference's (named after it) when the task shares one under this config."""
    registry = registry or load_plugins()
    task = registry.task(loaded.experiment.task)
    shared = shared_reference(loaded.experiment, task)
    if shared is not None:
        return cache_root() / "comparisons" / f"{shared.name}-{comparison_key(shared_digest(loaded.experiment))}"
    return cache_root() / "comparisons" / comparison_key(loaded.experiment.digest(), task.owner.version)


def task_reference(loaded: LoadedConfig, task: TaskHandle) -> dict[str, Any] | None:
    """The cached reference Trial ``task`` compares with under this config — its own, or the shared one
    another task trained — or None when there is none to reuse. A shared one counts only while the task
    that trained it is installed at the recorded version with the same reference strategy."""
    directory = comparison_dir(loaded, task.registry) / "reference"
    path = directory / "summary.json"
    if not path.is_file():
        return None
    recorded = json.loads(path.read_text())
    try:
        producer = task.registry.task(recorded.get("reference_task", task.name))
        source = producer.reference_strategy().source
    except (UnknownTaskError, MissingHookError):
        return None
    mine, theirs = task.spec.shared_reference, producer.spec.shared_reference
    if producer.name != task.name and (mine is None or theirs is None or mine.name != theirs.name):
        return None
    if recorded.get("plugin_version") != producer.owner.version:
        return None
    return cached_reference(directory, source)


def admit_and_realize(
    loaded: LoadedConfig,
    source: str,
    registry: PluginRegistry | None = None,
    declared: Sequence[Mapping[str, Any]] = (),
    reference: bool = False,
    admission: AdmissionResult | None = None,
) -> tuple[AdmissionResult, Realization | None]:
    """Admission on the development inputs (unless ``admission`` is given), then (if admitted)
    realization on the frozen inputs, compared with the cached reference's when there is one."""
    registry = registry or load_plugins()
    config = loaded.experiment
    task = registry.task(config.task)
    isolation = loaded.operational.sandbox.min_isolation
    admission = admission or admit(
        source,
        task,
        config,
        min_isolation=isolation,
        probes=not reference,
        reference_rollouts=None if reference else cached_reference_rollouts(loaded, task),
        base_dir=loaded.base_dir,
    )
    if not admission.admitted:
        return admission, None
    realization = realize(
        source,
        task,
        config,
        base_dir=loaded.base_dir,
        declared=declared,
        min_isolation=isolation,
        reference_outputs=None if reference else cached_reference_outputs(loaded, task),
    )
    return admission, realization


def admission_only(loaded: LoadedConfig, source: str, registry: PluginRegistry | None = None) -> AdmissionResult:
    """The admission pipeline on the development inputs alone (no realization, no training)."""
    registry = registry or load_plugins()
    task = registry.task(loaded.experiment.task)
    return admit(
        source,
        task,
        loaded.experiment,
        min_isolation=loaded.operational.sandbox.min_isolation,
        reference_rollouts=cached_reference_rollouts(loaded, task),
        base_dir=loaded.base_dir,
    )


def needs_reference(task: TaskHandle) -> bool:
    """Whether an admission probe of ``task`` reads the generic reference Trial's records (replay)."""
    return any(probe.needs_reference for probe in task.admission_probes())


def cached_reference_rollouts(loaded: LoadedConfig, task: TaskHandle) -> list[dict[str, Any]] | None:
    """The cached reference Trial's recorded training rollouts (RFT), if it ran under this config."""
    if not needs_reference(task):
        return None
    from ade_core.engine.package import open_package

    summary = task_reference(loaded, task)
    if summary is None:
        return None
    package = open_package(Path(summary["package"]))
    if "training_rollouts" not in {r.name for r in package.manifest.records}:
        return None
    return package.records("training_rollouts")


def run_trial(
    loaded: LoadedConfig,
    source: str,
    out_dir: Path,
    *,
    registry: PluginRegistry | None = None,
    trial_id: str = "standalone",
    declared: Sequence[Mapping[str, Any]] = (),
    reference: bool = False,
    admission: AdmissionResult | None = None,
    log: Callable[[str], None] = lambda _: None,
) -> dict[str, Any]:
    """Run one Trial of ``source``; write admission.json, realization.json and the package under
    ``out_dir``; return a summary (status, scores, package path). ``admission`` skips a second
    admission run when the caller already admitted ``source``."""
    from ade_core.engine.job import EngineJob
    from ade_core.engine.package import open_package

    registry = registry or load_plugins()
    config = loaded.experiment
    task = registry.task(config.task)
    out_dir.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    if admission is None:
        log("admission: static check, sandbox run on development inputs, validation, probes")
    admission, realization = admit_and_realize(loaded, source, registry, declared, reference, admission)
    (out_dir / "admission.json").write_text(admission.model_dump_json(indent=2))
    summary: dict[str, Any] = {"strategy_digest": admission.strategy_digest, "admission": admission.model_dump()}
    if realization is None:
        return {**summary, "status": "inadmissible", "seconds": time.monotonic() - started}
    (out_dir / "realization.json").write_text(realization.model_dump_json(indent=2))
    log(f"realization: {realization.verdict} ({realization.seconds:.1f} s, isolation {realization.isolation})")
    command = bind(realization, task, source, config)
    attempt = f"{trial_id}-a1"
    executed = {
        "source": source,
        "strategy_digest": admission.strategy_digest,
        "admission": admission.model_dump(mode="json"),
        "realization": realization.model_dump(mode="json"),
    }
    job = EngineJob(
        trial_id=trial_id,
        attempt_id=attempt,
        command=command,
        config=config,
        base_dir=loaded.base_dir,
        generation=loaded.operational.generation,
        harness_records={"executed_strategy": [executed]},
    )
    (out_dir / "command.json").write_text(job.model_dump_json(indent=2))
    log("engine: training, online checkpoint selection, offline in-loop evaluation")
    package = _run_attempt(loaded, job, out_dir / attempt, reference=reference)
    manifest = open_package(package).manifest
    return {
        **summary,
        "status": manifest.status,
        "realization": {
            "verdict": realization.verdict,
            "reasons": list(realization.reasons),
            "duplicate_of_reference": realization.duplicate_of_reference,
        },
        "statistics": realization.statistics,
        "package": str(package),
        "selected_step": manifest.selected_step,
        "in_loop_scores": manifest.in_loop_scores,
        "metric_order": list(task.spec.metric_order),
        "seconds": time.monotonic() - started,
    }


def _executor(loaded: LoadedConfig) -> Executor:
    from ade_core.executors.factory import make_executor

    return make_executor(loaded.operational.executor, loaded.experiment.resources)


def _run_attempt(loaded: LoadedConfig, job: EngineJob, directory: Path, *, reference: bool) -> Path:
    """One attempt of ``job`` through the configured executor; its sealed package, or the Engine's typed error."""
    from ade_core.engine.model import EngineError, EngineInputMissing
    from ade_core.executors.factory import attempt_lease

    executor = _executor(loaded)
    request = attempt_request(job, directory, reference=reference, lease=attempt_lease(loaded.operational.executor))

    async def attempt() -> AttemptOutcome:
        try:
            return await run(executor, request)
        finally:
            await executor.close()

    outcome = asyncio.run(attempt())
    if outcome.package is not None:
        return outcome.package
    lines = [line for line in outcome.detail.splitlines() if line.strip()]
    said = lines[-1] if outcome.failure == "engine_error" and lines else outcome.detail[-1500:]
    problem = f"the Engine attempt failed ({outcome.failure}): {said} (logs: {directory})"
    raise (EngineInputMissing if outcome.exit_code == exit_codes.ENVIRONMENT else EngineError)(problem)


def reference_trial(
    loaded: LoadedConfig, *, registry: PluginRegistry | None = None, log: Callable[[str], None] = lambda _: None
) -> dict[str, Any]:
    """The generic reference's Trial under this config, run once per comparison key and cached."""
    registry = registry or load_plugins()
    task = registry.task(loaded.experiment.task)
    source = task.reference_strategy().source
    directory = comparison_dir(loaded, registry) / "reference"
    cached = task_reference(loaded, task)
    if cached is not None:
        return cached
    with computing(directory, log):
        cached = task_reference(loaded, task)  # another process may have trained it while this one waited
        if cached is not None:
            return cached
        return _train_reference(loaded, task, source, directory, registry, log)


def _train_reference(
    loaded: LoadedConfig,
    task: TaskHandle,
    source: str,
    directory: Path,
    registry: PluginRegistry,
    log: Callable[[str], None],
) -> dict[str, Any]:
    log(f"reference Trial (cached in {directory})")
    summary = run_trial(loaded, source, directory, registry=registry, trial_id="reference", reference=True, log=log)
    summary |= {"reference_task": task.name, "plugin_version": task.owner.version}
    if summary["status"] == "inadmissible":
        failed = "; ".join(
            f"{c['name']}: {c['reason']}" for c in summary["admission"]["checks"] if c["status"] == "failed"
        )
        raise ReferenceTrialError(f"the task's generic reference is inadmissible under this config: {failed}")
    if summary["in_loop_scores"] is None:  # a missing evaluation is an environment failure, not a result
        log(f"the reference's in-loop evaluation is missing; not cached ({missing_reason(summary)})")
        return summary
    _write_atomic(directory / "summary.json", summary)
    return summary


def base_evaluation(
    loaded: LoadedConfig, *, registry: PluginRegistry | None = None, log: Callable[[str], None] = lambda _: None
) -> dict[str, Any]:
    """The untrained Base model's in-loop scores under this config (the Engine's ``base-eval``, scored exactly
    as a Trial's selected checkpoint), evaluated once per comparison key and cached; a missing evaluation
    comes back with its reason and is never cached."""
    directory = comparison_dir(loaded, registry) / "base"
    cached = cached_base(loaded, registry)
    if cached is not None:
        return cached
    with computing(directory, log):
        cached = cached_base(loaded, registry)  # another process may have evaluated it while this one waited
        if cached is not None:
            return cached
        return _evaluate_base(loaded, directory, log)


def _evaluate_base(loaded: LoadedConfig, directory: Path, log: Callable[[str], None]) -> dict[str, Any]:
    from ade_core.harness.base_model import engine_base_evaluator
    from ade_core.schemas.trial import Unavailable

    log(f"Base: evaluating the untrained model (cached in {directory})")
    started = time.monotonic()
    executor = _executor(loaded)
    evaluate = engine_base_evaluator(
        executor, loaded.experiment, loaded.base_dir, directory, generation=loaded.operational.generation
    )

    async def evaluated() -> dict[str, float] | Unavailable:
        try:
            return await evaluate()
        finally:
            await executor.close()

    scores = asyncio.run(evaluated())
    seconds = time.monotonic() - started
    if isinstance(scores, Unavailable):
        log(f"the Base evaluation is missing; not cached ({scores.reason})")
        return {"in_loop_scores": None, "missing_reason": scores.reason, "seconds": seconds}
    summary = {"in_loop_scores": scores, "seconds": seconds}
    _write_atomic(directory / "summary.json", summary)
    return summary


def cached_base(loaded: LoadedConfig, registry: PluginRegistry | None = None) -> dict[str, Any] | None:
    path = comparison_dir(loaded, registry) / "base" / "summary.json"
    if not path.is_file():
        return None
    summary: dict[str, Any] = json.loads(path.read_text())
    return summary if summary.get("in_loop_scores") else None


def cached_comparison(loaded: LoadedConfig, registry: PluginRegistry | None = None) -> dict[str, Any]:
    """Base and reference summaries when cached for this config (None where not): never computes anything."""
    registry = registry or load_plugins()
    task = registry.task(loaded.experiment.task)
    return {"base": cached_base(loaded, registry), "reference": task_reference(loaded, task)}


@contextlib.contextmanager
def computing(directory: Path, log: Callable[[str], None] = lambda _: None) -> Iterator[None]:
    """Hold ``directory``'s lock (``<directory>.lock`` beside it) while its cached result is computed.

    Two commands that need the same uncached Base evaluation or reference Trial (two ``ade trial`` runs
    started together under one 𝓑, two test workers) would otherwise both train into the same directory;
    the second one waits here, then finds the first one's result in the cache. The lock is the kernel's
    (``flock``): it is released when its holder exits, however it exits."""
    directory.parent.mkdir(parents=True, exist_ok=True)
    with open(directory.parent / f"{directory.name}.lock", "a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log(f"waiting for another process that is computing {directory}")
            fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _write_atomic(path: Path, value: Any) -> None:
    """Write JSON through a private temporary file and a rename: readers never see half a file."""
    import tempfile

    path.parent.mkdir(parents=True, exist_ok=True)
    handle, staging = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    with os.fdopen(handle, "w") as out:
        out.write(json.dumps(value, indent=2, default=str))
    os.replace(staging, path)


def cached_reference(directory: Path, source: str) -> dict[str, Any] | None:
    """The cached reference Trial in ``directory``, if it was made from ``source``, its package is still
    there and it has in-loop scores (a summary whose evaluation is missing is never reused)."""
    path = directory / "summary.json"
    if not path.is_file():
        return None
    summary: dict[str, Any] = json.loads(path.read_text())
    package = summary.get("package")
    if summary.get("strategy_digest") != strategy_digest(source) or not summary.get("in_loop_scores"):
        return None
    return summary if package and Path(package).is_dir() else None


def cached_reference_outputs(loaded: LoadedConfig, task: TaskHandle) -> list[Any] | None:
    """The cached reference Trial's realized outputs on this config's frozen inputs, if this task trained it (a
    reference shared from another task realized another interface: there is nothing to compare)."""
    summary = task_reference(loaded, task)
    directory = comparison_dir(loaded, task.registry) / "reference"
    if summary is None or summary.get("reference_task") != task.name:
        return None
    if not (directory / "realization.json").is_file():
        return None
    return Realization.model_validate_json((directory / "realization.json").read_text()).canonical_outputs


def missing_reason(summary: Mapping[str, Any]) -> str:
    """Why a Trial summary has no in-loop scores: the checkpoints' recorded evaluation failures."""
    package = summary.get("package")
    if not package:
        return "no package"
    from ade_core.engine.package import open_package

    reasons = {c.missing_reason for c in open_package(Path(package)).manifest.checkpoints if c.missing_reason}
    return "; ".join(sorted(reasons)) or "the offline evaluation did not run"
