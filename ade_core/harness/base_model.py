"""Bootstrap's base-model evaluation, submitted to the executor like every Engine run (the controller never
imports torch).

Outside dry runs the untrained target model is scored by ``ade engine base-eval`` exactly as a
Trial's selected checkpoint is scored (in-loop benchmark, K_offline, 𝓑's evaluation seed); dry runs
get the simulated Engine's answer through the same request. It runs before the bootstrap Trial. A
failure is recorded as an unavailable base score with its reason, never a traceback that stops the run.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

from ade_core.engine.baseline import BaseEvaluationJob
from ade_core.executors.base import Executor, run
from ade_core.executors.requests import base_eval_request
from ade_core.schemas.config import ExperimentConfig, GenerationSettings
from ade_core.schemas.trial import Unavailable

BASE_DIR_NAME = "base-model"  # under <run>/attempts/


def engine_base_evaluator(
    executor: Executor,
    config: ExperimentConfig,
    base_dir: str,
    run_dir: Path,
    *,
    generation: GenerationSettings | None = None,
) -> Callable[[], Coroutine[Any, Any, dict[str, float] | Unavailable]]:
    """An awaitable that scores the base model through ``executor`` and returns its in-loop scores
    (``generation``: [operational.generation], where its generation servers are). Each call is a fresh
    request (``base-model``, then ``base-model.2``, ...) in ``run_dir/attempts/base-model``."""
    calls = 0

    async def evaluate() -> dict[str, float] | Unavailable:
        nonlocal calls
        calls += 1
        request_id = BASE_DIR_NAME if calls == 1 else f"{BASE_DIR_NAME}.{calls}"
        job = BaseEvaluationJob.of(config, base_dir, generation)
        directory = run_dir / "attempts" / BASE_DIR_NAME
        executor.recover(request_id, directory)  # a dead controller's evaluation must not run beside this one
        outcome = await run(executor, base_eval_request(job, directory, request_id))
        if outcome.status != "succeeded" or outcome.result is None:
            return Unavailable(reason=f"the base-model evaluation failed ({outcome.failure}): {outcome.detail[-600:]}")
        if outcome.result.get("scores") is None:
            return Unavailable(reason=f"the base-model evaluation is missing: {outcome.result.get('missing_reason')}")
        return {str(k): float(v) for k, v in outcome.result["scores"].items()}

    return evaluate
