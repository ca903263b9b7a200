"""Harness services a strategy may await (e.g. ``judge``), answered over the RPC channel."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ade_sandbox.results import ServiceCall


@dataclass(frozen=True)
class Service:
    """A declared service: handler, per-call and total quotas, argument validation."""

    name: str
    handler: Callable[[Any], Any]
    max_calls: int = 64
    max_items_per_call: int = 256
    validate: Callable[[Any], str | None] | None = None


@dataclass
class ServiceDesk:
    """Answers service requests for one run and records every call."""

    services: dict[str, Service]
    calls: list[ServiceCall] = field(default_factory=list)
    _counts: dict[str, int] = field(default_factory=dict)

    def answer(self, name: Any, args: Any) -> dict[str, Any]:
        started = time.monotonic()
        ok, value, error = self._answer(name, args)
        self.calls.append(ServiceCall(str(name), args, ok, value, error, time.monotonic() - started))
        if ok:
            return {"type": "service_result", "ok": True, "value": value}
        return {"type": "service_result", "ok": False, "error": error}

    def _answer(self, name: Any, args: Any) -> tuple[bool, Any, str | None]:
        service = self.services.get(name) if isinstance(name, str) else None
        if service is None:
            return False, None, f"no service named {name!r}; declared: {sorted(self.services)}"
        used = self._counts.get(service.name, 0)
        if used >= service.max_calls:
            return False, None, f"service {service.name!r} quota of {service.max_calls} calls is used up"
        self._counts[service.name] = used + 1
        if isinstance(args, list) and len(args) > service.max_items_per_call:
            return (
                False,
                None,
                (
                    f"service {service.name!r} takes at most {service.max_items_per_call} items per call, "
                    f"got {len(args)}"
                ),
            )
        if service.validate is not None:
            problem = service.validate(args)
            if problem:
                return False, None, f"invalid arguments for {service.name!r}: {problem}"
        try:
            return True, service.handler(args), None
        except Exception as exc:  # a failing service is reported to the strategy, not raised here
            return False, None, f"service {service.name!r} failed: {type(exc).__name__}: {exc}"
