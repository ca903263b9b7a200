"""Harness services a strategy may await (e.g. ``judge``), answered over the RPC channel.

Every request of a run goes to one ``ServiceLedger``: the calls made while the module loads
(a strategy can write raw service frames at import time) and those of every later call of a
worker, across restarts. Quotas are per run and per service. Arguments are counted by the
service's declared shape (``takes``): a service that takes a list gets a list of at most
``max_items_per_call`` requests, and anything else is a refusal before the handler sees it.

A refusal, a failing validator or handler and an answer that is not strict JSON all reach
the strategy as ``ServiceError``; none raises in the parent. Refused calls are counted; only
the first ``STORED_REFUSALS`` of a run are recorded, and a run that reaches
``REFUSALS_BEFORE_STOP`` is stopped (``policy_violation``) instead of spinning the harness.

A malformed request is the strategy's error, not a service that is down: a handler raises
``InvalidServiceRequest(field, fix)`` (and an argument of the wrong shape is one too), the call
is refused with ``invalid_service_request: <field>: <fix>``, and that refusal is always recorded
(at most ``max_calls`` of them per service), so the Harness fails the run even when the strategy
catches the ``ServiceError``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from ade_sandbox.channel import encode
from ade_sandbox.limits import SandboxError
from ade_sandbox.results import ServiceCall

Takes = Literal["list", "object", "any"]
TAKES: tuple[str, ...] = get_args(Takes)

INVALID_SERVICE_REQUEST = "invalid_service_request"  # how a refusal for a malformed request begins
STORED_REFUSALS = 64  # refused calls recorded per run; later ones are only counted
REFUSALS_BEFORE_STOP = 1024  # refused calls after which the run is stopped


class InvalidServiceRequest(Exception):
    """A handler's verdict that a request is malformed: which field, and how to fix it."""

    def __init__(self, field: str, fix: str) -> None:
        super().__init__(f"{INVALID_SERVICE_REQUEST}: {field}: {fix}")
        self.field = field
        self.fix = fix


@dataclass(frozen=True)
class Service:
    """A declared service: handler, quotas per run, the argument's shape, optional validation.

    ``takes="list"`` (the default, as ADE's ``ServiceSpec`` handlers take a list of requests)
    admits a list of at most ``max_items_per_call`` items; ``"object"`` a JSON object of at most
    that many keys; ``"any"`` any JSON value, a list or object counted by its length.

    A service with a ``signature`` is not passed to entry points: it is a global of the strategy
    module, set before the module runs, awaited as ``await name(*signature)`` (positional or by
    keyword). Its handler gets one JSON object keyed by exactly those parameter names.
    """

    name: str
    handler: Callable[[Any], Any]
    max_calls: int = 64
    max_items_per_call: int = 256
    validate: Callable[[Any], str | None] | None = None
    takes: Takes = "list"
    signature: tuple[str, ...] = ()

    @property
    def injected(self) -> bool:
        """Whether the service is a module global (it has a signature) rather than an argument."""
        return bool(self.signature)

    def __post_init__(self) -> None:
        if self.signature:
            if not all(isinstance(n, str) and n.isidentifier() for n in self.signature):
                raise SandboxError(f"service {self.name!r}: signature must be parameter names (got {self.signature!r})")
            if len(set(self.signature)) != len(self.signature):
                raise SandboxError(f"service {self.name!r}: signature repeats a name: {self.signature!r}")
            object.__setattr__(self, "takes", "object")
        if self.takes not in TAKES:
            raise SandboxError(f"service {self.name!r}: takes must be one of {', '.join(TAKES)} (got {self.takes!r})")
        if self.max_calls < 1 or self.max_items_per_call < 1:
            raise SandboxError(
                f"service {self.name!r}: max_calls and max_items_per_call must be >= 1 "
                f"(got {self.max_calls}, {self.max_items_per_call})"
            )


_JSON_TYPES = {list: "list", dict: "object", str: "string", bool: "boolean", int: "number", float: "number"}


def _json_type(value: Any) -> str:
    return "null" if value is None else _JSON_TYPES.get(type(value), type(value).__name__)


def _call_form(service: Service) -> str:
    if service.signature:
        return f"await {service.name}({', '.join(service.signature)})"
    return f"await {service.name}(requests)"


def _shape_problem(service: Service, args: Any) -> str | None:
    """Why ``args`` does not fit the service's declared shape and item cap, or None."""
    if service.signature:
        keys = sorted(args) if isinstance(args, dict) else None
        if keys != sorted(service.signature):
            return (
                f"{INVALID_SERVICE_REQUEST}: arguments: {service.name!r} takes exactly "
                f"({', '.join(service.signature)}); call `{_call_form(service)}`"
            )
    if service.takes == "list" and not isinstance(args, list):
        return (
            f"{INVALID_SERVICE_REQUEST}: requests: {service.name!r} expected a list of requests, got a JSON "
            f"{_json_type(args)}; pass one list, e.g. {service.name}([request, ...])"
        )
    if service.takes == "object" and not isinstance(args, dict):
        return (
            f"{INVALID_SERVICE_REQUEST}: request: {service.name!r} expected a JSON object, got a JSON "
            f"{_json_type(args)}; pass one object"
        )
    items = len(args) if isinstance(args, (list, dict)) else 1
    if items > service.max_items_per_call:
        return f"service {service.name!r} takes at most {service.max_items_per_call} items per call, got {items}"
    return None


@dataclass
class ServiceLedger:
    """Answers and records the service requests of one run (a worker's life, load time included)."""

    services: Mapping[str, Service]
    calls: list[ServiceCall] = field(default_factory=list)
    refused: int = 0  # requests answered with an error, recorded or not
    _used: dict[str, int] = field(default_factory=dict)

    def mark(self) -> tuple[int, int]:
        """Where the record stands, to slice out what one call added."""
        return len(self.calls), self.refused

    @property
    def exhausted(self) -> bool:
        """The run made so many refused calls that it is stopped."""
        return self.refused >= REFUSALS_BEFORE_STOP

    def answer(self, name: Any, args: Any, arity: Any = 1) -> bytes:
        """The encoded ``service_result`` for one request; the request is counted and recorded.
        ``arity`` is 1 when the strategy's arguments fit the service (one positional argument, or
        a global service's signature), else how many it passed."""
        started = time.monotonic()
        error: str | None
        if arity != 1:
            ok, value = False, None
            service = self.services.get(name) if isinstance(name, str) else None
            if service is not None and service.signature:
                expected = f"exactly ({', '.join(service.signature)})"
            else:
                expected = "exactly one positional argument, the list of requests"
            form = _call_form(service) if service is not None else f"await {str(name)[:200]}(requests)"
            error = (
                f"{INVALID_SERVICE_REQUEST}: arguments: {str(name)[:200]!r} takes {expected} "
                f"(got {arity!r} arguments); call `{form}`"
            )
        else:
            ok, value, error = self._answer(name, args)
        reply = None
        if ok:
            try:
                reply = encode({"type": "service_result", "ok": True, "value": value})
            except (TypeError, ValueError, RecursionError) as exc:
                error = f"service {name!r} answered with a value that is not strict JSON: {exc}"[:2000]
                ok, value = False, None
        if reply is None:
            reply = encode({"type": "service_result", "ok": False, "error": error})
        self._record(ServiceCall(str(name)[:200], args, ok, value, error, time.monotonic() - started))
        return reply

    def _record(self, call: ServiceCall) -> None:
        if not call.ok:
            self.refused += 1
            malformed = (call.error or "").startswith(INVALID_SERVICE_REQUEST)
            if self.refused > STORED_REFUSALS and not malformed:  # the Harness must see every malformed one
                return
        self.calls.append(call)

    def _answer(self, name: Any, args: Any) -> tuple[bool, Any, str | None]:
        service = self.services.get(name) if isinstance(name, str) else None
        if service is None:
            return False, None, f"no service named {str(name)[:200]!r}; declared: {sorted(self.services)}"
        used = self._used.get(service.name, 0)
        if used >= service.max_calls:
            return False, None, f"service {service.name!r} quota of {service.max_calls} calls per run is used up"
        self._used[service.name] = used + 1
        problem = _shape_problem(service, args)
        if problem is None and service.validate is not None:
            try:
                found = service.validate(args)
            except Exception as exc:  # a broken validator refuses the call; it never raises here
                found = f"the validator failed: {type(exc).__name__}: {exc}"[:2000]
            problem = f"invalid arguments for {service.name!r}: {found}" if found else None
        if problem is not None:
            return False, None, problem
        try:
            return True, service.handler(args), None
        except InvalidServiceRequest as exc:  # the strategy's error: named field and fix
            return False, None, str(exc)[:2000]
        except Exception as exc:  # a failing service is reported to the strategy, not raised here
            return False, None, f"service {service.name!r} failed: {type(exc).__name__}: {exc}"[:2000]
