"""The dry run's executor: a simulated Engine behind the executor protocol (``ade run --dry-run``).

Every request kind is answered: an attempt (or the reference's) gets a real, sealed Experiment
Package whose scores are the task's metrics computed on a simulated correctness matrix drawn from
the bound command's digest, so different strategies and different configs score differently and
reproducibly, and every metric keeps its meaning; the base evaluation and held-out evaluations are
drawn the same way (held-out ones from the real held-out problems, so isolation is tested on real
data). Durations are virtual (the Harness's clock), failures can be injected per Trial, and nothing
here imports torch. Everything a dry run scores is simulated, and every surface that shows it says so.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Protocol

from ade_core import __version__
from ade_core.engine import data
from ade_core.engine.evaluation import metric_names, score_matrix
from ade_core.engine.heldout import macro_scores
from ade_core.engine.package import write_package
from ade_core.executors.base import (
    PACKAGE_KINDS,
    RETRYABLE_FAILURES,
    AttemptOutcome,
    EngineRequest,
    RequestState,
    Resources,
    Span,
    Submission,
)
from ade_core.executors.requests import scored_path
from ade_core.harness.ranking import MetricOrder
from ade_core.plugins import TaskHandle
from ade_core.schemas.config import ExperimentConfig
from ade_core.schemas.package import CheckpointScore


class Clock(Protocol):
    """The virtual clock the simulated Engine's durations pass on."""

    def now(self) -> float: ...

    def datetime(self) -> datetime: ...

    async def sleep_until(self, target: float, key: str) -> None: ...


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
    clock: Clock
    engine_seconds: float = 600.0
    failures: Mapping[str, Sequence[str]] = field(default_factory=dict)
    missing_evaluation: frozenset[str] = frozenset()
    slots: int | None = None
    fenced: set[str] = field(default_factory=set)
    started: list[str] = field(default_factory=list)
    spans: list[Span] = field(default_factory=list)
    kind: str = "simulated"
    _free: asyncio.Semaphore | None = field(default=None, init=False, repr=False)
    _states: dict[str, RequestState] = field(default_factory=dict, init=False, repr=False)
    _cancelled: set[str] = field(default_factory=set, init=False, repr=False)

    # --- the Executor protocol ---------------------------------------------------------------
    def submit(self, request: EngineRequest) -> Submission:
        self._states[request.request_id] = RequestState(request.request_id, "queued", request.kind)
        return Submission(request, asyncio.ensure_future(self._execute(request)))

    def poll(self, request_id: str) -> RequestState:
        return self._states.get(request_id, RequestState(request_id, "unknown"))

    def fence(self, request_id: str) -> None:
        self.fenced.add(request_id)

    def cancel(self, request_id: str) -> None:
        self._cancelled.add(request_id)

    def recover(self, request_id: str, directory: Path) -> bool:
        """A simulated Engine leaves no process behind a dead controller."""
        return False

    def capacity(self, resources: Resources) -> int:
        return self.slots or 1

    def timeline(self) -> list[Span]:
        return list(self.spans)

    async def close(self) -> None:
        return None

    # --- one request ---------------------------------------------------------------------------
    async def _execute(self, request: EngineRequest) -> AttemptOutcome:
        """Without ``slots`` every attempt starts at once and the caller paces its duration; with
        ``slots`` an attempt first waits (virtual time) for one of them and holds it while it runs.
        Base and held-out evaluations take no virtual time."""
        rid = request.request_id
        if request.kind not in PACKAGE_KINDS:
            outcome = self._evaluation(request)
        elif rid in self.fenced or rid in self._cancelled:
            outcome = self._failed(request, "fenced" if rid in self.fenced else "cancelled", self.clock.datetime(), 0.0)
        elif self.slots is None:
            outcome = self._attempt(request, self.clock.datetime())
        else:
            if self._free is None:
                self._free = asyncio.Semaphore(self.slots)
            queued, queued_at = self.clock.now(), self.clock.datetime()
            async with self._free:
                began = self.clock.now()
                self._states[rid] = RequestState(rid, "running", request.kind, {"host": "simulated", "slot": "0"})
                outcome = self._attempt(request, queued_at)
                ended = began + (outcome.ended_at - outcome.started_at).total_seconds()
                await self.clock.sleep_until(ended, rid)
            self.spans.append(Span(rid, request.kind, "0", queued, began, ended))
        self._states[rid] = RequestState(rid, "done", request.kind, dict(outcome.resources))
        return outcome

    def _failed(
        self, request: EngineRequest, failure: str, started: datetime, seconds: float, queued: datetime | None = None
    ) -> AttemptOutcome:
        """A failed (or, for ``fenced``, refused) simulated attempt that took ``seconds`` of virtual time."""
        return AttemptOutcome(
            attempt_id=request.request_id,
            status="fenced" if failure == "fenced" else "failed",
            package=None,
            failure=failure,
            retryable=failure in RETRYABLE_FAILURES,
            resources={"host": "simulated", "slot": "0"},
            detail=f"simulated {failure}",
            started_at=started,
            ended_at=started + timedelta(seconds=seconds),
            queued_at=queued or started,
            kind=request.kind,
        )

    def _evaluation(self, request: EngineRequest) -> AttemptOutcome:
        """The base model's in-loop scores, or a held-out evaluation written where the real Engine writes it."""
        job: Any = request.job
        if request.kind == "base_eval":
            result: dict[str, Any] = {"scores": simulated_base_scores(self.task, job.config), "missing_reason": None}
        elif request.kind == "heldout":
            request.directory.mkdir(parents=True, exist_ok=True)
            paths = []
            for index, item in enumerate(job.items):
                scored = simulated_heldout(item.job.config, item.job.base_dir, item.job.command.digest(), self.task)
                path = scored_path(request.directory, index)
                path.write_text(json.dumps(scored), encoding="utf-8")
                paths.append(str(path))
            result = {"scored": paths}
        else:
            raise ValueError(f"the simulated Engine does not answer {request.kind!r} requests")
        now = self.clock.datetime()
        return AttemptOutcome(
            attempt_id=request.request_id,
            status="succeeded",
            package=None,
            failure=None,
            retryable=False,
            resources={"host": "simulated", "slot": "0"},
            detail=f"simulated {request.kind}",
            started_at=now,
            ended_at=now,
            queued_at=now,
            kind=request.kind,
            result=result,
        )

    def _attempt(self, request: EngineRequest, queued_at: datetime) -> AttemptOutcome:
        job: Any = request.job
        self.started.append(job.attempt_id)
        digest = job.command.digest()
        seconds = self.engine_seconds * (0.75 + 0.5 * _unit(digest, "duration"))
        started = self.clock.datetime()
        match = _NUMBER.search(job.attempt_id)
        number = int(match.group(1)) if match else 1
        planned = list(self.failures.get(job.trial_id, ()))
        resources = {"host": "simulated", "slot": "0"}
        if number <= len(planned) and planned[number - 1]:
            return self._failed(request, planned[number - 1], started, seconds / 2, queued_at)
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
            kind=request.kind,
        )

    def _package(self, request: EngineRequest, digest: str) -> Path:
        job: Any = request.job
        metrics = self.task.metrics()
        order = MetricOrder(self.task.spec.metric_order, {n: m.higher_is_better for n, m in metrics.items()})
        in_loop, problems = job.config.evaluation.in_loop, in_loop_problems(job.config)
        pass_k = job.config.evaluation.pass_k
        ability = simulated_ability(digest)
        steps, drifts = (10, 20, 30), (-0.4, 0.0, -0.15)  # the middle checkpoint tends to be the best
        online = [
            _rounded(
                score_matrix(
                    correctness_matrix(f"{digest}:online:{s}", ability + d, problems, in_loop.k_online),
                    metrics,
                    pass_k,
                )
            )
            for s, d in zip(steps, drifts, strict=True)
        ]
        chosen = max(range(len(steps)), key=lambda i: (order.key(online[i]), -i))  # online selection, earliest tie
        offline = correctness_matrix(f"{digest}:offline", ability + drifts[chosen], problems, in_loop.k_offline)
        scores = _rounded(score_matrix(offline, metrics, pass_k))
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
            "selected_checkpoint": str(request.directory / f"checkpoint-{steps[chosen]}"),
            "in_loop_scores": None if missing else scores,
            "versions": {"ade-core": __version__, "engine": "simulated"},
            "timings": {"train": 0.0},
        }
        return write_package(request.directory, fields, records, self.task.package_schema().records)


def simulated_base_scores(task: TaskHandle, config: ExperimentConfig) -> dict[str, float]:
    """Simulated in-loop scores of the untrained base model (its ability drawn from 𝓑's digest)."""
    key = f"{config.digest()}:base"
    matrix = correctness_matrix(
        key, simulated_ability(key, trained=False), in_loop_problems(config), config.evaluation.in_loop.k_offline
    )
    return _rounded(score_matrix(matrix, task.metrics(), config.evaluation.pass_k))


def simulated_heldout(config: ExperimentConfig, base_dir: str, command_digest: str, task: TaskHandle) -> dict[str, Any]:
    """A deterministic stand-in for the Engine's held-out evaluation of the command ``command_digest`` trained.

    It reads every held-out problem (so isolation tests run on real held-out data) and draws each
    sample's correctness from the command's simulated ability, the problem and the benchmark, then
    scores the matrix with the task's metrics.
    """
    metrics = task.metrics()
    ability = simulated_ability(command_digest)
    benchmarks: dict[str, Any] = {}
    for bench in config.evaluation.held_out:
        rows = data.benchmark_rows(data.resolve_path(Path(base_dir), bench.source))[: bench.limit]
        problems = [f"{bench.name}:{row['problem']}" for row in rows]
        matrix = correctness_matrix(
            f"{command_digest}:{bench.name}", ability, problems, bench.k, shift=heldout_shift(bench.name)
        )
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
            "scores": score_matrix(matrix, metrics, config.evaluation.pass_k) if matrix else None,
            "missing_reason": None if matrix else "the benchmark has no problems",
            "responses": responses,
        }
    return {"benchmarks": benchmarks, "macro_avg": macro_scores(benchmarks, metric_names(metrics, config))}
