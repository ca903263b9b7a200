"""Bootstrap's base-model evaluation with the real Engine, in a subprocess (the controller never imports torch).

Outside dry runs the untrained target model is scored by ``ade engine base-eval`` exactly as a
Trial's selected checkpoint is scored (in-loop benchmark, K_offline, 𝓑's evaluation seed). It
runs before the bootstrap Trial, when no Engine attempt holds a slot. A failure is recorded as an
unavailable base score with its reason, never a traceback that stops the run.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Callable, Coroutine, Mapping
from pathlib import Path
from typing import Any

from ade_core.engine.baseline import BaseEvaluationJob
from ade_core.executors.interpreter import python_command
from ade_core.schemas.config import ExperimentConfig, GenerationSettings
from ade_core.schemas.trial import Unavailable

BASE_DIR_NAME = "base-model"  # under <run>/attempts/
_TAIL = 600


def engine_base_evaluator(
    config: ExperimentConfig,
    base_dir: str,
    run_dir: Path,
    *,
    generation: GenerationSettings | None = None,
    python: str = sys.executable,
    env: Mapping[str, str] | None = None,
) -> Callable[[], Coroutine[Any, Any, dict[str, float] | Unavailable]]:
    """An awaitable that scores the base model with ``ade engine base-eval`` and returns its in-loop scores
    (``generation``: [operational.generation], where its generation servers are)."""

    async def evaluate() -> dict[str, float] | Unavailable:
        directory = run_dir / "attempts" / BASE_DIR_NAME
        directory.mkdir(parents=True, exist_ok=True)
        job_file = directory / "job.json"
        job_file.write_text(BaseEvaluationJob.of(config, base_dir, generation).model_dump_json(), encoding="utf-8")
        stderr_path = directory / "engine.stderr.log"
        with open(stderr_path, "wb") as stderr:
            process = await asyncio.create_subprocess_exec(
                *python_command("-m", "ade_core.cli", "engine", "base-eval", str(job_file), python=python),
                stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=stderr,
                env={**os.environ, **(env or {})},
            )  # fmt: skip
            out, _ = await process.communicate()
        (directory / "engine.stdout.log").write_bytes(out)
        if process.returncode != 0:
            tail = stderr_path.read_bytes()[-_TAIL:].decode("utf-8", errors="replace").strip()
            return Unavailable(reason=f"the base-model evaluation failed (exit {process.returncode}): {tail}")
        try:
            result = json.loads(out.decode("utf-8").strip().splitlines()[-1])
        except (ValueError, IndexError):
            return Unavailable(reason="the base-model evaluation printed no result")
        if result.get("scores") is None:
            return Unavailable(reason=f"the base-model evaluation is missing: {result.get('missing_reason')}")
        return {str(k): float(v) for k, v in result["scores"].items()}

    return evaluate
