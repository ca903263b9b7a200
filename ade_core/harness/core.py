"""The Harness: the only writer of research state (paper Sec 3, App. C.2).

Every commit goes through ``Harness.transition`` / ``Harness.delivery``, which check that the
frozen 𝓑 and 𝓩 still have the digests recorded at initialization, stamp the clock reading on
the event, and wake waiting chains. ``Harness.ask`` is one agent call: register the awaited
delivery, build the view from that revision, let the backend answer, and commit what the
Harness admits from the answer — or record why it was refused and ask again with feedback.
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from ade_core.errors import AdeError, DeliveryRejected
from ade_core.executors.base import Executor, Lease
from ade_core.harness.clock import Clock
from ade_core.harness.gate import StrategyGate
from ade_core.harness.methods import method_policy
from ade_core.harness.ranking import MetricOrder
from ade_core.harness.roles import AgentError, RoleBackend
from ade_core.plugins import TaskHandle
from ade_core.schemas.common import Model, sha256_digest
from ade_core.schemas.config import ExperimentConfig, GenerationSettings
from ade_core.schemas.run import RunRecord
from ade_core.schemas.trial import Unavailable
from ade_core.schemas.views import View
from ade_core.specs import StrategyInterface
from ade_core.store import RunStore, Transition

T = TypeVar("T")

CRASH_ENV = "ADE_CRASH_AT"  # testing hook: SIGKILL this process at the Nth commit ("N" or "N:before")


class FrozenInputsChanged(AdeError):
    """𝓑 or 𝓩 no longer has the digest frozen at initialization: the run refuses to continue."""


class AgentFailed(AdeError):
    """A role did not produce an admissible delivery within its call budget; the message is fit for the research
    record, ``operator_detail`` (the last failed call's error as the server gave it) for the operator only."""

    def __init__(self, message: str, operator_detail: str | None = None):
        super().__init__(message)
        self.operator_detail = operator_detail


class HarnessRefusal(Exception):
    """Raised while admitting a delivery: refuse it with ``feedback``; ``counts`` against the call budget."""

    def __init__(self, reason: str, feedback: list[str], *, counts: bool = True):
        super().__init__(f"{reason}: {'; '.join(feedback)}")
        self.reason, self.feedback, self.counts = reason, feedback, counts


def interface_digest(interface: StrategyInterface) -> str:
    """Digest of 𝓩 as frozen in the run record."""
    return sha256_digest(interface.model_dump(mode="json"))


@dataclass
class CrashHook:
    """SIGKILL the controller at its Nth commit, before or after the commit (crash-injection tests)."""

    at: int | None = None
    before: bool = False
    count: int = 0

    @classmethod
    def from_env(cls) -> CrashHook:
        raw = os.environ.get(CRASH_ENV, "")
        if not raw:
            return cls()
        number, _, mode = raw.partition(":")
        return cls(at=int(number), before=mode == "before")

    def point(self, before: bool) -> None:
        if self.at is None:
            return
        if before:
            self.count += 1
        if self.count == self.at and before == self.before:
            os.kill(os.getpid(), signal.SIGKILL)


@dataclass
class Harness:
    """Everything a running controller needs, and the commit discipline around the store."""

    store: RunStore
    config: ExperimentConfig
    base_dir: str
    task: TaskHandle
    clock: Clock
    backend: RoleBackend
    executor: Executor
    gate: StrategyGate
    base_evaluator: Callable[[], Awaitable[dict[str, float] | Unavailable]] | None = None
    on_exhausted: str = "fail_trial"  # [operational.recovery]: "fail_trial" | "suspend_run"
    generation: GenerationSettings = field(default_factory=GenerationSettings)  # [operational.generation]
    lease: Lease = field(default_factory=Lease)  # an attempt's heartbeat lease ([operational.executor])
    crash: CrashHook = field(default_factory=CrashHook.from_env)

    def __post_init__(self) -> None:
        record = self.store.get_model("run", "run")
        if record is None:
            raise AdeError(f"{self.store.run_dir} holds no initialized run; start one with `ade run CONFIG`")
        self.record: RunRecord = record
        self.interface = self.task.interface()
        self.families = self.task.strategy_catalog()
        metrics = self.task.metrics()
        self.metrics = MetricOrder(self.task.spec.metric_order, {n: m.higher_is_better for n, m in metrics.items()})
        self.package_schema = self.task.package_schema()
        self.review_pools = self.task.review_pools()
        # A dry run's controller stays free of the Engine: the development inputs without 𝓑's data.
        dev_config = None if self.record.dry_run else self.config
        self.dev_inputs = self.task.builder_dev_inputs(dev_config, self.base_dir).description
        self.method = method_policy(self.config)
        self.planning_lock = asyncio.Lock()
        self._changed = asyncio.Event()
        self.check_frozen()

    @property
    def run_dir(self) -> Path:
        return self.store.run_dir

    # -- frozen inputs and commits -------------------------------------------------------------

    def check_frozen(self) -> None:
        """Refuse to commit unless 𝓑 and 𝓩 have the digests frozen at initialization (invariant 1)."""
        current = self.store.get_model("run", "run")
        assert current is not None
        checks = (
            ("ExperimentConfig (𝓑)", current.config_digest, self.config.digest()),
            ("StrategyInterface (𝓩)", current.interface_digest, interface_digest(self.interface)),
            ("ExperimentConfig (𝓑) of the run record", current.config_digest, self.record.config_digest),
        )
        for name, frozen, now in checks:
            if frozen != now:
                raise FrozenInputsChanged(
                    f"the {name} of run {current.run_id} was frozen as {frozen} but is now {now}; "
                    "a run keeps its configuration and intervention space — fork or start a new run to change them"
                )

    @contextmanager
    def transition(self, kind: str, subject: str, payload: Mapping[str, Any] | None = None) -> Iterator[Transition]:
        """One Harness transition (the clock reading is recorded as ``vt``)."""
        self.check_frozen()
        data = {**(payload or {}), "vt": self.clock.now()}
        with self.store.transition(kind, actor="harness", subject=subject, payload=data) as tx:
            yield tx
            self.crash.point(before=True)
        self.crash.point(before=False)
        self.notify()

    @contextmanager
    def delivery(
        self, role: str, subject: str, basis: int, payload: Any, model: type[Model], details: Mapping[str, Any]
    ) -> Iterator[Transition]:
        """Accept ``role``'s delivery and commit what the Harness admits from it, in one transition."""
        self.check_frozen()
        with self.store.delivery(
            role, subject, basis, payload, model=model, details={**details, "vt": self.clock.now()}
        ) as tx:
            yield tx
            self.crash.point(before=True)
        self.crash.point(before=False)
        self.notify()

    def update_record(self, tx: Transition, **changes: Any) -> RunRecord:
        """Write a new version of the run record; its frozen digests never change."""
        current = self.store.get_model("run", "run")
        assert current is not None
        updated = current.model_copy(update=changes)
        if (updated.config_digest, updated.interface_digest) != (current.config_digest, current.interface_digest):
            raise FrozenInputsChanged("the run record's frozen digests cannot change")
        tx.put("run", "run", updated)
        self.record = updated
        return updated

    # -- waiting -------------------------------------------------------------------------------

    def notify(self) -> None:
        """Wake every chain waiting for the state to change."""
        self._changed.set()
        self._changed = asyncio.Event()

    async def wait_until(self, predicate: Callable[[], bool], key: str) -> None:
        """Wait until ``predicate()`` holds after some commit, then rejoin the clock in ``key`` order."""
        while not predicate():
            await self._changed.wait()
        await self.clock.checkpoint(key)

    # -- agent calls ---------------------------------------------------------------------------

    def accepted(self, role: str, subject: str) -> dict[str, Any] | None:
        """The payload of ``role``'s accepted delivery for ``subject``, if one was committed."""
        found = [d for d in self.store.accepted_deliveries(subject=subject) if d.role == role]
        return found[-1].payload if found else None

    def _calls(self, role: str, subject: str) -> int:
        """Registered calls of ``role`` for ``subject`` that count against its budget."""
        count = 0
        for expectation in self.store.expectations(subject=subject):
            if expectation.role != role:
                continue
            event = self.store.event(expectation.registered_revision)
            if event is None or event.payload.get("counts", True):
                count += 1
        return count

    def register(
        self,
        role: str,
        subject: str,
        *,
        feedback: Sequence[str] = (),
        counts: bool = True,
        refused: str | None = None,
        spent: Mapping[str, float] | None = None,
        detail: str | None = None,
    ) -> None:
        """Await ``role``'s delivery for ``subject`` (withdrawing an earlier call), with feedback for a retry;
        ``detail`` is for the operator (the failed call's error as the server gave it), never for a role."""
        payload: dict[str, Any] = {"role": role, "feedback": list(feedback), "counts": counts}
        if refused:
            payload["refused"] = refused
        if detail:
            payload["operator_detail"] = detail[:2000]
        payload.update(_spent(spent))
        with self.transition(f"{role}_called", subject, payload) as tx:
            tx.expect_delivery(role, subject)

    async def ask(
        self,
        role: str,
        subject: str,
        *,
        key: str,
        view: Callable[[int, tuple[str, ...]], View],
        model: type[Model],
        accept: Callable[[Transition, Any, Any], T],
        prepare: Callable[[Any], Awaitable[Any]] | None = None,
        describe: Callable[[Any], Mapping[str, Any]] | None = None,
        lock: asyncio.Lock | None = None,
    ) -> T:
        """One agent call through to its committed effect; raises ``AgentFailed`` when the budget is spent.

        ``prepare`` runs outside any transaction (admission, realization: slow, may await);
        ``accept`` runs inside the delivery's transaction and must not await. Either may raise
        ``HarnessRefusal``: nothing of the delivery is committed, the refusal is recorded with
        the next call, and the role is asked again with the feedback. ``describe`` turns what
        ``prepare`` returned into extra details of the delivery event (e.g. a development check).
        """
        if self.accepted(role, subject) is not None:
            raise AdeError(f"{role}'s delivery for {subject!r} was already committed; recovery must not re-ask")
        tries = self.config.budget.agent_retries
        while True:
            expectation = self.store.awaited(role, subject)
            if expectation is None:
                if self._calls(role, subject) >= tries:
                    raise AgentFailed(f"{role} gave no admissible delivery for {subject!r} in {tries} call(s)")
                self.register(role, subject)
                expectation = self.store.awaited(role, subject)
                assert expectation is not None
            registered = self.store.event(expectation.registered_revision)
            assert registered is not None
            anchor = float(registered.payload.get("vt", self.clock.now()))
            feedback = tuple(registered.payload.get("feedback", ()))
            built = view(expectation.basis_revision, feedback)
            try:
                reply = await self.backend.deliver(role, built)  # type: ignore[arg-type]  # the Harness registers calls only for Role names
            except AgentError as exc:
                await self.clock.pace(key, anchor, exc.seconds)
                self._record_downgrades(role, subject, exc.downgrades)
                cost = {
                    "tokens": exc.tokens,
                    "prompt_tokens": exc.prompt_tokens,
                    "completion_tokens": exc.completion_tokens,
                    "seconds": exc.seconds,
                }
                # the role hears what it can act on; the server's words go to the operator's record
                self._retry(role, subject, exc.role_feedback(), True, "agent_error", cost, detail=str(exc))
                continue
            await self.clock.pace(key, anchor, reply.seconds)
            self._record_downgrades(role, subject, reply.downgrades)
            payload = (
                reply.delivery.model_dump(mode="json") if isinstance(reply.delivery, BaseModel) else reply.delivery
            )
            cost = {
                "tokens": reply.tokens,
                "prompt_tokens": reply.prompt_tokens,
                "completion_tokens": reply.completion_tokens,
            }
            details = {"seconds": reply.seconds, **cost, "view_digest": built.digest()}
            if reply.output_mode is not None:
                details["output_mode"] = reply.output_mode
            if reply.view_trimmed:
                details["view_trimmed"] = dict(reply.view_trimmed)
            try:
                parsed = model.model_validate(payload)
            except ValidationError:
                parsed = None
            try:
                extra = await prepare(parsed) if (prepare and parsed is not None) else None
                if describe is not None and extra is not None:
                    details = {**details, **describe(extra)}
                async with lock if lock is not None else nullcontext():
                    with self.delivery(role, subject, expectation.basis_revision, payload, model, details) as tx:
                        return accept(tx, parsed, extra)
            except DeliveryRejected as exc:
                self._retry(role, subject, [str(exc)], True, exc.reason, cost)
            except HarnessRefusal as refusal:
                self._retry(role, subject, refusal.feedback, refusal.counts, refusal.reason, cost)

    def _record_downgrades(self, role: str, subject: str, downgrades: Sequence[Mapping[str, Any]]) -> None:
        """One ``agent_output_downgraded`` event per endpoint a call switched to plain-text replies."""
        for downgrade in downgrades:
            with self.transition("agent_output_downgraded", subject, {"role": role, **downgrade}):
                pass

    def _retry(
        self,
        role: str,
        subject: str,
        feedback: list[str],
        counts: bool,
        reason: str,
        spent: Mapping[str, float] | None = None,
        *,
        detail: str | None = None,
    ) -> None:
        """Ask again with ``feedback`` — or, when the call budget is spent, withdraw the call and fail.

        ``spent`` (the tokens the refused call cost: total, prompt, completion) is recorded on the
        event, so token accounting in ``ade status`` includes calls that produced no accepted delivery.
        """
        tries = self.config.budget.agent_retries
        if counts and self._calls(role, subject) >= tries:
            payload = {"role": role, "refused": reason, "feedback": feedback, "spent_tokens": 0, **_spent(spent)}
            if detail:
                payload["operator_detail"] = detail
            with self.transition(f"{role}_failed", subject, payload) as tx:
                tx.withdraw_expectation(role, subject)
            raise AgentFailed(
                f"{role} gave no admissible delivery for {subject!r} in {tries} call(s): {feedback[-1]}", detail
            )
        self.register(role, subject, feedback=feedback, counts=counts, refused=reason, spent=spent, detail=detail)


def _spent(cost: Mapping[str, float] | None) -> dict[str, float]:
    """Event fields of a refused call's cost: ``spent_tokens`` (total), ``spent_prompt_tokens``, ...,
    and ``spent_seconds`` for a call that failed."""
    return {
        f"spent_{name}": round(float(value), 3) if name == "seconds" else int(value)
        for name, value in (cost or {}).items()
        if value
    }
