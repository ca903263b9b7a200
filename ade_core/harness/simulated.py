"""Dry run: a simulated Engine and strategy gate on a virtual clock (``ade run --dry-run``).

- ``VirtualClock`` + ``VirtualEventLoop``: asyncio runs on virtual seconds. When every task
  waits, the loop jumps to the earliest waiter; waiters due at the same reading wake in key
  order. A dry run of hours of simulated research takes well under a second, and concurrent
  Coordinators interleave in the same order every time.
- ``SimulatedExecutor``: writes a real, sealed Experiment Package whose scores are the task's
  metrics computed on a simulated correctness matrix drawn from the bound command's digest, so
  different strategies and different configs score differently and reproducibly, and every
  metric keeps its meaning; durations are virtual; failures can be injected per Trial.
  Everything a dry run scores is simulated, and every surface that shows it says so.
- ``DryRunGate``: the real static pre-check of a strategy, then a simulated sandbox run and
  realization (the real realization needs the task's frozen inputs and, for the tiny world,
  torch). Nothing here imports torch.
"""

from __future__ import annotations

import asyncio
import hashlib
import heapq
import itertools
import math
import re
import selectors
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from ade_core import __version__
from ade_core.engine.package import write_package
from ade_core.errors import MissingHookError
from ade_core.executors.base import RETRYABLE_FAILURES, AttemptOutcome, AttemptRequest
from ade_core.harness.admission import AdmissionResult, CallRecord, Check, Realization, strategy_digest
from ade_core.harness.ranking import MetricOrder
from ade_core.harness.static_policy import check_strategy_source
from ade_core.plugins import TaskHandle
from ade_core.realization import check_claims
from ade_core.schemas.artifact import BoundCommand, Intervention, ResourceRequest
from ade_core.schemas.config import ExperimentConfig
from ade_core.schemas.package import CheckpointScore
from ade_core.schemas.trial import Unavailable
from ade_core.specs import MetricSpec

EPOCH = datetime(2000, 1, 1, tzinfo=UTC)


class VirtualDeadlock(RuntimeError):
    """Every task waits for something that no clock reading can bring."""


class VirtualClock:
    """Virtual seconds; a wait ends at its target reading, ties in key order."""

    def __init__(self, start: float = 0.0):
        self._now = start
        self._waiters: list[tuple[float, str, int, asyncio.Future[None]]] = []
        self._seq = itertools.count()

    def now(self) -> float:
        return self._now

    def datetime(self) -> datetime:
        return EPOCH + timedelta(seconds=self._now)

    async def sleep_until(self, target: float, key: str) -> None:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._waiters, (max(target, self._now), key, next(self._seq), future))
        await future

    async def pace(self, key: str, anchor: float, seconds: float) -> None:
        await self.sleep_until(anchor + seconds, key)

    async def checkpoint(self, key: str) -> None:
        await self.sleep_until(self._now, key)

    def wake_next(self, limit: float | None) -> bool:
        """Wake the earliest waiter due by ``limit`` (None: any); False when there is none."""
        while self._waiters and self._waiters[0][3].done():  # cancelled waits
            heapq.heappop(self._waiters)
        if not self._waiters or (limit is not None and self._waiters[0][0] > limit):
            return False
        target, _, _, future = heapq.heappop(self._waiters)
        self._now = max(self._now, target)
        future.set_result(None)
        return True

    def advance(self, seconds: float) -> None:
        self._now += seconds


class _VirtualSelector(selectors.DefaultSelector):
    """Never sleeps: when the loop is idle, time jumps to the next virtual waiter or timer."""

    def __init__(self, clock: VirtualClock):
        super().__init__()
        self._clock = clock

    def select(self, timeout: float | None = None):
        ready = super().select(0)
        if ready or timeout == 0:
            return ready
        limit = None if timeout is None else self._clock.now() + timeout
        if self._clock.wake_next(limit):
            return []
        if timeout is None:
            raise VirtualDeadlock("every task is waiting and nothing is scheduled on the virtual clock")
        self._clock.advance(timeout)
        return []


class VirtualEventLoop(asyncio.SelectorEventLoop):
    """An event loop whose ``time()`` is the virtual clock (asyncio timers run on it too)."""

    def __init__(self, clock: VirtualClock):
        super().__init__(_VirtualSelector(clock))
        self.clock = clock

    def time(self) -> float:
        return self.clock.now()


def run_virtual(main: Any, clock: VirtualClock) -> Any:
    """Run the coroutine ``main`` to completion on a fresh virtual event loop."""
    with asyncio.Runner(loop_factory=lambda: VirtualEventLoop(clock)) as runner:
        return runner.run(main)


# -- scores ------------------------------------------------------------------------------------
#
# A simulated evaluation is a correctness matrix (problem x sample) scored by the task's own metric
# definitions, as the Engine scores a real one, so every relation the definitions imply holds
# (Average@K <= Pass@K, whatever the task's metric order). The matrix comes from a one-parameter
# item-response model: a problem of difficulty b is solved by a model of ability a with probability
# sigmoid(a - b). Abilities are drawn from the bound command's digest (the untrained base model's
# from 𝓑's), which covers the intervention, 𝓑's digest and the seeds: two configs that differ in any
# value give different numbers.

SIMULATED_PROBLEMS = 48  # in-loop problems of a simulated evaluation
_TRAINED = (-2.0, 0.0)  # ability range (logit scale) of a trained checkpoint
_BASE = (-3.5, -2.5)  # of the untrained base model
_DIFFICULTY = 3.0  # problem difficulties lie in [-3, 3)


def _unit(text: str, salt: str) -> float:
    return int(hashlib.sha256(f"{salt}:{text}".encode()).hexdigest()[:12], 16) / float(16**12)


def simulated_ability(key: str, trained: bool = True) -> float:
    """A simulated model's ability on the logit scale, drawn from ``key`` (a digest)."""
    low, high = _TRAINED if trained else _BASE
    return low + (high - low) * _unit(key, "ability")


def correctness_matrix(
    key: str, ability: float, problems: Sequence[str], k: int, shift: float = 0.0
) -> list[list[bool]]:
    """K samples per problem: sample j of problem p is correct when its draw falls below sigmoid(ability - b_p).

    A problem's difficulty b_p depends on the problem alone (every model meets the same problems);
    ``shift`` makes a whole benchmark harder (> 0) or easier.
    """
    matrix = []
    for problem in problems:
        difficulty = _DIFFICULTY * (2 * _unit(problem, "difficulty") - 1) + shift
        chance = 1 / (1 + math.exp(difficulty - ability))
        matrix.append([_unit(f"{key}:{problem}:{j}", "sample") < chance for j in range(k)])
    return matrix


def score_matrix(matrix: Sequence[Sequence[bool]], metrics: Mapping[str, MetricSpec]) -> dict[str, float]:
    """Every metric's value on ``matrix``, computed by the metric's own definition (as the Engine does)."""
    rows = [list(row) for row in matrix]
    return {name: metric.compute(rows) for name, metric in metrics.items()}


def _rounded(scores: Mapping[str, float]) -> dict[str, float]:
    """In-loop scores as a simulated package records them: 4 decimals (held-out scores stay unrounded)."""
    return {name: round(value, 4) for name, value in scores.items()}


def heldout_shift(benchmark: str) -> float:
    """How much harder (in logits, 0 to 1) a held-out benchmark is than the in-loop one, by its name."""
    return _unit(benchmark, "heldout")


def in_loop_problems(config: ExperimentConfig) -> list[str]:
    """The simulated in-loop benchmark's problem ids."""
    in_loop = config.evaluation.in_loop
    count = min(SIMULATED_PROBLEMS, in_loop.limit or SIMULATED_PROBLEMS)
    return [f"{in_loop.name}/{i}" for i in range(count)]


# -- executor ----------------------------------------------------------------------------------

_NUMBER = re.compile(r"/a(\d+)(?:\.r\d+)?$")


@dataclass
class SimulatedExecutor:
    """A simulated Engine behind the executor interface: real packages, virtual durations.

    ``failures`` maps a Trial id to the failure of each counted attempt in order (the attempt
    number is read from the Harness's attempt id ``<trial>/a<m>``); ``missing_evaluation`` lists
    Trials whose offline evaluation does not finish.
    """

    task: TaskHandle
    clock: VirtualClock
    engine_seconds: float = 600.0
    failures: Mapping[str, Sequence[str]] = field(default_factory=dict)
    missing_evaluation: frozenset[str] = frozenset()
    slots: int | None = None
    fenced: set[str] = field(default_factory=set)
    started: list[str] = field(default_factory=list)
    spans: list[tuple[str, float, float, float]] = field(default_factory=list)  # (attempt, queued, began, ended)
    _free: asyncio.Semaphore | None = field(default=None, init=False, repr=False)

    async def run(self, request: AttemptRequest) -> AttemptOutcome:
        """Without ``slots`` every attempt starts at once and the caller paces its duration; with
        ``slots`` an attempt first waits (virtual time) for one of them and holds it while it runs."""
        if self.slots is None:
            return self._attempt(request, self.clock.datetime())
        if self._free is None:
            self._free = asyncio.Semaphore(self.slots)
        queued, queued_at = self.clock.now(), self.clock.datetime()
        async with self._free:
            began = self.clock.now()
            outcome = self._attempt(request, queued_at)
            ended = began + (outcome.ended_at - outcome.started_at).total_seconds()
            await self.clock.sleep_until(ended, request.job.attempt_id)
        self.spans.append((request.job.attempt_id, queued, began, ended))
        return outcome

    def _attempt(self, request: AttemptRequest, queued_at: datetime) -> AttemptOutcome:
        job = request.job
        self.started.append(job.attempt_id)
        digest = job.command.digest()
        seconds = self.engine_seconds * (0.75 + 0.5 * _unit(digest, "duration"))
        started = self.clock.datetime()
        match = _NUMBER.search(job.attempt_id)
        number = int(match.group(1)) if match else 1
        planned = list(self.failures.get(job.trial_id, ()))
        resources = {"host": "simulated", "slot": "0"}
        if number <= len(planned) and planned[number - 1]:
            failure = planned[number - 1]
            return AttemptOutcome(
                attempt_id=job.attempt_id,
                status="failed",
                package=None,
                failure=failure,
                retryable=failure in RETRYABLE_FAILURES,
                resources=resources,
                detail=f"simulated {failure}",
                started_at=started,
                ended_at=started + timedelta(seconds=seconds / 2),
                queued_at=queued_at,
            )
        package = self._package(request, digest)
        return AttemptOutcome(
            attempt_id=job.attempt_id,
            status="succeeded",
            package=package,
            failure=None,
            retryable=False,
            resources=resources,
            detail="simulated Engine",
            started_at=started,
            ended_at=started + timedelta(seconds=seconds),
            queued_at=queued_at,
        )

    def _package(self, request: AttemptRequest, digest: str) -> Path:
        job = request.job
        metrics = self.task.metrics()
        order = MetricOrder(self.task.spec.metric_order, {n: m.higher_is_better for n, m in metrics.items()})
        in_loop, problems = job.config.evaluation.in_loop, in_loop_problems(job.config)
        ability = simulated_ability(digest)
        steps, drifts = (10, 20, 30), (-0.4, 0.0, -0.15)  # the middle checkpoint tends to be the best
        online = [
            _rounded(
                score_matrix(
                    correctness_matrix(f"{digest}:online:{s}", ability + d, problems, in_loop.k_online), metrics
                )
            )
            for s, d in zip(steps, drifts, strict=True)
        ]
        chosen = max(range(len(steps)), key=lambda i: (order.key(online[i]), -i))  # online selection, earliest tie
        offline = correctness_matrix(f"{digest}:offline", ability + drifts[chosen], problems, in_loop.k_offline)
        scores = _rounded(score_matrix(offline, metrics))
        missing = job.trial_id in self.missing_evaluation
        records: dict[str, list[dict[str, Any]]] = {
            "checkpoint_scores": [
                {"step": s, "scores": o, "missing_reason": None, "selected": i == chosen}
                for i, (s, o) in enumerate(zip(steps, online, strict=True))
            ],
            "training_log": [{"step": s, "loss": round(2.0 / (1 + s / 10), 4)} for s in steps],
        }
        records["eval_responses"] = [
            {"problem_id": f"p{i}", "sample": j, "correct": correct, "response": f"simulated response {i}.{j}"}
            for i, row in enumerate(offline[:4])
            for j, correct in enumerate(row)
        ]
        if self.task.spec.paradigm == "sft":
            records["selected_examples"] = [
                {"trajectory_id": f"t{i}", "tokens": 40 + i, "truncated": _unit(f"{digest}:{i}", "cap") < 0.2}
                for i in range(6)
            ]
        else:
            records["training_rollouts"] = [
                {"prompt_group_id": f"{i // 4}/0", "outcome": _unit(f"{digest}:{i}", "roll") < 0.5, "reward": 0.0}
                for i in range(8)
            ]
        declared = {spec.name for spec in self.task.package_schema().records}
        records = {k: v for k, v in {**records, **job.harness_records}.items() if k in declared}
        fields = {
            "trial_id": job.trial_id,
            "attempt_id": job.attempt_id,
            "task": job.config.task,
            "status": "evaluation_missing" if missing else "completed",
            "command_digest": digest,
            "config_digest": job.command.config_digest,
            "strategy_digest": job.command.strategy_digest,
            "checkpoints": tuple(CheckpointScore(step=s, scores=o) for s, o in zip(steps, online, strict=True)),
            "selected_step": steps[chosen],
            "selected_checkpoint": str(request.attempt_dir / f"checkpoint-{steps[chosen]}"),
            "in_loop_scores": None if missing else scores,
            "versions": {"ade-core": __version__, "engine": "simulated"},
            "timings": {"train": 0.0},
        }
        return write_package(request.attempt_dir, fields, records, self.task.package_schema().records)

    def fence(self, attempt_id: str) -> None:
        self.fenced.add(attempt_id)

    async def close(self) -> None:
        return None


def base_evaluator(task: TaskHandle, config: ExperimentConfig):
    """Simulated in-loop scores of the untrained base model (its ability drawn from 𝓑's digest)."""

    async def evaluate() -> dict[str, float] | Unavailable:
        key = f"{config.digest()}:base"
        matrix = correctness_matrix(
            key, simulated_ability(key, trained=False), in_loop_problems(config), config.evaluation.in_loop.k_offline
        )
        return _rounded(score_matrix(matrix, task.metrics()))

    return evaluate


# -- gate --------------------------------------------------------------------------------------


class DryRunGate:
    """The real static pre-check; the sandbox run, validation, probes and realization are simulated."""

    def __init__(self, task: TaskHandle, config: ExperimentConfig):
        self.task, self.config = task, config

    def frozen_inputs(self) -> None:
        return None  # reading them would load the target's tokenizer: the dry-run controller stays Engine-free

    async def admit(
        self,
        source: str,
        *,
        reference: bool = False,
        reference_rollouts: Sequence[Mapping[str, Any]] | None = None,
    ) -> AdmissionResult:
        violations = check_strategy_source(source, self.task.interface())
        skipped = "dry run: the sandbox run is simulated"
        later = [Check(name=n, status="skipped", reason=skipped) for n in ("sandbox_run", "output_validation")]
        static = Check(
            name="static_check", status="failed" if violations else "passed", reason="; ".join(map(str, violations))
        )
        calls: tuple[CallRecord, ...] = ()
        if not violations:  # what a development check shows of the (simulated) run on the development inputs
            statistics = {"simulated": 1, "source_lines": len(source.splitlines())}
            calls = (
                CallRecord(
                    entry_point=self.task.interface().entry_points[0].name,
                    status="ok",
                    canonical={"simulated_output": strategy_digest(source)},
                    statistics=statistics,
                ),
            )
        return AdmissionResult(
            task=self.task.name,
            strategy_digest=strategy_digest(source),
            admitted=not violations,
            checks=(static, *later),
            calls=calls,
            isolation="none (dry run)",
        )

    async def realize(
        self, source: str, declared: Sequence[Mapping[str, Any]], reference_outputs: Sequence[Any] | None = None
    ) -> Realization:
        digest = strategy_digest(source)
        statistics = {"simulated": 1}
        verdict = check_claims(statistics, declared, ())
        call = CallRecord(
            entry_point=self.task.interface().entry_points[0].name,
            status="ok",
            canonical={"simulated_realization": digest},
            statistics=statistics,
        )
        return Realization(
            task=self.task.name,
            strategy_digest=digest,
            config_digest=self.config.digest(),
            inputs="dry run: simulated realization",
            calls=(call,),
            isolation="none (dry run)",
            verdict=verdict.status,
            reasons=verdict.reasons,
            duplicate_of_reference=None if reference_outputs is None else [call.canonical] == list(reference_outputs),
            seconds=0.0,
        )

    def bind(self, realization: Realization, source: str) -> BoundCommand:
        kinds = self.task.intervention_kinds()
        if not kinds:
            raise MissingHookError(
                f"no installed plugin registers an intervention kind the {self.task.spec.paradigm} task "
                f"{self.task.name!r} may bind to; declare one with the hook ade_intervention_kinds"
            )
        kind = kinds[0].name
        return BoundCommand(
            task=self.task.name,
            strategy_digest=realization.strategy_digest,
            intervention=Intervention(
                kind=kind,
                payload={"simulated_realization": realization.strategy_digest},
                summary=f"dry run: simulated {kind} of {realization.strategy_digest[:19]}",
            ),
            config_digest=self.config.digest(),
            seeds={"training": self.config.seeds.training, "evaluation": self.config.seeds.evaluation},
            resources=ResourceRequest(device=self.config.resources.device),
        )
