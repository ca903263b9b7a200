"""A dry run's simulated scores keep each metric's meaning and follow the configuration.

Every simulated score is a task metric computed on a simulated correctness matrix, so what the
metric definitions imply holds whatever the task's metric order: Average@K <= Pass@K for RFT
tasks (which rank Average@K first) as for SFT tasks; and two configs that differ in one value
score differently.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from harness_world import ROOT, dry_run, models

from ade_core import StrategyFamily, hookimpl
from ade_core.config import load_config
from ade_core.engine.package import open_package
from ade_core.harness.heldout import HeldOutStore, heldout_per_trial
from ade_core.plugins import Candidate, load_plugins
from ade_core.schemas.trial import PackageRef

REWARD_CONFIG = ROOT / "examples" / "tiny-reward-design.toml"
DATA_CONFIG = ROOT / "examples" / "tiny-data-selection.toml"
SMALL = ["budget.coordinators=1", "budget.plans_per_coordinator=2"]

# The offline Builder renders catalog families; reward_design ships none, so the test brings one
# (a collecting hook: any plugin may add families to any task).
FLOOR_TEMPLATE = """
def _result(score, outcome_score):
    return {
        "schema_version": "ade.reward_result.v2",
        "score": score,
        "outcome_score": outcome_score,
        "artifact_projection": None,
        "rule_evidence": {"status": "not_configured", "value": None},
    }


async def compute_score(question_prompt, response_content, extracted_answer, outcome_score,
                        response_length_tokens, max_response_length_tokens):
    return _result($floor + (1.0 - $floor) * float(outcome_score), outcome_score)


def compute_fallback_score(question_prompt, response_content, extracted_answer, outcome_score,
                           response_length_tokens, max_response_length_tokens):
    return _result(float(outcome_score), outcome_score)
"""


class RewardCatalog:
    """A one-family strategy catalog for reward_design, for the offline Builder."""

    @hookimpl
    def ade_strategy_catalog(self, task: str) -> list[StrategyFamily]:
        if task != "reward_design":
            return []
        family = StrategyFamily(
            name="outcome_floor",
            task=task,
            description="Outcome reward with a floor for wrong answers.",
            targets=("sparse reward",),
            template=FLOOR_TEMPLATE,
            parameters={"floor": (0.0, 0.1, 0.2)},
        )
        return [family]


def _pairs(scores: dict[str, float] | None) -> list[tuple[float, float]]:
    return [(scores["average_at_k"], scores["pass_at_k"])] if scores else []


@pytest.fixture(scope="module")
def reward_run(tmp_path_factory) -> Path:
    registry = load_plugins(extra=[Candidate("test-reward-catalog", RewardCatalog(), "test-reward-catalog", "0")])
    run_dir = tmp_path_factory.mktemp("reward") / "run"
    assert dry_run(run_dir, load_config(REWARD_CONFIG, SMALL), registry=registry) == "completed"
    heldout_per_trial(run_dir, final=True)  # as `ade run` does after final selection
    return run_dir


def test_a_reward_design_dry_run_keeps_average_at_k_at_most_pass_at_k(reward_run):
    (record,) = models(reward_run, "run")
    trials = models(reward_run, "trial")
    pairs = _pairs(record.base_model)
    for trial in trials:
        pairs += _pairs(trial.scores if isinstance(trial.scores, dict) else None)
        if isinstance(trial.package, PackageRef):  # the online scores of each checkpoint
            pairs += [_pairs(c.scores)[0] for c in open_package(Path(trial.package.path)).manifest.checkpoints]
    for evaluation in HeldOutStore(reward_run).evaluations():
        pairs += _pairs(evaluation.macro_avg)  # type: ignore[arg-type]
        for bench in evaluation.benchmarks:
            pairs += _pairs(bench.scores)
    # base + 3 Trials, each with 3 checkpoints; 3 held-out evaluations of 4 benchmarks and their macro average
    assert len(pairs) >= 1 + 3 * 4 + 3 * 5
    assert all(average <= pass_ for average, pass_ in pairs), pairs


def test_two_configs_that_differ_in_one_value_get_different_simulated_scores(tmp_path):
    scores = []
    for learning_rate in ("5e-4", "4e-4"):
        run_dir = tmp_path / learning_rate
        assert dry_run(run_dir, load_config(DATA_CONFIG, [*SMALL, f"training.sft.learning_rate={learning_rate}"]))
        (record,) = models(run_dir, "run")
        trials = sorted(models(run_dir, "trial"), key=lambda t: t.trial_id)
        scores.append((record.base_model, [(t.trial_id, t.scores) for t in trials]))
    (base_a, trials_a), (base_b, trials_b) = scores
    assert base_a != base_b
    assert [t for t, _ in trials_a] == [t for t, _ in trials_b]  # the same Trials ...
    assert all(a != b for (_, a), (_, b) in zip(trials_a, trials_b, strict=True))  # ... each scored differently
