"""ade-sandbox: runs untrusted strategy code outside the harness process (standard library only).

Entry points: ``run_strategy`` for one call, ``open_worker`` for many calls on one load,
``run_program`` for code graders, ``probe`` for what this machine can enforce.
"""

from ade_sandbox.limits import LEVELS, IsolationUnavailable, Limits, SandboxError
from ade_sandbox.probe import probe
from ade_sandbox.results import STATUSES, SandboxResult, ServiceCall
from ade_sandbox.runner import Worker, open_worker, resolve_level, run_strategy
from ade_sandbox.services import INVALID_SERVICE_REQUEST, InvalidServiceRequest, Service
from ade_sandbox.static_check import EntrySpec, Violation, check_source

__version__ = "0.1.0"

__all__ = [
    "INVALID_SERVICE_REQUEST",
    "LEVELS",
    "STATUSES",
    "EntrySpec",
    "InvalidServiceRequest",
    "IsolationUnavailable",
    "Limits",
    "SandboxError",
    "SandboxResult",
    "Service",
    "ServiceCall",
    "Violation",
    "Worker",
    "check_source",
    "open_worker",
    "probe",
    "resolve_level",
    "run_strategy",
]
