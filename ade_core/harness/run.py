"""The run controller (paper Algorithm C.11): init, bootstrap, search with C Coordinators, completion,
final selection — and resume, which is the same code started on an existing store.

One controller process owns a run. Coordinators are asyncio tasks that advance their own Plans
(Trials serial within a Plan); the single Run-Memory writer is another task. Planning admission
and Run-Memory publication are serialized; everything else may overlap.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from pydantic import Field

from ade_core.config import LoadedConfig
from ade_core.engine.package import open_package
from ade_core.errors import AdeError
from ade_core.harness.clock import WallClock
from ade_core.harness.core import AgentFailed, Harness, interface_digest
from ade_core.harness.memory import publish_plan_memory, run_memory_writer
from ade_core.harness.methods import method_policy
from ade_core.harness.operator import ledger, operator_state
from ade_core.harness.plans import admit_reference_plan, propose_plan
from ade_core.harness.preflight import check_run, check_task_complete
from ade_core.harness.roles import RoleBackend
from ade_core.harness.snapshot import REFERENCE_PLAN, Snapshot, planned_trials
from ade_core.harness.trials import TrialRunner
from ade_core.plugins import PluginRegistry, load_plugins
from ade_core.schemas.common import Model
from ade_core.schemas.config import ExperimentConfig, OperationalSettings
from ade_core.schemas.memory import RunMemory
from ade_core.schemas.plan import Plan
from ade_core.schemas.run import FinalSelection, RunRecord
from ade_core.schemas.trial import PackageRef, Trial, Unavailable
from ade_core.specs import ROLES
from ade_core.store import RunStore

RUN_FILE = "run.json"  # operational settings of the run directory (not research state)


class SimulationSettings(Model):
    """How the dry run's simulated Engine and agents behave (not part of 𝓑)."""

    engine_seconds: float = Field(default=600.0, gt=0, description="Virtual seconds of one Engine attempt (±25%).")
    latency: dict[str, float] = Field(default_factory=dict, description="Virtual seconds per role call, by role.")
    failures: dict[str, tuple[str, ...]] = Field(
        default_factory=dict, description="Trial id -> the failure of each counted attempt, in order."
    )
    missing_evaluation: tuple[str, ...] = Field(default=(), description="Trials whose offline evaluation is missing.")
    engine_slots: int | None = Field(
        default=None, ge=1, description="Simulated executor slots (None: every attempt starts at once)."
    )


class RunSettings(Model):
    """``<run_dir>/run.json``: what a resume needs besides the store."""

    base_dir: str = Field(description="Directory the config's relative paths resolve against.")
    dry_run: bool = Field(description="Simulated Engine and strategy gate.")
    operational: OperationalSettings = Field(description="Operational settings (may change between resumes).")
    simulation: SimulationSettings = Field(default_factory=SimulationSettings, description="Dry-run behaviour.")


def run_id_of(config: ExperimentConfig) -> str:
    return f"{config.name}-{config.digest().split(':')[1][:8]}"


def init_run(
    run_dir: Path | str,
    loaded: LoadedConfig,
    *,
    dry_run: bool,
    simulation: SimulationSettings | None = None,
    registry: PluginRegistry | None = None,
) -> Path:
    """Create the run: freeze 𝓑 and 𝓩 (objects + digests in the run record) and publish Run Memory v0.

    Everything the Run will need is checked first (``preflight.check_run``), so a Run that cannot
    start leaves no directory behind.
    """
    registry = registry or load_plugins()
    config = loaded.experiment
    task = registry.task(config.task)
    interface = task.interface()
    check_run(loaded, task, dry_run=dry_run)
    run_dir = Path(run_dir)
    with RunStore.open(run_dir) as store:
        if store.get("run", "run") is not None:
            raise AdeError(f"{run_dir} already holds a run; continue it with `ade resume {run_dir}`")
        config_object = store.objects.put_json(config.model_dump(mode="json"))
        store.objects.put_json(interface.model_dump(mode="json"))
        record = RunRecord(
            run_id=run_id_of(config),
            task=task.name,
            dry_run=dry_run,
            config_digest=config.digest(),
            config_object=config_object,
            interface_digest=interface_digest(interface),
            phase="initialized",
        )
        with store.transition("run_initialized", actor="harness", subject="run", payload={"vt": 0.0}) as tx:
            tx.put("run", "run", record)
            tx.put(
                "run_memory",
                "v0",
                RunMemory(
                    version=0, parent=None, revision=tx.revision, source_trials=(), source_digests=(), findings=()
                ),
            )
    settings = RunSettings(
        base_dir=loaded.base_dir,
        dry_run=dry_run,
        operational=loaded.operational,
        simulation=simulation or SimulationSettings(),
    )
    (run_dir / RUN_FILE).write_text(settings.model_dump_json(indent=2), encoding="utf-8")
    return run_dir


def read_settings(run_dir: Path) -> RunSettings:
    path = run_dir / RUN_FILE
    if not path.is_file():
        raise AdeError(f"{run_dir} is not an ADE run directory (no {RUN_FILE}); start one with `ade run CONFIG`")
    return RunSettings.model_validate(json.loads(path.read_text(encoding="utf-8")))


def frozen_config(store: RunStore, record: RunRecord) -> ExperimentConfig:
    """The run's frozen 𝓑, read back from the object store and checked against its recorded digest."""
    config = ExperimentConfig.model_validate(store.objects.read_json(record.config_object))
    if config.digest() != record.config_digest:
        raise AdeError(
            f"the stored config of run {record.run_id} has digest {config.digest()}, not the frozen "
            f"{record.config_digest}; the run directory is damaged"
        )
    return config


def last_clock_reading(store: RunStore) -> float:
    """The clock reading of the last commit that recorded one (a resumed dry run continues from it)."""
    for event in reversed(store.events()):
        reading = event.payload.get("vt", event.payload.get("details", {}).get("vt"))
        if reading is not None:
            return float(reading)
    return 0.0


def open_harness(
    store: RunStore,
    *,
    backend: RoleBackend | None = None,
    registry: PluginRegistry | None = None,
    executor: Any = None,
    clock: Any = None,
) -> Harness:
    """A Harness for the run in ``store`` with the frozen config read back from the object store."""
    from ade_core.agents import make_backend
    from ade_core.executors.factory import Simulation, attempt_lease, make_executor
    from ade_core.harness import simulated
    from ade_core.harness.base_model import engine_base_evaluator

    registry = registry or load_plugins()
    settings = read_settings(store.run_dir)
    record = store.get_model("run", "run")
    if record is None:
        raise AdeError(f"{store.run_dir} holds no initialized run")
    config = frozen_config(store, record)
    task = registry.task(config.task)
    check_task_complete(task, dry_run=settings.dry_run)  # the plugin may have changed since the run started
    one_session = method_policy(config).one_session
    executor_settings = settings.operational.executor
    if settings.dry_run:
        clock = clock or simulated.VirtualClock(last_clock_reading(store))
        sim = settings.simulation
        scripted = Simulation(
            task,
            clock,
            engine_seconds=sim.engine_seconds,
            failures=sim.failures,
            missing_evaluation=frozenset(sim.missing_evaluation),
            slots=sim.engine_slots,
        )
        executor = executor or make_executor(executor_settings, config.resources, simulation=scripted)
        gate: Any = simulated.DryRunGate(task, config)
        backend = backend or make_backend(
            settings.operational, task, latency=sim.latency, virtual_time=True, one_session=one_session
        )
    else:
        from ade_core.harness.gate import PipelineGate

        clock = clock or WallClock()
        executor = executor or make_executor(executor_settings, config.resources)
        gate = PipelineGate(task, config, settings.base_dir, settings.operational.sandbox.min_isolation)
        latency = {role: 0.0 for role in ROLES}  # real time is measured, not scripted
        backend = backend or make_backend(settings.operational, task, latency=latency, one_session=one_session)
    evaluator = engine_base_evaluator(
        executor, config, settings.base_dir, store.run_dir, generation=settings.operational.generation
    )
    return Harness(
        store=store,
        config=config,
        base_dir=settings.base_dir,
        task=task,
        clock=clock,
        backend=backend,
        executor=executor,
        gate=gate,
        base_evaluator=evaluator,
        on_exhausted=settings.operational.recovery.on_exhausted,
        generation=settings.operational.generation,
        lease=attempt_lease(executor_settings),
    )


class RunController:
    """Drives one run from wherever its store stands to completion, a pause, or cancellation."""

    def __init__(self, h: Harness):
        self.h = h
        self.search_done = False

    def state(self) -> str:
        return operator_state(self.h.store)

    def halted(self) -> bool:
        return self.state() in ("paused", "cancelled") or self.h.record.phase == "suspended"

    def unsuspend(self) -> bool:
        """Continue a suspended Run once the operator resumed it; False while it stays suspended."""
        h = self.h
        suspension = h.record.suspended
        if suspension is None:
            return True
        if not any(e.action == "resume" and e.sequence > suspension.ledger_at for e in ledger(h.store)):
            return False
        grants = {**h.record.recovery_grants, suspension.trial_id: suspension.failures}
        with h.transition("run_unsuspended", "run", {"trial": suspension.trial_id}) as tx:
            h.update_record(tx, phase=suspension.phase_before, suspended=None, recovery_grants=grants)
        return True

    async def drive(self) -> str:
        """Run until the run completes, is paused or cancelled; returns the phase (or ``paused``)."""
        h = self.h
        if h.record.phase in ("completed", "cancelled"):
            return h.record.phase
        if not self.unsuspend():
            return "suspended"
        writer = asyncio.create_task(run_memory_writer(h, lambda: self.search_done, self.halted))
        try:
            if h.record.phase in ("initialized", "bootstrap"):
                await self.bootstrap()
            if h.record.phase == "search" and not self.halted():
                budget = h.config.budget
                await asyncio.gather(*(self.coordinator(c) for c in range(1, budget.coordinators + 1)))
        finally:
            self.search_done = True
            h.notify()
            await writer
        if self.state() == "cancelled":
            with h.transition("run_cancelled", "run") as tx:
                h.update_record(tx, phase="cancelled")
            return "cancelled"
        if self.state() == "paused":
            return "paused"
        if h.record.phase == "suspended":
            return "suspended"
        self.final_selection()
        return h.record.phase

    async def bootstrap(self) -> None:
        """Base-model evaluation, then the generic reference Trial P000 (paper App. D.3)."""
        h, key = self.h, REFERENCE_PLAN
        await h.clock.checkpoint(key)
        if h.record.phase == "initialized":
            with h.transition("bootstrap_started", "run") as tx:
                h.update_record(tx, phase="bootstrap")
        if h.record.base_model is None:
            scores = (
                await h.base_evaluator()
                if h.base_evaluator
                else Unavailable(reason="this controller was given no base-model evaluator")
            )
            with h.transition("base_model_evaluated", "run") as tx:
                h.update_record(tx, base_model=scores)
        plan = admit_reference_plan(h)
        if await self.run_plan(plan, key) and self.state() != "cancelled":
            with h.transition("search_started", "run") as tx:
                h.update_record(tx, phase="search")

    async def coordinator(self, number: int) -> None:
        """Coordinator ``number``: up to B_P Plans, each run to completion before the next."""
        h, key = self.h, f"C{number}"
        await h.clock.checkpoint(key)
        for slot in range(1, h.config.budget.plans_per_coordinator + 1):
            plan = h.store.get_model("plan", f"C{number}/P{slot}")
            if plan is None:
                if self.state() != "running" or self.halted():
                    return
                try:
                    plan = await propose_plan(h, number, slot)
                except AgentFailed as exc:  # the slot is consumed (paper App. D.4)
                    why = str(exc) + (f" (last error: {exc.operator_detail})" if exc.operator_detail else "")
                    h.store.record_operation("plan_slot_unfilled", subject=f"C{number}/P{slot}", details={"why": why})
                    continue
            if not await self.run_plan(plan, key):
                return

    async def run_plan(self, plan: Plan, key: str) -> bool:
        """The Plan's Trials in order, then wait until their memory updates are published; False if halted."""
        h = self.h
        runner = TrialRunner(h, key)
        for index in range(1, planned_trials(plan, h.config.budget.trials_per_plan) + 1):
            trial = h.store.get_model("trial", f"{plan.plan_id}/T{index}")
            if trial is None:
                state = self.state()
                # finish: no further Trials, but an admitted Plan (in-flight work) gets its first one
                if self.halted() or (state == "finishing" and index > 1):
                    break
                trial = runner.create(plan, index)
            if await self.run_trial(runner, trial, key) is None:
                return False

        def done() -> bool:
            snap = Snapshot.read(h.store)
            return self.halted() or all(snap.trial_done(t) for t in snap.trials_of(plan.plan_id))

        await h.wait_until(done, key)
        return not self.halted()

    async def run_trial(self, runner: TrialRunner, trial: Trial, key: str) -> Trial | None:
        """Advance the Trial to terminal with its Plan-Memory update; None when paused or cancelled."""
        while True:
            state = self.state()
            if state == "cancelled":
                if not trial.terminal:
                    runner.fail(trial, "cancelled", "cancelled by the operator")
                return None
            if state == "paused" or self.h.record.phase == "suspended":
                return None
            if trial.status == "cancelled":
                return trial
            if trial.terminal:
                if trial.plan_memory is not None:
                    return trial
                trial = await publish_plan_memory(self.h, trial, key)
                continue
            trial = await runner.step(trial)

    def final_selection(self) -> None:
        """Rank Plans by their best Trial and freeze the top Plan's best Trial (paper Sec 3.4)."""
        h = self.h
        if h.record.phase == "search":
            with h.transition("search_completed", "run") as tx:
                h.update_record(tx, phase="completion")
        if h.record.phase != "completion":
            return
        snap = Snapshot.read(h.store)
        ranking = snap.ranking(h.metrics)
        selection: FinalSelection | Unavailable = Unavailable(reason="no Trial has in-loop scores")
        if ranking:
            top = ranking[0]
            trial = snap.trial(top.trial_id)
            assert trial is not None
            frozen = checkpoint_selection(trial, top.scores)
            assert frozen is not None, f"ranked Trial {top.trial_id} has no scored package"
            selection = frozen
        with h.transition("final_selection", "run", {"ranking": [r.plan_id for r in ranking]}) as tx:
            h.update_record(tx, phase="completed", selection=selection)


def checkpoint_selection(trial: Trial, scores: dict[str, float] | None = None) -> FinalSelection | None:
    """``trial`` as a selection: its strategy, command and its package's selected checkpoint.

    ``scores`` default to the Trial's own; None when the Trial has no scores, no package or no
    bound strategy. Final selection freezes the top Plan's best Trial this way; the operator's
    per-Trial held-out evaluations name their checkpoints the same way.
    """
    if isinstance(trial.scores, Unavailable) or not isinstance(trial.package, PackageRef):
        return None
    if not isinstance(trial.strategy_digest, str) or not isinstance(trial.command_digest, str):
        return None
    manifest = open_package(Path(trial.package.path)).manifest
    return FinalSelection(
        plan_id=trial.plan_id,
        trial_id=trial.trial_id,
        strategy_digest=trial.strategy_digest,
        command_digest=trial.command_digest,
        scores=dict(scores if scores is not None else trial.scores),
        selected_step=manifest.selected_step,
        checkpoint_path=manifest.selected_checkpoint,
    )


def drive_run(
    run_dir: Path | str, *, backend: RoleBackend | None = None, registry: PluginRegistry | None = None
) -> str:
    """Open the run in ``run_dir`` and drive it (virtual loop for a dry run); returns the resulting phase.

    The controller lock is held throughout: one process drives a run, and ``ade status`` tells a
    Run in progress from an interrupted one by it.
    """
    from ade_core.harness.liveness import controlling
    from ade_core.harness.simulated import VirtualClock, run_virtual

    dry_run = read_settings(Path(run_dir)).dry_run  # not a run directory: refused before anything is created
    with controlling(run_dir), RunStore.open(run_dir) as store:
        clock: Any = VirtualClock(last_clock_reading(store)) if dry_run else WallClock()

        async def main() -> str:
            h = open_harness(store, backend=backend, registry=registry, clock=clock)
            try:
                return await RunController(h).drive()
            finally:
                await h.executor.close()

        return run_virtual(main(), clock) if dry_run else asyncio.run(main())
