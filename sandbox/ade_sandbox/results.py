"""Typed results of sandboxed runs."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal, get_args

Status = Literal[
    "ok", "timeout", "cpu_timeout", "oom", "output_limit", "crash", "exception", "bad_output", "policy_violation"
]
STATUSES: tuple[str, ...] = get_args(Status)


@dataclass(frozen=True)
class ServiceCall:
    """One call a strategy made to a harness service, as the harness answered it."""

    name: str
    args: Any
    ok: bool
    value: Any = None
    error: str | None = None
    seconds: float = 0.0


@dataclass(frozen=True)
class SandboxResult:
    """Outcome of one strategy call (or program run) in the sandbox."""

    status: Status
    value: Any = None
    error: str | None = None
    traceback: str | None = None
    stdout: str = ""
    stderr: str = ""
    wall_s: float = 0.0
    cpu_s: float | None = None
    peak_memory_mb: float | None = None
    isolation: str = "process"
    exit_code: int | None = None
    service_calls: tuple[ServiceCall, ...] = field(default_factory=tuple)
    refused_calls: int = 0  # service requests of this call answered with an error (only a run's first 64 are recorded)

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["service_calls"] = [asdict(c) for c in self.service_calls]
        return data
