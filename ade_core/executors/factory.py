"""The executor a Run uses, chosen by ``[operational.executor].kind`` (the simulated Engine for dry runs).

The Harness asks this module for an executor and talks to it only through the protocol in
``executors.base``; the concrete executors are imported here and nowhere in the Harness.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ade_core.errors import ExecutorError
from ade_core.executors.base import Executor, Lease, Resources
from ade_core.schemas.config import ResourceConfig
from ade_core.schemas.operational import ExecutorSettings

if TYPE_CHECKING:
    from ade_core.plugins import TaskHandle


@dataclass(frozen=True)
class Simulation:
    """What the dry run's simulated Engine needs: the task, the virtual clock and the scripted behaviour."""

    task: TaskHandle
    clock: Any
    engine_seconds: float = 600.0
    failures: Mapping[str, Sequence[str]] = field(default_factory=dict)
    missing_evaluation: frozenset[str] = frozenset()
    slots: int | None = None


def make_executor(
    settings: ExecutorSettings, resources: ResourceConfig, *, simulation: Simulation | None = None
) -> Executor:
    """The executor ``settings`` name, laid out for ``resources`` (the simulated one when ``simulation`` is given)."""
    if simulation is not None:
        from ade_core.executors.simulated import SimulatedExecutor

        return SimulatedExecutor(
            simulation.task,
            simulation.clock,
            engine_seconds=simulation.engine_seconds,
            failures=simulation.failures,
            missing_evaluation=simulation.missing_evaluation,
            slots=simulation.slots,
        )
    if settings.kind == "local":
        from ade_core.executors.local import LocalExecutor
        from ade_core.executors.slots import slots_from_resources

        layout = slots_from_resources(resources)
        first = layout[0]
        share = Resources(cpus=len(first.cpus) or None, threads=resources.cpu_threads, gpus=len(first.gpus))
        # The cores bound how many attempts run at once (each takes its share); a held-out request takes one core.
        return LocalExecutor(share=share, max_running=settings.slots, custom=settings.custom)
    if settings.kind == "ray":
        from ade_core.executors.ray import RayExecutor

        return RayExecutor(
            settings.address,
            share=ray_share(resources),
            max_running=settings.slots,
            pending_timeout_s=settings.pending_timeout_s,
        )
    raise ExecutorError(f"unknown executor kind {settings.kind!r}; known: 'local', 'ray'")


def ray_share(resources: ResourceConfig) -> Resources:
    """The per-attempt share on a Ray cluster: ``cpu_threads`` CPUs (unset: every CPU of the largest node, as
    the local executor gives every core of its machine), and ``max(train_gpus, eval_gpus, 1)`` GPUs on CUDA."""
    gpus = max(resources.train_gpus, resources.eval_gpus, 1) if resources.device == "cuda" else 0
    return Resources(cpus=resources.cpu_threads, threads=resources.cpu_threads, gpus=gpus)


def attempt_lease(settings: ExecutorSettings) -> Lease:
    """The lease of an Engine attempt under ``settings``: killed as stalled after ``stall_after_s`` without beats."""
    return Lease(stall_after_s=settings.stall_after_s)
