"""The Engine requests the Harness submits, one builder per kind, and how their results are read back.

The builders fix each kind's ``ade`` command and its resources; any executor runs them. The
Harness imports this module and ``executors.base``, never a concrete executor.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from ade_core.engine.job import HeldOutBatch, HeldOutItem
from ade_core.executors.base import DIR_PLACEHOLDER, JOB_PLACEHOLDER, AttemptOutcome, EngineRequest, Lease, Resources
from ade_core.schemas.config import ResourceConfig

if TYPE_CHECKING:
    from ade_core.engine.baseline import BaseEvaluationJob
    from ade_core.engine.job import EngineJob

SCORED_FILE = "heldout-scores.json"


def attempt_request(
    job: EngineJob, directory: Path, *, reference: bool = False, lease: Lease | None = None
) -> EngineRequest:
    """One attempt of a Trial's frozen command (``reference``: the generic reference's Trial)."""
    return EngineRequest(
        kind="reference" if reference else "attempt",
        request_id=job.attempt_id,
        command=("engine", "run", JOB_PLACEHOLDER, "--out", DIR_PLACEHOLDER),
        directory=directory,
        job=job,
        lease=lease or Lease(),
    )


def base_eval_request(job: BaseEvaluationJob, directory: Path, request_id: str = "base-model") -> EngineRequest:
    """The untrained target model's in-loop evaluation (scored exactly as a selected checkpoint)."""
    return EngineRequest(
        kind="base_eval",
        request_id=request_id,
        command=("engine", "base-eval", JOB_PLACEHOLDER),
        directory=directory,
        job=job,
        lease=Lease(stall_after_s=None),
    )


def heldout_request(
    items: Sequence[tuple[EngineJob, Path]], directory: Path, resources: ResourceConfig, request_id: str
) -> EngineRequest:
    """A held-out evaluation of frozen checkpoints, scored in turn by one process (operator tier; never
    beside in-loop work). ``items`` pairs each checkpoint with the job whose configuration names its suite.

    On CPU the request takes one core and one thread: a small model decodes faster as several
    one-thread processes than as one many-thread process (``heldout_share``).
    """
    batch = HeldOutBatch(items=[HeldOutItem(job=job, checkpoint=str(checkpoint)) for job, checkpoint in items])
    return EngineRequest(
        kind="heldout",
        request_id=request_id,
        command=("engine", "heldout-score", JOB_PLACEHOLDER, "--out", DIR_PLACEHOLDER),
        directory=directory,
        job=batch,
        resources=heldout_share(resources),
        lease=Lease(stall_after_s=None),
    )


def sampling_request(job: BaseModel, directory: Path, request_id: str = "sampling") -> EngineRequest:
    """A sampling run (``ade sample``): its records and filtered dataset go to ``directory``, which it resumes."""
    return EngineRequest(
        kind="sampling",
        request_id=request_id,
        command=("engine", "sample", JOB_PLACEHOLDER, "--out", DIR_PLACEHOLDER),
        directory=directory,
        job=job,
        lease=Lease(stall_after_s=None),
    )


def heldout_share(resources: ResourceConfig) -> Resources:
    """What one held-out request declares (one core and one thread on CPU, the per-attempt share on CUDA)."""
    return Resources(cpus=1, threads=1) if resources.device == "cpu" else Resources()


def scored_path(directory: Path, index: int) -> Path:
    """Where a held-out request writes the scores of its ``index``-th checkpoint."""
    return Path(directory) / f"{index:04d}-{SCORED_FILE}"


def read_scored(outcome: AttemptOutcome) -> list[dict[str, Any]]:
    """The held-out scores a succeeded ``heldout`` request wrote, one per checkpoint in its batch's order."""
    assert outcome.result is not None, "only a succeeded heldout request has scores"
    return [json.loads(Path(path).read_text(encoding="utf-8")) for path in outcome.result["scored"]]
