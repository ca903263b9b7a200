"""One Trial from creation to a typed terminal status (paper Sec 3.2, App. C.3–C.6, C.10).

Trials of a Plan run one after another. At creation the Trial freezes its Plan- and Run-Memory
bases and the digest of ψ. Then: Builder rounds through admission (at most J reflections) ->
realization on the frozen inputs and Bind -> Engine attempts through the executor (a retry only
for a declared retryable failure, within the recovery budget, with a fresh attempt id; a failed
attempt is fenced) -> blinded analysis with record-level review. Every step first looks at what
is committed, so the same code resumes a Trial after a crash without re-asking any agent.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ade_core.engine.job import EngineJob
from ade_core.engine.package import PackageTamperedError, open_package
from ade_core.executors.base import AttemptOutcome, run
from ade_core.executors.requests import attempt_request
from ade_core.harness.admission import DUPLICATE_OF_REFERENCE
from ade_core.harness.analysis import analyze
from ade_core.harness.core import AgentFailed, Harness, HarnessRefusal
from ade_core.harness.dev_check import diagnose, event_summary
from ade_core.harness.gate import RealizationError, research_record
from ade_core.harness.operator import ledger
from ade_core.harness.ranking import portfolio_conclusion
from ade_core.harness.snapshot import REFERENCE_PLAN, latest_plan_memory
from ade_core.harness.views import artifact, builder_view
from ade_core.schemas.artifact import BoundCommand, BuilderAccount, StrategyArtifact
from ade_core.schemas.deliveries import BuilderDelivery
from ade_core.schemas.plan import Plan
from ade_core.schemas.run import Suspension
from ade_core.schemas.trial import Attempt, BuildRound, Conclusions, PackageRef, Trial, TrialRecords, Unavailable
from ade_core.schemas.views import DevCheck
from ade_core.store import Transition

PENDING = Unavailable(reason="not concluded yet")


def trial_id_of(plan_id: str, index: int) -> str:
    return f"{plan_id}/T{index}"


def attempt_id_of(trial_id: str, number: int, replacement: int = 0) -> str:
    """Fresh attempt ids: ``<trial>/a<m>`` for the m-th counted attempt, ``.r<k>`` for a crash replacement."""
    return f"{trial_id}/a{number}" + (f".r{replacement}" if replacement else "")


def ended(trial: Trial, status: str, failure: str) -> Trial:
    """``trial`` in a terminal failure ``status``, every field it never reached explicitly unavailable."""
    why = Unavailable(reason=f"{status}: {failure}")
    records = {k: (why if v is None else v) for k, v in trial.records.model_dump().items()}
    realization = trial.conclusions.realization
    return trial.model_copy(
        update={
            "status": status,
            "failure": failure,
            "strategy_digest": trial.strategy_digest or why,
            "command_digest": trial.command_digest or why,
            "package": trial.package or why,
            "records": TrialRecords.model_validate(records),
            "scores": trial.scores if isinstance(trial.scores, dict) else why,
            "conclusions": Conclusions(
                realization=why if realization == PENDING else realization,
                hypothesis=trial.conclusions.hypothesis,
                portfolio=why if trial.conclusions.portfolio == PENDING else trial.conclusions.portfolio,
            ),
        }
    )


class TrialRunner:
    """Drives the Trials of one chain of work (``key``: a Coordinator, or the bootstrap)."""

    def __init__(self, h: Harness, key: str):
        self.h, self.key = h, key

    def create(self, plan: Plan, index: int) -> Trial:
        """The Trial, created with frozen bases and ψ digest if it does not exist yet."""
        trial_id = trial_id_of(plan.plan_id, index)
        existing = self.h.store.get_model("trial", trial_id)
        if existing is not None:
            return existing
        memory = latest_plan_memory(self.h.store, plan.plan_id)
        run_memory = self.h.store.latest_run_memory()
        assert run_memory is not None
        trial = Trial(
            trial_id=trial_id,
            plan_id=plan.plan_id,
            plan_memory_base=f"{plan.plan_id}@v{memory.version}",
            run_memory_base=f"v{run_memory.version}",
            commitment_digest=plan.commitment().digest(),
            status="building",
            scores=Unavailable(reason="not measured yet"),
            conclusions=Conclusions(realization=PENDING, hypothesis=PENDING, portfolio=PENDING),
        )
        with self.h.transition("trial_created", trial_id) as tx:
            tx.put("trial", trial_id, trial)
        return trial

    def _put(self, tx: Transition, trial: Trial) -> Trial:
        trial = Trial.model_validate(trial.model_dump(mode="json"))  # model_copy does not validate
        tx.put("trial", trial.trial_id, trial)
        return trial

    def fail(self, trial: Trial, status: str, failure: str) -> Trial:
        with self.h.transition(f"trial_{status}", trial.trial_id, {"failure": failure}) as tx:
            return self._put(tx, ended(trial, status, failure))

    async def step(self, trial: Trial) -> Trial:
        """Advance ``trial`` by one committed step (the caller loops until it is terminal)."""
        if trial.status == "building":
            return await self.build(trial)
        if trial.status == "admitted":
            return await self.bind(trial)
        if trial.status == "running":
            return await self.execute(trial)
        if trial.status == "analyzing":
            return await analyze(self.h, trial, self.key)
        raise AssertionError(f"no step for Trial status {trial.status}")

    # -- build ---------------------------------------------------------------------------------

    def _record_round(
        self, tx: Transition, trial: Trial, z: str, action: str, admission: Any, *, last: bool, dev_check: str | None
    ) -> Trial:
        failed = tuple(f"{c.name}: {c.reason}" for c in admission.failures)
        rounds = (
            *trial.build_rounds,
            BuildRound(
                round=len(trial.build_rounds),
                strategy_digest=z,
                action=action,
                admitted=admission.admitted,
                failed_checks=failed,
                admission=self.h.store.objects.put_json(
                    {
                        "admitted": admission.admitted,
                        "isolation": admission.isolation,
                        "seconds": admission.seconds,
                        "checks": [c.model_dump(mode="json") for c in admission.checks],
                    }
                ),
                dev_check=dev_check,
            ),
        )
        updated = trial.model_copy(update={"build_rounds": rounds})
        if admission.admitted and (action == "finalize" or last):
            updated = updated.model_copy(update={"status": "admitted", "strategy_digest": z})
        elif not admission.admitted and last:
            updated = ended(updated, "inadmissible", "; ".join(failed) or "admission failed")
        return self._put(tx, updated)

    async def build(self, trial: Trial) -> Trial:
        h = self.h
        if trial.plan_id == REFERENCE_PLAN:  # the bootstrap reference has no Builder (App. C.9)
            reference = h.task.reference_strategy()
            z = StrategyArtifact(
                task=h.task.name, source=reference.source, account=BuilderAccount(implementation=reference.account)
            )
            digest = h.store.objects.put_json(z.model_dump(mode="json"))
            admission = await h.gate.admit(reference.source, reference=True)
            with h.transition("reference_built", trial.trial_id) as tx:
                return self._record_round(tx, trial, digest, "finalize", admission, last=True, dev_check=None)
        plan = h.store.get_model("plan", trial.plan_id)
        assert plan is not None
        round_ = len(trial.build_rounds)
        last = round_ >= h.config.budget.builder_reflections
        subject = f"{trial.trial_id}#build-{round_}"

        async def prepare(delivery: BuilderDelivery) -> tuple[str, Any, DevCheck | None, str | None]:
            if delivery.dev_check and last:
                raise HarnessRefusal(
                    "no_reflection_left",
                    [
                        f"dev_check: round {round_} is the last of J={h.config.budget.builder_reflections} "
                        "reflections, so no round is left to show a development check in; set dev_check false "
                        "and action 'finalize'"
                    ],
                )
            z = StrategyArtifact(
                task=h.task.name, source=delivery.source, account=delivery.account, source_plans=plan.sources
            )
            digest = h.store.objects.put_json(z.model_dump(mode="json"))
            admission = await h.gate.admit(delivery.source, reference_rollouts=self._reference_rollouts())
            if not delivery.dev_check:
                return digest, admission, None, None
            declared = [claim.model_dump(mode="json") for claim in delivery.account.declared]
            check = diagnose(admission, h.task, h.dev_inputs, declared)  # Builder-only: no ranking, no memory
            return digest, admission, check, h.store.objects.put_json(check.model_dump(mode="json"))

        def accept(tx: Transition, delivery: BuilderDelivery, prepared: tuple[str, Any, Any, str | None]) -> Trial:
            digest, admission, _, check = prepared
            return self._record_round(tx, trial, digest, delivery.action, admission, last=last, dev_check=check)

        def describe(prepared: tuple[str, Any, DevCheck | None, str | None]) -> dict[str, Any]:
            _, _, check, digest = prepared
            return {"dev_check": event_summary(check, digest)} if check is not None and digest else {}

        try:
            return await h.ask(
                "builder",
                subject,
                key=self.key,
                view=lambda basis, feedback: builder_view(h, subject, basis, feedback, trial.trial_id, round_),
                model=BuilderDelivery,
                accept=accept,
                prepare=prepare,
                describe=describe,
            )
        except AgentFailed as exc:
            return self.fail(trial, "build_failed", str(exc))

    async def bind(self, trial: Trial) -> Trial:
        """Realize the admitted artifact on the frozen inputs and Bind it to 𝓑."""
        h = self.h
        assert isinstance(trial.strategy_digest, str)
        z = artifact(h, trial.strategy_digest)
        declared = [claim.model_dump(mode="json") for claim in z.account.declared]
        try:
            realization = await h.gate.realize(z.source, declared, self._reference_outputs(trial))
            command = h.gate.bind(realization, z.source)
        except RealizationError as exc:
            return self.fail(trial, "build_failed", f"realization_failed: {exc}")
        if realization.duplicate_of_reference and len(trial.build_rounds) <= h.config.budget.builder_reflections:
            return self._return_duplicate(trial)
        realization_ref = h.store.objects.put_json(research_record(realization.model_dump(mode="json")))
        command_ref = h.store.objects.put_json(command.model_dump(mode="json"))
        records = trial.records.model_copy(update={"realization": realization_ref, "command": command_ref})
        conclusions = trial.conclusions.model_copy(update={"realization": realization.verdict})
        with h.transition("trial_bound", trial.trial_id, {"command_digest": command.digest()}) as tx:
            return self._put(
                tx,
                trial.model_copy(
                    update={
                        "records": records,
                        "command_digest": command.digest(),
                        "conclusions": conclusions,
                        "status": "running",
                    }
                ),
            )

    def _reference_rollouts(self) -> list[dict[str, Any]] | None:
        """P000's recorded training rollouts, when a probe replays them and P000 is packaged."""
        if not any(probe.needs_reference for probe in self.h.task.admission_probes()):
            return None
        from ade_core.engine.package import open_package

        for document in self.h.store.list("trial"):
            reference = Trial.model_validate(document.document)
            if reference.plan_id == REFERENCE_PLAN and isinstance(reference.package, PackageRef):
                opened = open_package(Path(reference.package.path))
                if "training_rollouts" in {r.name for r in opened.manifest.records}:
                    return opened.records("training_rollouts")
        return None

    def _reference_outputs(self, trial: Trial) -> list[Any] | None:
        """The generic reference's realized outputs on the frozen inputs (P000's realization), if at hand."""
        if trial.plan_id == REFERENCE_PLAN:
            return None
        for document in self.h.store.list("trial"):
            reference = Trial.model_validate(document.document)
            if reference.plan_id == REFERENCE_PLAN and isinstance(reference.records.realization, str):
                record = self.h.store.objects.read_json(reference.records.realization)
                return [call.get("canonical") for call in record["calls"]]
        return None

    def _return_duplicate(self, trial: Trial) -> Trial:
        """Back to the Builder: its admitted strategy realizes exactly the reference's outputs on the frozen
        inputs, so a Trial would re-measure P000. The last round carries the note; a reflection is left."""
        last = trial.build_rounds[-1].model_copy(update={"notes": (DUPLICATE_OF_REFERENCE,)})
        returned = trial.model_copy(
            update={"build_rounds": (*trial.build_rounds[:-1], last), "status": "building", "strategy_digest": None}
        )
        with self.h.transition("trial_returned_to_builder", trial.trial_id, {"note": "duplicate_of_reference"}) as tx:
            return self._put(tx, returned)

    # -- execute -------------------------------------------------------------------------------

    def _attempts(self, trial: Trial) -> list[Attempt]:
        """The Trial's attempts, oldest first (each id it lists was written with it)."""
        attempts = []
        for attempt_id in trial.attempts:
            attempt = self.h.store.get_model("attempt", attempt_id)
            assert attempt is not None, f"{trial.trial_id} lists {attempt_id}, which the store does not hold"
            attempts.append(attempt)
        return attempts

    def _anchor(self, attempt: Attempt) -> float:
        first = self.h.store.history("attempt", attempt.attempt_id)[0]
        event = self.h.store.event(first.revision)
        return float(event.payload.get("anchor", self.h.clock.now())) if event else self.h.clock.now()

    def _harness_records(self, trial: Trial, command: BoundCommand) -> dict[str, list[dict[str, Any]]]:
        declared = {spec.name for spec in self.h.package_schema.records}
        if "executed_strategy" not in declared:
            return {}
        assert isinstance(trial.strategy_digest, str) and isinstance(trial.records.realization, str)
        z = artifact(self.h, trial.strategy_digest)
        executed = {
            "source": z.source,
            "strategy_digest": command.strategy_digest,
            "realization": self.h.store.objects.read_json(trial.records.realization),
        }
        return {"executed_strategy": [executed]}

    def attempt_dir(self, attempt_id: str) -> Path:
        """Where the attempt's Engine runs: heartbeat, logs, work files and package."""
        return self.h.run_dir / "attempts" / attempt_id.replace("/", "_")

    async def execute(self, trial: Trial) -> Trial:
        """One attempt of the frozen command (the caller loops until the Trial leaves ``running``)."""
        h = self.h
        attempts = self._attempts(trial)
        anchor = h.clock.now()
        if attempts and attempts[-1].status == "running":  # the controller died while it ran
            lost = attempts[-1]
            anchor = self._anchor(lost)
            h.executor.fence(lost.attempt_id)
            # a SIGKILLed controller leaves its Engine running (its own session, or a remote worker): stop it
            h.executor.recover(lost.attempt_id, self.attempt_dir(lost.attempt_id))
            with h.transition("attempt_lost", lost.attempt_id) as tx:
                tx.put(
                    "attempt",
                    lost.attempt_id,
                    lost.model_copy(update={"status": "fenced", "failure": "lost", "ended_at": h.clock.datetime()}),
                )
            h.store.record_operation("attempt_lost", subject=lost.attempt_id, details={"trial": trial.trial_id})
            attempts = self._attempts(trial)
        elif attempts and attempts[-1].failure == "lost":  # died again after fencing: keep the original anchor
            anchor = self._anchor(attempts[-1])
        counted = [a for a in attempts if a.status != "succeeded" and a.failure != "lost"]
        if counted and not counted[-1].retryable:
            return self.fail(trial, "engine_failed", f"{counted[-1].failure} (not retryable)")
        if len(counted) >= h.config.budget.engine_attempts + h.record.recovery_grants.get(trial.trial_id, 0):
            if h.on_exhausted == "suspend_run":
                return self.suspend(trial, len(counted), counted[-1].failure or "unknown")
            return self.fail(
                trial,
                "engine_failed",
                f"recovery budget exhausted after {len(counted)} failed attempts (last: {counted[-1].failure})",
            )
        number = len(counted) + 1
        replacement = sum(1 for a in attempts if a.number == number)
        attempt_id = attempt_id_of(trial.trial_id, number, replacement)
        assert isinstance(trial.records.command, str)
        command = BoundCommand.model_validate(h.store.objects.read_json(trial.records.command))
        attempt = Attempt(
            attempt_id=attempt_id,
            trial_id=trial.trial_id,
            number=number,
            command_digest=command.digest(),
            status="running",
            started_at=h.clock.datetime(),
        )
        with h.transition("attempt_started", attempt_id, {"anchor": anchor, "number": number}) as tx:
            tx.put("attempt", attempt_id, attempt)
            trial = self._put(tx, trial.model_copy(update={"attempts": (*trial.attempts, attempt_id)}))
        job = EngineJob(
            trial_id=trial.trial_id,
            attempt_id=attempt_id,
            command=command,
            config=h.config.for_search(),  # Sec 3.4: the Engine never sees held-out benchmarks
            held_out_digest=h.config.held_out_digest(),
            base_dir=h.base_dir,
            generation=h.generation,
            harness_records=self._harness_records(trial, command),
        )
        directory = self.attempt_dir(attempt_id)
        reference = trial.plan_id == REFERENCE_PLAN
        outcome = await run(h.executor, attempt_request(job, directory, reference=reference, lease=h.lease))
        await h.clock.pace(self.key, anchor, (outcome.ended_at - outcome.started_at).total_seconds())
        return self.record_outcome(trial, attempt, command, outcome)

    def suspend(self, trial: Trial, failures: int, last: str) -> Trial:
        """Suspend the Run with ``trial`` where it is (policy ``suspend_run``); ``ade resume`` grants a fresh budget."""
        h = self.h
        if h.record.phase != "suspended":
            suspension = Suspension(
                trial_id=trial.trial_id,
                failures=failures,
                last_failure=last,
                phase_before=h.record.phase,
                ledger_at=len(ledger(h.store)),
            )
            with h.transition("run_suspended", "run", {"trial": trial.trial_id, "failures": failures}) as tx:
                h.update_record(tx, phase="suspended", suspended=suspension)
            h.store.record_operation("run_suspended", subject=trial.trial_id, details={"last_failure": last})
        return trial

    def record_outcome(self, trial: Trial, attempt: Attempt, command: BoundCommand, outcome: AttemptOutcome) -> Trial:
        """Commit an attempt's outcome; a fenced attempt's late result is refused (operations log only)."""
        h = self.h
        current = h.store.get_model("attempt", attempt.attempt_id)
        if current is None or current.status != "running":
            h.store.record_operation(
                "late_result_refused",
                subject=attempt.attempt_id,
                details={"status": outcome.status, "current": current and current.status},
            )
            return h.store.get_model("trial", trial.trial_id)  # type: ignore[return-value]  # the Trial was written before its attempts
        done = {"ended_at": h.clock.datetime(), "resources": dict(outcome.resources), "waited_s": outcome.waited_s}
        failure, retryable = outcome.failure, outcome.retryable
        if outcome.status == "succeeded" and outcome.package is not None:
            try:
                opened = open_package(outcome.package)
                manifest = opened.manifest
                if manifest.command_digest != command.digest() or manifest.trial_id != trial.trial_id:
                    raise PackageTamperedError("the package was made by another command or Trial")
            except (PackageTamperedError, OSError, ValueError) as exc:
                failure, retryable, outcome = "bad_package", True, None  # type: ignore[assignment]  # a refused package leaves no outcome to keep
                done["failure_detail"] = str(exc)
            else:
                scores = manifest.in_loop_scores or Unavailable(reason="the offline in-loop evaluation is missing")
                plan = h.store.get_model("plan", trial.plan_id)
                assert plan is not None
                ref = PackageRef(manifest_digest=manifest.digest(), path=str(outcome.package), status=manifest.status)
                conclusions = trial.conclusions.model_copy(
                    update={"portfolio": portfolio_conclusion(scores, plan.portfolio_target, h.metrics)}
                )
                with h.transition("attempt_succeeded", attempt.attempt_id, {"trial": trial.trial_id}) as tx:
                    tx.put("attempt", attempt.attempt_id, attempt.model_copy(update={"status": "succeeded", **done}))
                    return self._put(
                        tx,
                        trial.model_copy(
                            update={"package": ref, "scores": scores, "conclusions": conclusions, "status": "analyzing"}
                        ),
                    )
        detail = done.pop("failure_detail", None) or (outcome.detail if outcome else "")
        with h.transition(
            "attempt_failed", attempt.attempt_id, {"failure": failure, "detail": str(detail)[:500]}
        ) as tx:
            tx.put(
                "attempt",
                attempt.attempt_id,
                attempt.model_copy(update={"status": "fenced", "failure": failure, "retryable": retryable, **done}),
            )
        h.executor.fence(attempt.attempt_id)
        return h.store.get_model("trial", trial.trial_id)  # type: ignore[return-value]  # the Trial was written before its attempts
