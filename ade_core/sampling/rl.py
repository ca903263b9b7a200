"""RL from a trained checkpoint as an evaluation mode (seed 001, Sec 4.3): a better initialization is one
RL improves faster and further from.

GRPO trains from the checkpoint on RL problems with an RL config's ``[training.grpo]`` recipe and
``[checkpoint].every_steps``; the advantage estimator is MaxRL (binary rewards only, the seed's choice
for code) or GRPO. Every saved checkpoint, and the initialization for reference, is scored by
pass@k on a validation set (the seed: pass@8); the checkpoint with the best validation score is the
one whose test-set pass@k is reported (a tie goes to the better pass@1, then the earlier step: chosen
by ADE). The whole curve goes to ``rl.json``; run again with the same settings, it is reused.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from ade_core.sampling.samplers import SamplingError

RL_FILE = "rl.json"
Estimator = Literal["maxrl", "grpo"]
ESTIMATORS: tuple[Estimator, ...] = ("maxrl", "grpo")


@dataclass(frozen=True)
class RLConfig:
    """How to run RL from a checkpoint and pick its result."""

    estimator: Estimator
    recipe: dict[str, Any]  # the RL config's [training.grpo] (GRPORecipe fields)
    every_steps: int  # save (and validate) every N steps; the final step is always saved
    problems: str  # the RL training problems (a path)
    validation: str  # the validation problems (a path)
    validation_limit: int | None = None
    select_k: int = 8  # validation pass@k that picks the checkpoint (the seed: 8)
    samples: int = 8  # validation samples per problem (>= select_k)

    def __post_init__(self) -> None:
        if self.estimator not in ESTIMATORS:
            raise SamplingError(f"unknown RL estimator {self.estimator!r}; choose one of {list(ESTIMATORS)}")
        if self.every_steps < 1:
            raise SamplingError(f"every_steps = {self.every_steps} must be >= 1")
        if self.select_k < 1 or self.samples < self.select_k:
            raise SamplingError(
                f"choosing the RL checkpoint by validation pass@{self.select_k} needs at least {self.select_k} "
                f"samples per problem, but {self.samples} are drawn; raise --samples or lower --rl-select-k"
            )

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _grpo_config(config: Any, rl: RLConfig) -> Any:
    """``config`` with the RL recipe as its training and a checkpoint every ``every_steps``."""
    from ade_core.schemas.config import CheckpointConfig, GRPORecipe, TrainingConfig

    recipe = GRPORecipe(**{**rl.recipe, "advantage_estimator": rl.estimator})
    return config.model_copy(
        update={
            "training": TrainingConfig(paradigm="grpo", grpo=recipe),
            "checkpoint": CheckpointConfig(every_steps=rl.every_steps, include_final=True),
        }
    )


def validation_scores(
    job: Any, model: Path, problems: list[Any], rl: RLConfig, grade: Callable[[list[tuple[str, Any]]], list[bool]]
) -> dict[str, float]:
    """pass@k (k = 1 and ``select_k``) of ``model`` on the validation problems at the evaluation decoding."""
    from ade_core.engine.generation import load_generator
    from ade_core.sampling.evaluate import pass_at_ks
    from ade_core.sampling.samplers import SamplingConfig, sample_chunk

    decoding = job.config.evaluation.decoding
    sampling = SamplingConfig(
        sampler="iid",
        budget=rl.samples,
        temperature=decoding.temperature,
        top_p=decoding.top_p,
        max_new_tokens=decoding.max_new_tokens,
        seed=job.sampling.get("seed", 0),
    )
    generator = load_generator(model, job.config, job.generation)
    try:
        records = [
            record
            for index, start in enumerate(range(0, len(problems), sampling.chunk))
            for record in sample_chunk(problems[start : start + sampling.chunk], generator, sampling, index, grade)
        ]
    finally:
        generator.close()
    return pass_at_ks(records, sorted({1, rl.select_k}))


def run_rl(job: Any, out: Path) -> dict[str, Any]:
    """Train from ``job``'s model with RL, validate every checkpoint, and record the curve and the choice."""
    from ade_core.engine import data
    from ade_core.engine.grading.pool import GradingPool
    from ade_core.engine.model import EngineError
    from ade_core.engine.training.grpo import Problem as RLProblem
    from ade_core.engine.training.grpo import train_grpo
    from ade_core.plugins import load_plugins
    from ade_core.sampling.run import read_problems

    assert job.rl is not None
    rl = RLConfig(**job.rl)
    settings = {"rl": rl.to_json(), "model": job.model or job.config.model.target, "config": job.config.digest()}
    path = out / RL_FILE
    if path.is_file():
        recorded = json.loads(path.read_text(encoding="utf-8"))
        if recorded.get("settings") == settings and Path(recorded["selected"]["checkpoint"]).is_dir():
            return summary(recorded, path)  # done before: the same RL, its checkpoints still there
    grader = load_plugins().graders().get(job.config.evaluation.in_loop.grader)
    if grader is None:
        raise EngineError(f"unknown grader {job.config.evaluation.in_loop.grader!r} ([evaluation.in_loop].grader)")
    config = _grpo_config(job.config, rl)
    training = [
        RLProblem(p.problem_id, p.text, p.reference)
        for p in read_problems(job.model_copy(update={"problems": rl.problems, "limit": None}))
    ]
    validation = read_problems(job.model_copy(update={"problems": rl.validation, "limit": rl.validation_limit}))
    start = Path(job.model) if job.model else data.resolve_model(Path(job.base_dir), job.config.model.target)
    trained = train_grpo(config, start, training, out / "train", job.sampling.get("seed", 0), grader)
    with GradingPool(grader, job.grading_workers) as pool:

        def grade(pairs: list[tuple[str, Any]]) -> list[bool]:
            return [outcome.correct for outcome in pool.grade(pairs)]

        initial = validation_scores(job, start, validation, rl, grade)
        curve: list[dict[str, Any]] = [
            {
                "step": step,
                "checkpoint": str(checkpoint),
                "validation": validation_scores(job, checkpoint, validation, rl, grade),
            }
            for step, checkpoint in trained.checkpoints
        ]
    key = f"pass@{rl.select_k}"
    # ties on pass@k (common once it saturates) go to the better pass@1, then the earlier step (chosen by ADE)
    best = max(curve, key=lambda point: (point["validation"][key], point["validation"]["pass@1"], -point["step"]))
    result = {
        "settings": settings,
        "estimator": rl.estimator,
        "select": key,
        "initial": {"step": 0, "checkpoint": str(start), "validation": initial},
        "curve": curve,
        "selected": best,
        "mean_reward_by_step": [entry["reward"] for entry in trained.log if "reward" in entry],
        "rollouts": [
            {"step": r.step, "problem_id": r.problem_id, "group": r.group, "reward": r.reward, "advantage": r.advantage}
            for r in trained.rollouts
        ],
    }
    staging = path.with_suffix(".tmp")
    staging.write_text(json.dumps(result, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    staging.replace(path)
    return summary(result, path)


def summary(result: dict[str, Any], path: Path) -> dict[str, Any]:
    """What the request reports back (the rollouts stay in ``rl.json``: a result line is kept short)."""
    keys = ("estimator", "select", "initial", "curve", "selected", "mean_reward_by_step")
    return {"rl": {**{key: result[key] for key in keys}, "path": str(path)}}


__all__ = ["ESTIMATORS", "RL_FILE", "RLConfig", "run_rl", "validation_scores"]
