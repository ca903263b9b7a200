"""Dry run: a simulated Engine and strategy gate on a virtual clock (``ade run --dry-run``).

- ``VirtualClock`` + ``VirtualEventLoop``: asyncio runs on virtual seconds. When every task
  waits, the loop jumps to the earliest waiter; waiters due at the same reading wake in key
  order. A dry run of hours of simulated research takes well under a second, and concurrent
  Coordinators interleave in the same order every time.
- The simulated Engine is an executor (``ade_core.executors.simulated``): the Harness reaches it
  through the executor protocol like any other.
- ``DryRunGate``: the real static pre-check of a strategy, then a simulated sandbox run and
  realization (the real realization needs the task's frozen inputs and, for the tiny world,
  torch). Nothing here imports torch.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import selectors
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from ade_core.errors import MissingHookError
from ade_core.harness.admission import AdmissionResult, CallRecord, Check, Realization, strategy_digest
from ade_core.harness.static_policy import check_strategy_source
from ade_core.plugins import TaskHandle
from ade_core.realization import check_claims
from ade_core.schemas.artifact import BoundCommand, Intervention, ResourceRequest
from ade_core.schemas.config import ExperimentConfig

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
