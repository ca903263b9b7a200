"""coverage@k ([evaluation] coverage_k at coverage_thresholds): pass@k of thresholded continuous scores."""

from __future__ import annotations

import itertools

import pytest
from engine_world import SFT_TOML, build_world
from test_pass_k_metric import brute_force

from ade_core.config import check_against_plugins, load_config
from ade_core.engine.evaluation import evaluate
from ade_core.engine.grading.code import grade_code_fraction, score_code
from ade_core.engine.grading.pool import grade_batch
from ade_core.engine.metrics import coverage_at_ks
from ade_core.errors import ConfigError
from ade_core.plugins import load_plugins
from ade_core.specs import GraderSpec

ADD = "a, b = map(int, input().split())\nprint(a + b)\n"
TESTS = {
    "tests": [
        {"stdin": "2 3\n", "expected_stdout": "5\n"},
        {"stdin": "10 -4\n", "expected_stdout": "6\n"},
        {"stdin": "1 1\n", "expected_stdout": "3\n"},  # a wrong expectation: no program passes all three
    ]
}


def fenced(source: str) -> str:
    return f"```python\n{source}```"


def test_coverage_equals_pass_at_k_of_the_thresholded_scores():
    values = [[0.9, 0.05, None, 0.3], [0.0, 0.0, 0.0, 0.0], [0.2, 0.1, 0.1, 0.1]]
    scores = coverage_at_ks(values, [1, 2, 5], [0.1, 0.25])
    assert list(scores) == ["coverage@1>=0.1", "coverage@2>=0.1", "coverage@1>=0.25", "coverage@2>=0.25"]
    for k, t in itertools.product((1, 2), (0.1, 0.25)):
        rows = [[v is not None and v >= t for v in row] for row in values]
        assert scores[f"coverage@{k}>={t:g}"] == pytest.approx(100 * sum(brute_force(r, k) for r in rows) / 3)


def test_the_code_fraction_grader_scores_the_share_of_tests_passed():
    assert score_code(fenced(ADD), TESTS) == pytest.approx(2 / 3) and grade_code_fraction(fenced(ADD), TESTS) is False
    assert score_code("no code", TESTS) == 0.0
    two = {"tests": TESTS["tests"][:2]}
    assert score_code(fenced(ADD), two) == 1.0 and grade_code_fraction(fenced(ADD), two) is True
    grader = load_plugins().graders()["code_tests_fraction"]
    outcomes = grade_batch(grader, [(fenced(ADD), TESTS), (fenced(ADD), two), ("none", two)], workers=1)
    assert [(o.correct, o.score) for o in outcomes] == [(False, pytest.approx(2 / 3)), (True, 1.0), (False, 0.0)]
    assert load_plugins().graders()["code_tests"].score is None


def _config(tmp_path, extra: str):
    path = tmp_path / "config.toml"
    path.write_text(SFT_TOML.replace('prompt_template = "{problem}"\n', 'prompt_template = "{problem}"\n' + extra))
    return load_config(path)


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        ("coverage_k = [1]\n", "coverage_k and coverage_thresholds go together"),
        ("coverage_k = [1, 4]\ncoverage_thresholds = [0.1]\n", "coverage_k asks for k = 4, which needs 4 samples"),
        ("coverage_k = [1]\ncoverage_thresholds = [0.1, 0.1]\n", "coverage_thresholds must be distinct"),
    ],
)
def test_bad_coverage_settings_are_refused(extra, says, tmp_path):
    with pytest.raises(ConfigError, match=says):
        _config(tmp_path, extra)


def test_coverage_needs_a_grader_with_a_score(tmp_path):
    loaded = _config(tmp_path, "coverage_k = [1, 2]\ncoverage_thresholds = [0.5]\n")
    with pytest.raises(ConfigError, match="'boxed_exact' only says correct or not; use a grader with a score"):
        check_against_plugins(loaded, load_plugins())
    assert "coverage_k" not in _config(tmp_path, "").experiment.digest_body()["evaluation"]


def _length_score(response: str, reference: object) -> float:
    return (len(response) % 10) / 10


def _never(response: str, reference: object) -> bool:
    return False


def test_the_engine_reports_coverage_from_the_graders_scores(tmp_path):
    world = build_world(tmp_path)
    config = _config(world, "coverage_k = [1, 2]\ncoverage_thresholds = [0.3, 0.6]\n").experiment
    grader = GraderSpec(
        name="length", description="a score from the response's length", grade=_never, score=_length_score
    )
    rows = [{"id": f"b{i}", "problem": f"What is {i}+1?", "answer": str(i + 1)} for i in range(4)]
    result = evaluate(
        world / "model", rows, 3, config=config, grader=grader, metrics={}, seed=1, benchmark="bench", workers=1
    )
    assert result.scores is not None
    values = [[r["score"] for r in result.responses if r["problem_id"] == row["id"]] for row in rows]
    assert all(v == _length_score(r["response"], None) for r in result.responses for v in [r["score"]])
    assert result.scores == pytest.approx(coverage_at_ks(values, [1, 2], [0.3, 0.6]))
    assert set(result.scores) == {"coverage@1>=0.3", "coverage@2>=0.3", "coverage@1>=0.6", "coverage@2>=0.6"}
