"""The Engine's input: a bound command with its frozen configuration, for one attempt."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, TypeVar

from pydantic import Field, ValidationError

from ade_core.config import check_generation
from ade_core.engine.model import EngineError
from ade_core.schemas.artifact import BoundCommand
from ade_core.schemas.common import Model
from ade_core.schemas.config import ExperimentConfig, GenerationSettings

M = TypeVar("M", bound=Model)


class EngineJob(Model):
    """Everything ``ade engine run`` needs: x = Bind(z; 𝓑) plus 𝓑 itself, and attempt identity."""

    trial_id: str = Field(description="Logical Trial.")
    attempt_id: str = Field(description="This physical attempt.")
    command: BoundCommand = Field(description="The frozen command.")
    config: ExperimentConfig = Field(description="𝓑, whose digest must equal command.config_digest.")
    held_out_digest: str | None = Field(
        default=None,
        description="Set when ``config`` is the search-side copy of 𝓑 (no held-out benchmarks, Sec 3.4): the "
        "digest of the held-out suite left out, so that the digest check still covers the whole of 𝓑.",
    )
    base_dir: str = Field(description="Directory that relative paths in the config resolve against.")
    generation: GenerationSettings = Field(
        default_factory=GenerationSettings,
        description="[operational.generation]: where the generation servers are (𝓑 names the backend).",
    )
    grading_workers: int = Field(default=2, ge=1, description="Grader processes.")
    harness_records: dict[str, list[dict[str, Any]]] = Field(
        default_factory=dict,
        description="Records the Harness contributes to the package (e.g. executed_strategy), written verbatim; "
        "each family must be declared in the task's package schema.",
    )

    def check(self) -> None:
        """Refuse a command whose frozen configuration does not match its digest (paper Sec 3.2)."""
        if self.held_out_digest is not None and self.config.evaluation.held_out:
            raise EngineError(
                "an Engine job with held_out_digest must carry the search-side config (no [[evaluation.held_out]]); "
                "build it with config.for_search()"
            )
        digest = self.config.digest(self.held_out_digest)
        if digest != self.command.config_digest:
            raise EngineError(
                f"config digest {digest} does not match the command's {self.command.config_digest}; "
                "the command was bound to a different configuration"
            )
        if self.command.task != self.config.task:
            raise EngineError(f"command task {self.command.task!r} differs from config task {self.config.task!r}")
        check_generation(self.config, self.generation)


def read_job_file(model: type[M], path: Path, missing: str, invalid: str) -> M:
    """A job file's model; a typed EngineError naming ``missing`` (no file) or ``invalid`` (bad JSON or fields)."""
    try:
        return model.model_validate(json.loads(Path(path).read_text(encoding="utf-8")))
    except FileNotFoundError:
        raise EngineError(f"{missing} not found: {path}") from None
    except (ValueError, ValidationError) as exc:
        raise EngineError(f"{path}: not a valid {invalid}: {exc}") from None


def load_job(path: Path) -> EngineJob:
    job = read_job_file(EngineJob, path, "command file", "engine command")
    job.check()
    return job


class HeldOutItem(Model):
    """One frozen checkpoint to score on the held-out suite, with the job whose configuration names it."""

    job: EngineJob
    checkpoint: str


class HeldOutBatch(Model):
    """Checkpoints one ``heldout`` request scores in turn, in one process (torch and the plugins load once)."""

    items: list[HeldOutItem] = Field(min_length=1)


def load_heldout_batch(path: Path) -> HeldOutBatch:
    """The batch a held-out request's job file holds; a typed EngineError for a missing or malformed file."""
    batch = read_job_file(HeldOutBatch, path, "held-out batch file", "held-out batch")
    for item in batch.items:
        item.job.check()
    return batch
