"""Turning a strategy file into a bound Engine command: admit, realize, bind (paper Sec 3, App. C.4).

Task-agnostic: every task behaviour comes through the task's hooks (interface, development and
frozen inputs, services, output validation, admission probes, realization check, binding).

- ``admit``: static pre-check -> sandbox run on the Builder's development inputs with the task's
  services attached -> output validation/canonicalization -> admission probes. Every check is
  listed, passed, failed with its reason, or skipped with the reason it could not run.
- ``realize``: the admitted strategy on the frozen task inputs (from 𝓑), recording its output,
  every service call with its answer, timings and the sandbox's isolation level; canonicalized
  and judged by the task's realization check (verified / unverified / deviated).
- ``bind``: Bind(realization; 𝓑) -> BoundCommand, the command every Engine attempt replays.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from ade_core.errors import StrategyFailure
from ade_core.harness.static_policy import check_strategy_source, defined_entry_points
from ade_core.plugins import TaskHandle
from ade_core.schemas.artifact import BoundCommand, ResourceRequest
from ade_core.schemas.common import Model, sha256_digest
from ade_core.schemas.config import ExperimentConfig, StrategyLimits
from ade_core.specs import INVALID_REQUEST, ServiceSpec, StrategyInterface, TaskInputs
from ade_sandbox import Limits, Service, open_worker

CheckStatus = Literal["passed", "failed", "skipped"]


class RealizationError(StrategyFailure):
    """The admitted strategy did not produce a valid output on the frozen task inputs."""

    def __init__(self, message: str, traceback: str | None = None) -> None:
        super().__init__(message)
        self.traceback = traceback  # the strategy's own frames, when a call raised


class Check(Model):
    """One admission check and its outcome."""

    name: str = Field(description="static_check, sandbox_run, output_validation, or probe:<name>.")
    status: CheckStatus = Field(description="passed, failed, or skipped (could not run).")
    reason: str = Field(default="", description="Why it failed or was skipped.")
    traceback: str | None = Field(
        default=None, description="The strategy's own traceback frames (file, line, code) when a call raised."
    )


class CallRecord(Model):
    """One entry-point call in the sandbox: its output, services used, and cost."""

    entry_point: str = Field(description="Entry point called.")
    status: str = Field(description="The sandbox's typed status (ok, exception, timeout, ...).")
    error: str | None = Field(default=None, description="Error text when not ok.")
    traceback: str | None = Field(
        default=None, description="The strategy's own traceback frames when it raised (never the sandbox's)."
    )
    canonical: Any = Field(default=None, description="The task's canonical form of a valid output.")
    statistics: dict[str, Any] = Field(default_factory=dict, description="Realized-output statistics.")
    service_calls: list[dict[str, Any]] = Field(
        default_factory=list, description="Every service call: name, arguments, answer, seconds."
    )
    wall_s: float = Field(default=0.0, description="Wall time of the call.")
    cpu_s: float | None = Field(default=None, description="CPU time of the call.")
    peak_memory_mb: float | None = Field(default=None, description="Peak memory.")


class AdmissionResult(Model):
    """The typed outcome of the admission pipeline."""

    task: str = Field(description="Task name.")
    strategy_digest: str = Field(description="Digest of the strategy source.")
    admitted: bool = Field(description="True when no check failed.")
    checks: tuple[Check, ...] = Field(description="Every check in order.")
    calls: tuple[CallRecord, ...] = Field(default=(), description="Calls on the development inputs.")
    isolation: str | None = Field(default=None, description="Sandbox isolation level used.")
    seconds: float = Field(default=0.0, description="Wall time of the whole pipeline.")

    @property
    def failures(self) -> list[Check]:
        return [c for c in self.checks if c.status == "failed"]


class Realization(Model):
    """The admitted strategy run on the frozen task inputs, canonicalized and checked."""

    task: str = Field(description="Task name.")
    strategy_digest: str = Field(description="Digest of the strategy source.")
    config_digest: str = Field(description="Digest of the frozen ExperimentConfig the inputs came from.")
    inputs: str = Field(description="Where the frozen inputs came from.")
    input_statistics: dict[str, Any] = Field(
        default_factory=dict,
        description="Counts of the frozen inputs (e.g. a Curriculum inventory's source, eligible and overlength rows).",
    )
    calls: tuple[CallRecord, ...] = Field(description="Every call with output, service calls and cost.")
    isolation: str = Field(description="Sandbox isolation level used.")
    verdict: Literal["verified", "deviated", "unverified"] = Field(description="The realization check.")
    reasons: tuple[str, ...] = Field(default=(), description="Why, citing the realized statistics.")
    duplicate_of_reference: bool | None = Field(
        default=None,
        description="True when every realized output equals the generic reference's on the same frozen inputs "
        "(the Trial would re-measure the reference); None when the reference's realization was not at hand.",
    )
    seconds: float = Field(description="Wall time of the realization.")

    @property
    def canonical_outputs(self) -> list[Any]:
        return [call.canonical for call in self.calls]

    @property
    def statistics(self) -> dict[str, Any]:
        """Statistics of a single-call realization; for several calls, per entry point (``merged_statistics``)."""
        return merged_statistics(self.calls)


def merged_statistics(calls: Sequence[CallRecord]) -> dict[str, Any]:
    """One call's statistics as they are; several calls' per entry point, ``<entry>.<name>``: the
    mean of a numeric statistic over that entry point's calls, and ``<entry>.calls``."""
    if len(calls) == 1:
        return dict(calls[0].statistics)
    merged: dict[str, Any] = {}
    for entry in dict.fromkeys(c.entry_point for c in calls):
        mine = [c.statistics for c in calls if c.entry_point == entry]
        merged[f"{entry}.calls"] = len(mine)
        for name in dict.fromkeys(k for stats in mine for k in stats):
            values = [stats.get(name, 0) for stats in mine]
            if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
                merged[f"{entry}.{name}"] = round(sum(values) / len(values), 6)
    return merged


def strategy_digest(source: str) -> str:
    return sha256_digest({"source": source})


def sandbox_services(specs: Iterable[ServiceSpec]) -> list[Service]:
    return [
        Service(
            s.name, s.handler, max_calls=s.max_calls, max_items_per_call=s.max_items_per_call, signature=s.signature
        )
        for s in specs
    ]


def unconfigured_services(interface: StrategyInterface, attached: Iterable[str] = ()) -> list[Service]:
    """Every service of ``interface`` not in ``attached``, answering only ``unavailable``."""
    return [
        Service(name, unavailable, max_calls=64, max_items_per_call=100_000, signature=interface.signature(name))
        for name in interface.services
        if name not in set(attached)
    ]


def unavailable(requests: Any) -> Any:
    """The answer of a service that is not configured: never a zero, always ``unavailable``."""
    if isinstance(requests, list):
        return [{"status": "unavailable", "reason": "service not configured"} for _ in requests]
    return {"status": "unavailable", "reason": "service not configured"}


def malformed_requests(call: CallRecord, limit: int = 3) -> list[str]:
    """Every malformed service request of ``call``, as ``invalid_service_request: <field>: <fix>``.

    A refused call whose error says so (the handler raised ``InvalidServiceRequest``, or the argument
    had the wrong shape), or an answer with status ``invalid_service_request``. Either is the strategy's
    error: it fails the run even when the strategy caught the ``ServiceError``."""
    found: list[str] = []
    for service_call in call.service_calls:
        error = service_call.get("error") or ""
        if not service_call["ok"] and error.startswith(INVALID_REQUEST):
            found.append(f"{service_call['name']}: {error}")
            continue
        answers = service_call["value"] if isinstance(service_call["value"], list) else [service_call["value"]]
        for index, answer in enumerate(answers):
            if isinstance(answer, Mapping) and answer.get("status") == INVALID_REQUEST:
                found.append(
                    f"{service_call['name']}: {INVALID_REQUEST}: requests[{index}]: {answer.get('reason', 'malformed')}"
                )
    return found[:limit] + ([f"... {len(found) - limit} more"] if len(found) > limit else [])


def _call_failure(call: CallRecord) -> str | None:
    """Why a call failed in the sandbox (or sent malformed service requests); None when it did not."""
    malformed = malformed_requests(call)  # first: a strategy that did not catch the ServiceError raised it
    if malformed:
        return f"{call.entry_point}: " + "; ".join(malformed)
    if call.status not in ("ok", "invalid_output"):
        return f"{call.entry_point}: {call.status}: {call.error}"
    return None


def answer_statuses(service_calls: Sequence[Mapping[str, Any]]) -> list[str]:
    """The status of every answer the services gave (a refused call counts as unavailable)."""
    statuses = []
    for call in service_calls:
        if not call["ok"]:
            statuses.append("unavailable")
            continue
        answers = call["value"] if isinstance(call["value"], list) else [call["value"]]
        statuses += [a.get("status", "completed") if isinstance(a, Mapping) else "completed" for a in answers]
    return statuses


def _run_calls(
    source: str,
    task: TaskHandle,
    inputs: TaskInputs,
    config: ExperimentConfig | None,
    limits: Limits,
    min_isolation: str,
) -> tuple[list[CallRecord], str]:
    """Run every call of ``inputs`` in one worker with the task's services; validate each output."""
    # Without 𝓑 to configure services from, each one is attached answering only "unavailable".
    services = sandbox_services(task.services(config)) if config is not None else []
    interface = task.interface()
    services += unconfigured_services(interface, {s.name for s in services})
    # An optional entry point the strategy does not define (e.g. group credit) is not called.
    absent = {e.name for e in interface.entry_points if not e.required} - defined_entry_points(source, interface)
    records = []
    with open_worker(
        source,
        services=services,
        limits=limits,
        min_isolation=min_isolation,
    ) as worker:
        isolation = worker.level
        for call in inputs.calls:
            if call.entry_point in absent:
                continue
            result = worker.call(call.entry_point, call.arguments)
            service_calls = [
                {"name": c.name, "args": c.args, "ok": c.ok, "value": c.value, "error": c.error, "seconds": c.seconds}
                for c in result.service_calls
            ]
            record = CallRecord(
                entry_point=call.entry_point,
                status=result.status,
                error=result.error,
                traceback=result.traceback,
                service_calls=service_calls,
                wall_s=result.wall_s,
                cpu_s=result.cpu_s,
                peak_memory_mb=result.peak_memory_mb,
            )
            if result.ok:
                verdict = task.validate_output(call.entry_point, result.value, call.arguments)
                record = record.model_copy(
                    update={
                        "canonical": verdict.canonical if verdict.ok else None,
                        "statistics": verdict.statistics,
                        "status": "ok" if verdict.ok else "invalid_output",
                        "error": None if verdict.ok else "; ".join(verdict.errors),
                    }
                )
            records.append(record)
    return records, isolation


def _limits(config: ExperimentConfig | None, limits: StrategyLimits | None) -> StrategyLimits:
    """The strategy limits of a call: given ones, else 𝓑's ``[sandbox.limits]``, else the defaults."""
    if limits is not None:
        return limits
    return config.sandbox.limits if config is not None else StrategyLimits()


def admit(
    source: str,
    task: TaskHandle,
    config: ExperimentConfig | None = None,
    *,
    min_isolation: str = "process",
    probes: bool = True,
    limits: StrategyLimits | None = None,
    reference_rollouts: Sequence[Mapping[str, Any]] | None = None,
    base_dir: str | Path = ".",
) -> AdmissionResult:
    """Run the admission pipeline; never raises for a bad strategy, only returns failed checks.

    ``base_dir`` resolves 𝓑's relative paths for tasks whose development inputs are 𝓑's own
    authorised inputs (Curriculum schedules 𝓑's RFT pool).

    ``reference_rollouts`` are the generic reference Trial's recorded rollouts, for probes that
    replay a strategy on them (``AdmissionProbe.needs_reference``); None where it has not run.

    ``probes=False`` is for the task's own generic reference: probes constrain proposed strategies
    (e.g. "calls the judge under Judge enrichment"), while the reference is fixed by the task."""
    started = time.monotonic()
    digest = strategy_digest(source)
    interface = task.interface()
    checks: list[Check] = []

    def finish(calls: Sequence[CallRecord] = (), isolation: str | None = None) -> AdmissionResult:
        return AdmissionResult(
            task=task.name,
            strategy_digest=digest,
            admitted=not any(c.status == "failed" for c in checks),
            checks=tuple(checks),
            calls=tuple(calls),
            isolation=isolation,
            seconds=time.monotonic() - started,
        )

    later = ["sandbox_run", "output_validation", *(f"probe:{p.name}" for p in task.admission_probes())]
    violations = check_strategy_source(source, interface)
    if violations:
        checks.append(Check(name="static_check", status="failed", reason="; ".join(map(str, violations))))
        checks += [Check(name=n, status="skipped", reason="the static pre-check failed") for n in later]
        return finish()
    checks.append(Check(name="static_check", status="passed"))
    inputs = task.builder_dev_inputs(config, base_dir)
    stage_limits = _limits(config, limits).sandbox_limits("admission")
    calls, isolation = _run_calls(source, task, inputs, config, stage_limits, min_isolation)
    stages = (
        ("sandbox_run", _call_failure, "the sandbox run failed"),
        (
            "output_validation",
            lambda c: c.status == "invalid_output" and f"{c.entry_point}: {c.status}: {c.error}",
            "the output was invalid",
        ),
    )
    for index, (name, failure, why) in enumerate(stages, 1):
        bad = [c for c in calls if failure(c)]
        if bad:
            reason = "; ".join(str(failure(c)) for c in bad)
            trace = next((c.traceback for c in bad if c.traceback), None)
            checks.append(Check(name=name, status="failed", reason=reason, traceback=trace))
            checks += [Check(name=n, status="skipped", reason=why) for n in later[index:]]
            return finish(calls, isolation)
        checks.append(Check(name=name, status="passed"))
    context = {
        "task": task.name,
        "source": source,
        "interface": interface,
        "config": config,
        "outputs": [c.canonical for c in calls],
        "statistics": [c.statistics for c in calls],
        "service_calls": [s for c in calls for s in c.service_calls],
        "limits": stage_limits,
        "min_isolation": min_isolation,
        # what probes that grade their own responses need: 𝓑's in-loop grader, every plugin's exploits
        "grader": task.registry.graders().get(config.evaluation.in_loop.grader) if config is not None else None,
        "reward_exploits": task.registry.reward_exploits(),
        "reference_rollouts": reference_rollouts,
    }
    for probe in task.admission_probes():
        if not probes:
            checks.append(Check(name=f"probe:{probe.name}", status="skipped", reason="the generic reference is exempt"))
            continue
        try:
            result = probe.check(context)
        except Exception as exc:  # a broken probe must not admit a strategy
            checks.append(Check(name=f"probe:{probe.name}", status="failed", reason=f"probe raised {exc!r}"))
            continue
        checks.append(Check(name=f"probe:{probe.name}", status=result.status, reason=result.reason))
    return finish(calls, isolation)


def realize(
    source: str,
    task: TaskHandle,
    config: ExperimentConfig,
    *,
    base_dir: str | Path = ".",
    declared: Sequence[Mapping[str, Any]] = (),
    min_isolation: str = "process",
    reference_outputs: Sequence[Any] | None = None,
) -> Realization:
    """Run the strategy on the frozen task inputs and apply the task's realization check.

    ``reference_outputs`` are the generic reference's canonical outputs on the same frozen inputs;
    given them, the realization says whether it duplicates the reference.

    Raises RealizationError (naming each failed call) when the strategy does not return a valid
    output on the frozen inputs: there is nothing to bind.
    """
    started = time.monotonic()
    inputs = task.task_inputs(config, base_dir)
    stage_limits = _limits(config, None).sandbox_limits("realization")
    calls, isolation = _run_calls(source, task, inputs, config, stage_limits, min_isolation)
    failed = [c for c in calls if c.status != "ok" or malformed_requests(c)]
    if failed:
        raise RealizationError(
            "the strategy failed on the frozen task inputs: "
            + "; ".join(_call_failure(c) or f"{c.entry_point}: {c.status}: {c.error}" for c in failed),
            traceback=next((c.traceback for c in failed if c.traceback), None),
        )
    statuses = answer_statuses([s for c in calls for s in c.service_calls])
    verdict = task.realization_check(merged_statistics(calls), [dict(d) for d in declared], statuses)
    return Realization(
        task=task.name,
        strategy_digest=strategy_digest(source),
        config_digest=config.digest(),
        inputs=inputs.description,
        input_statistics=dict(inputs.statistics),
        calls=tuple(calls),
        isolation=isolation,
        verdict=verdict.status,
        reasons=verdict.reasons,
        duplicate_of_reference=None
        if reference_outputs is None
        else [c.canonical for c in calls] == list(reference_outputs),
        seconds=time.monotonic() - started,
    )


DUPLICATE_OF_REFERENCE = (
    "duplicate_of_reference: on the frozen inputs every realized output equals the generic reference's, so this "
    "Trial would only re-measure the reference; change what decides the output (a seed other than the "
    "reference's, or a filter that removes something)"
)


def bind(realization: Realization, task: TaskHandle, source: str, config: ExperimentConfig) -> BoundCommand:
    """Bind(realization; 𝓑): the frozen Engine command for this realization."""
    if realization.config_digest != config.digest():
        raise RealizationError(
            f"realization was made under config {realization.config_digest}, not {config.digest()}; realize again"
        )
    intervention = task.bind(realization.canonical_outputs, source, config)
    return BoundCommand(
        task=task.name,
        strategy_digest=realization.strategy_digest,
        intervention=intervention,
        config_digest=config.digest(),
        seeds={"training": config.seeds.training, "evaluation": config.seeds.evaluation},
        resources=ResourceRequest(device=config.resources.device, cpu_threads=config.resources.cpu_threads),
    )
