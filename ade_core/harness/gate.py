"""The strategy gate: admission, realization and Bind as the Trial runner sees them.

``PipelineGate`` is the real pipeline of ``ade_core.harness.admission`` (sandbox runs in a
worker thread so other Coordinators keep going). The dry run swaps in
``ade_core.harness.simulated.DryRunGate``, which keeps the static check and simulates the rest.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from ade_core.harness.admission import AdmissionResult, Realization, RealizationError, admit, bind, realize
from ade_core.plugins import TaskHandle
from ade_core.schemas.artifact import BoundCommand
from ade_core.schemas.config import ExperimentConfig
from ade_core.specs import TaskInputs

__all__ = ["PipelineGate", "RealizationError", "StrategyGate", "research_record"]


class StrategyGate(Protocol):
    """Admit a strategy on development inputs, realize it on the frozen inputs, bind it to 𝓑."""

    async def admit(
        self,
        source: str,
        *,
        reference: bool = False,
        reference_rollouts: Sequence[Mapping[str, Any]] | None = None,
    ) -> AdmissionResult:
        """Run every admission check; never raises for a bad strategy. ``reference_rollouts``: the
        generic reference Trial's recorded rollouts, for replay probes (None until it has run)."""
        ...

    async def realize(
        self, source: str, declared: Sequence[Mapping[str, Any]], reference_outputs: Sequence[Any] | None = None
    ) -> Realization:
        """Realize on the frozen inputs; raises ``RealizationError`` when there is nothing to bind.

        Given the generic reference's realized outputs, the realization says whether it duplicates them."""
        ...

    def bind(self, realization: Realization, source: str) -> BoundCommand:
        """Bind(realization; 𝓑)."""
        ...

    def frozen_inputs(self) -> TaskInputs | None:
        """The frozen task inputs, whose statistics and sample rows the Builder's view shows; None
        where the gate does not read them (the dry run keeps its controller free of the Engine)."""
        ...


class PipelineGate:
    """The real admission pipeline (sandbox, validation, probes, realization check)."""

    def __init__(self, task: TaskHandle, config: ExperimentConfig, base_dir: str, min_isolation: str):
        self.task, self.config, self.base_dir, self.min_isolation = task, config, base_dir, min_isolation

    async def admit(
        self,
        source: str,
        *,
        reference: bool = False,
        reference_rollouts: Sequence[Mapping[str, Any]] | None = None,
    ) -> AdmissionResult:
        return await asyncio.to_thread(
            admit,
            source,
            self.task,
            self.config,
            min_isolation=self.min_isolation,
            probes=not reference,
            reference_rollouts=reference_rollouts,
            base_dir=self.base_dir,
        )

    def frozen_inputs(self) -> TaskInputs | None:
        return self.task.task_inputs(self.config, self.base_dir)

    async def realize(
        self, source: str, declared: Sequence[Mapping[str, Any]], reference_outputs: Sequence[Any] | None = None
    ) -> Realization:
        return await asyncio.to_thread(
            realize,
            source,
            self.task,
            self.config,
            base_dir=self.base_dir,
            declared=declared,
            min_isolation=self.min_isolation,
            reference_outputs=reference_outputs,
        )

    def bind(self, realization: Realization, source: str) -> BoundCommand:
        return bind(realization, self.task, source, self.config)


_TIMING_FIELDS = frozenset({"seconds", "wall_s", "cpu_s", "peak_memory_mb"})


def research_record(value: Any) -> Any:
    """A realization or admission record without its timings: the part that is research evidence.

    Timings differ between two executions of the same strategy; the record the Trial keeps (and
    the state digest covers) must not.
    """
    if isinstance(value, dict):
        return {k: research_record(v) for k, v in value.items() if k not in _TIMING_FIELDS}
    if isinstance(value, list):
        return [research_record(v) for v in value]
    return value
