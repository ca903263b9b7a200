"""The Engine requests the Harness submits, one builder per kind, and how their results are read back.

The builders fix each kind's ``ade`` command and its resources; any executor runs them. The
Harness imports this module and ``executors.base``, never a concrete executor.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

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
    job: EngineJob, checkpoint: Path, directory: Path, resources: ResourceConfig, request_id: str
) -> EngineRequest:
    """A held-out evaluation of one frozen checkpoint (operator tier; never beside in-loop work).

    On CPU each evaluation takes one core and one thread: a small model decodes faster as several
    one-thread processes than as one many-thread process. On CUDA it takes the per-attempt share.
    """
    share = Resources(cpus=1, threads=1) if resources.device == "cpu" else Resources()
    return EngineRequest(
        kind="heldout",
        request_id=request_id,
        command=("engine", "heldout-score", JOB_PLACEHOLDER, "--checkpoint", str(checkpoint), "--out", DIR_PLACEHOLDER),
        directory=directory,
        job=job,
        resources=share,
        lease=Lease(stall_after_s=None),
    )


def read_scored(outcome: AttemptOutcome) -> dict[str, Any]:
    """The held-out scores a succeeded ``heldout`` request wrote (its result names the file)."""
    assert outcome.result is not None, "only a succeeded heldout request has scores"
    scored: dict[str, Any] = json.loads(Path(outcome.result["scored"]).read_text(encoding="utf-8"))
    return scored
