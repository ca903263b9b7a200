"""Public entry points: ``run_strategy`` (one call) and ``open_worker`` (many calls, one load)."""

from __future__ import annotations

import signal
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ade_sandbox.limits import LEVELS, IsolationUnavailable, Limits, level_rank
from ade_sandbox.probe import probe
from ade_sandbox.process import ChannelError, Exit, ResultTooLarge, SandboxProcess
from ade_sandbox.results import SandboxResult, ServiceCall, Status
from ade_sandbox.services import REFUSALS_BEFORE_STOP, Service, ServiceLedger
from ade_sandbox.static_check import EntrySpec, check_source


def resolve_level(min_isolation: str = "process", level: str | None = None) -> str:
    """The level to run at: the best this machine reaches (or ``level``), never below the minimum."""
    report = probe()
    chosen = level or report.best_level
    if level is not None and (level_rank(level) > level_rank(report.best_level) or not report.level(level).usable):
        raise IsolationUnavailable(f"isolation level {level!r} is not available here; {report.missing_for(level)}")
    if level_rank(chosen) < level_rank(min_isolation):
        where = "the requested level" if level else "the best this machine reaches"
        raise IsolationUnavailable(
            f"isolation {chosen!r} ({where}) is below the required minimum {min_isolation!r}; "
            f"{report.missing_for(min_isolation)}"
        )
    return chosen


def classify_exit(exit: Exit, limits: Limits, elapsed: float) -> tuple[Status, str]:
    """Typed status of a child that ended without delivering a result."""
    if exit.reason == "wall":
        return "timeout", f"wall-clock limit of {limits.wall_s:g} s exceeded"
    if exit.reason == "output_limit":
        return "output_limit", f"stdout or stderr exceeded the cap of {limits.max_output_bytes} bytes each"
    if exit.reason == "result_limit":
        return "output_limit", f"the result exceeded the cap of {limits.max_result_bytes} bytes"
    if exit.reason == "protocol":
        return "bad_output", "the strategy process broke the result protocol"
    if exit.reason == "refusals":
        return "policy_violation", f"stopped after {REFUSALS_BEFORE_STOP} refused service calls"
    if exit.oom:
        return "oom", f"memory limit of {limits.memory_mb} MB exceeded"
    if exit.signal is not None:
        # RLIMIT_CPU sends SIGXCPU at the soft limit and SIGKILL at the hard one (if SIGXCPU is
        # ignored). A namespaced child's CPU time is not visible to the parent, so an unexplained
        # SIGKILL after at least cpu_s of wall time is the hard limit.
        explained = exit.signal == signal.SIGKILL and max(exit.cpu_s or 0.0, elapsed) >= limits.cpu_s - 0.05
        if exit.signal == signal.SIGXCPU or explained:
            return "cpu_timeout", f"CPU limit of {limits.cpu_s:g} s exceeded"
        return "crash", f"killed by signal {signal.Signals(exit.signal).name}"
    return "crash", f"exited with code {exit.returncode} before returning a result"


def _max(*values: float | None) -> float | None:
    present = [v for v in values if v is not None]
    return max(present) if present else None


@dataclass
class CallOutcome:
    """Raw outcome of one call before it becomes a SandboxResult."""

    status: Status
    value: Any = None
    error: str | None = None
    traceback: str | None = None
    cpu_s: float | None = None
    peak_memory_mb: float | None = None
    service_calls: list[ServiceCall] = field(default_factory=list)
    refused_calls: int = 0


class Worker:
    """A strategy loaded once in one sandbox, serving many calls (e.g. a reward function).

    One ``ServiceLedger`` serves the worker's whole life: the calls its module makes while it
    loads (``load_service_calls``) and those of every call, across ``start()`` restarts, so
    quotas are per run and a strategy gains none by crashing itself. Between calls the
    sandbox is frozen; each result's ``cpu_s`` is the parent's measurement of that call.
    """

    def __init__(
        self,
        source: str,
        *,
        limits: Limits,
        level: str,
        services: Iterable[Service] = (),
        inputs: Mapping[str, str | Path] | None = None,
        call_timeout_s: float | None = None,
        freeze_idle: bool = True,
    ) -> None:
        self.source, self.limits, self.level = source, limits, level
        # A one-shot run is never idle (its call follows the load, its close the call): nothing to freeze.
        self.freeze_idle = freeze_idle
        self.services = {s.name: s for s in services}
        self.inputs = {k: str(v) for k, v in (inputs or {}).items()}
        self.call_timeout_s = call_timeout_s or limits.wall_s
        self.process: SandboxProcess | None = None
        self.dead: str | None = None
        self.load_error: CallOutcome | None = None
        self.ledger = ServiceLedger(self.services)
        self.load_service_calls: tuple[ServiceCall, ...] = ()
        self._next_id = 0
        self._cpu_mark = 0.0  # the process's CPU seconds when the current call began
        self.start()

    def start(self) -> None:
        """(Re)start the process and load the strategy; a load failure is kept in ``load_error``."""
        if self.process is not None:
            self.process.close(grace_s=0.5)
        self.dead, self.load_error = None, None
        mark = self.ledger.mark()
        self.process = SandboxProcess.launch(
            self.level,
            self.limits,
            {
                "mode": "strategy",
                "source": self.source,
                "globals": {s.name: list(s.signature) for s in self.services.values() if s.injected},
            },
            self.inputs,
        )
        message = self._receive(time.monotonic() + self.call_timeout_s)
        self.load_service_calls = tuple(self.ledger.calls[mark[0] :])
        if isinstance(message, CallOutcome):
            self.load_error, self.dead = message, message.error
        elif message.get("type") == "load_failed":
            self.load_error = CallOutcome("exception", error=message.get("error"), traceback=message.get("traceback"))
            self.dead = "the strategy failed to load"
        elif message.get("type") != "ready":
            self.process.kill("protocol")
            self.load_error = CallOutcome("bad_output", error=f"unexpected message {message.get('type')!r}")
            self.dead = "protocol error at load"
        else:
            if self.freeze_idle:
                self.process.freeze()
            self._cpu_mark = self.process.usage()[0] or 0.0
        if self.load_error is not None:
            self.load_error.service_calls = list(self.load_service_calls)
            self.load_error.refused_calls = self.ledger.refused - mark[1]

    def _receive(self, deadline: float) -> dict[str, Any] | CallOutcome:
        """Next non-service message, answering service requests meanwhile (a write that cannot
        finish by ``deadline`` is a timeout; a run past the refusal bound is stopped)."""
        assert self.process is not None
        while True:
            try:
                message = self.process.next_message(deadline)
            except ResultTooLarge as exc:
                return CallOutcome("output_limit", error=str(exc))
            except ChannelError as exc:
                return CallOutcome("bad_output", error=str(exc))
            if message is None:
                if self.process.exit is None:  # per-call deadline passed
                    self.process.kill("wall")
                elapsed = time.monotonic() - self.process.started
                status, error = classify_exit(self.process.exit, self.limits, elapsed)  # type: ignore[arg-type]  # set by kill() above
                return CallOutcome(status, error=error)
            if message["type"] != "service":
                return message
            if self.process.exit is not None:
                continue  # requests left behind by a process that has ended get no answer
            refused = self.ledger.refused
            reply = self.ledger.answer(message.get("name"), message.get("args"), arity=message.get("arity", 1))
            if self.ledger.refused > refused and self.ledger.exhausted:
                self.process.kill("refusals")
            elif not self.process.send(reply, deadline) and self.process.exit is None:
                self.process.kill("wall")  # the strategy does not read its answers

    def call(
        self, entry: str, args: Mapping[str, Any] | None = None, *, timeout_s: float | None = None
    ) -> SandboxResult:
        """Call ``entry`` with JSON ``args``; services declared for the worker are attached."""
        started = time.monotonic()
        if self.dead is not None:
            base = self.load_error or CallOutcome("crash", error=f"worker is not running: {self.dead}")
            return self._result(base, started)
        assert self.process is not None
        self._next_id += 1
        mark = self.ledger.mark()
        request = {
            "type": "call",
            "id": self._next_id,
            "entry": entry,
            "args": dict(args or {}),
            "services": sorted(name for name, s in self.services.items() if not s.injected),
        }
        deadline = started + (timeout_s or self.call_timeout_s)
        if not self.process.send(request, deadline) and self.process.exit is None:
            self.process.kill("wall")  # the strategy does not read its calls
        message = self._receive(deadline)
        if isinstance(message, CallOutcome):
            self.dead = message.error
            return self._result(self._measured(message, mark), started)
        if message.get("type") != "result" or message.get("id") != self._next_id:
            self.process.kill("protocol")
            self.dead = "protocol error"
            outcome = CallOutcome("bad_output", error="unexpected message from the strategy")
            return self._result(self._measured(outcome, mark), started)
        if self.freeze_idle:
            self.process.freeze()
        kind = message.get("kind")
        if kind not in ("ok", "exception", "bad_output", "oom"):
            kind, message = "bad_output", {"error": f"unknown result kind {kind!r}"}
        value, error, trace = message.get("value"), message.get("error"), message.get("traceback")
        outcome = CallOutcome(kind, value, error, trace)  # type: ignore[arg-type]  # one of the kinds checked above
        return self._result(self._measured(outcome, mark), started)

    def _measured(self, outcome: CallOutcome, mark: tuple[int, int]) -> CallOutcome:
        """``outcome`` with the parent's accounting of the call and the ledger's record of it."""
        assert self.process is not None
        exit = self.process.exit
        cpu, peak = self.process.usage() if exit is None else (exit.cpu_s, exit.peak_memory_mb)
        if cpu is not None:
            outcome.cpu_s = max(cpu - self._cpu_mark, 0.0)
            self._cpu_mark = cpu
        outcome.peak_memory_mb = peak
        outcome.service_calls = self.ledger.calls[mark[0] :]
        outcome.refused_calls = self.ledger.refused - mark[1]
        return outcome

    def _result(self, outcome: CallOutcome, started: float) -> SandboxResult:
        stdout, stderr = self.process.output() if self.process else ("", "")
        exit = self.process.exit if self.process else None
        return SandboxResult(
            status=outcome.status,
            value=outcome.value if outcome.status == "ok" else None,
            error=outcome.error,
            traceback=outcome.traceback,
            stdout=stdout,
            stderr=stderr,
            wall_s=time.monotonic() - started,
            cpu_s=outcome.cpu_s,
            peak_memory_mb=outcome.peak_memory_mb,
            isolation=self.level,
            exit_code=exit.returncode if exit else None,
            service_calls=tuple(outcome.service_calls),
            refused_calls=outcome.refused_calls,
        )

    def close(self) -> None:
        if self.process is not None:
            self.process.close()

    def __enter__(self) -> Worker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _static_violation(
    source: str, entry: EntrySpec | None, allowed_imports: Iterable[str] | None, max_source_bytes: int
) -> SandboxResult | None:
    if entry is None and allowed_imports is None:
        return None
    violations = check_source(source, [entry] if entry else [], allowed_imports, max_source_bytes=max_source_bytes)
    if not violations:
        return None
    return SandboxResult(status="policy_violation", error="; ".join(str(v) for v in violations), isolation="none")


def open_worker(
    strategy: str | Path,
    *,
    limits: Limits | None = None,
    services: Iterable[Service] = (),
    inputs: Mapping[str, str | Path] | None = None,
    min_isolation: str = "process",
    level: str | None = None,
    call_timeout_s: float | None = None,
) -> Worker:
    """Load ``strategy`` (a path or source text) once; serve calls until closed."""
    source = Path(strategy).read_text() if isinstance(strategy, Path) else strategy
    return Worker(
        source,
        limits=limits or Limits(),
        level=resolve_level(min_isolation, level),
        services=services,
        inputs=inputs,
        call_timeout_s=call_timeout_s,
    )


def run_strategy(
    strategy: str | Path,
    entry: str,
    args: Mapping[str, Any] | None = None,
    *,
    inputs: Mapping[str, str | Path] | None = None,
    services: Iterable[Service] = (),
    limits: Limits | None = None,
    min_isolation: str = "process",
    level: str | None = None,
    spec: EntrySpec | None = None,
    allowed_imports: Iterable[str] | None = None,
    max_source_bytes: int = 256 << 10,
) -> SandboxResult:
    """Run one entry point of a strategy in a fresh sandbox and return its typed result.

    ``inputs`` maps parameter names to JSON files, parsed by the sandbox before user code runs;
    ``args`` are the remaining JSON arguments. With ``spec``/``allowed_imports`` the static
    pre-check runs first and a violation returns ``policy_violation`` without starting a process.
    """
    source = Path(strategy).read_text() if isinstance(strategy, Path) else strategy
    refused = _static_violation(source, spec, allowed_imports, max_source_bytes)
    if refused is not None:
        return refused
    limits = limits or Limits()
    worker = Worker(
        source,
        limits=limits,
        level=resolve_level(min_isolation, level),
        services=services,
        inputs=inputs,
        freeze_idle=False,
    )
    try:
        result = worker.call(entry, args)
    finally:
        exit = worker.process.close() if worker.process else None
    if exit is None or worker.process is None:
        return result
    # A one-shot run is the worker's whole life: its CPU and memory are the lifetime figures the
    # parent measured, its service record the whole ledger (the module's load-time calls included).
    stdout, stderr = worker.process.output()
    return replace(
        result,
        cpu_s=_max(result.cpu_s, exit.cpu_s),
        exit_code=exit.returncode,
        peak_memory_mb=_max(result.peak_memory_mb, exit.peak_memory_mb),
        stdout=stdout,
        stderr=stderr,
        service_calls=tuple(worker.ledger.calls),
        refused_calls=worker.ledger.refused,
    )


__all__ = ["LEVELS", "Worker", "open_worker", "resolve_level", "run_strategy"]
