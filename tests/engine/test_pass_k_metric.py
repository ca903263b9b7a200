"""``[evaluation].pass_k``: unbiased pass@k for a set of k as an evaluation metric of any task."""

from __future__ import annotations

import itertools

import pytest
from engine_world import SFT_TOML, build_world, make_job, sft_job

from ade_core.config import load_config
from ade_core.engine.attempt import run_attempt
from ade_core.engine.heldout import score_heldout
from ade_core.engine.metrics import average_at_k, unbiased_pass_at_ks
from ade_core.engine.package import open_package
from ade_core.errors import ConfigError
from ade_core.plugins import load_plugins


def brute_force(row: list[bool], k: int) -> float:
    """The share of k-subsets of the samples holding a correct one."""
    subsets = list(itertools.combinations(row, k))
    return sum(any(subset) for subset in subsets) / len(subsets)


def test_unbiased_pass_at_ks_equals_enumeration_and_skips_k_above_the_samples():
    matrix = [[True, False, False, True, False], [False] * 5, [True] * 5, [False, False, False, False, True]]
    scores = unbiased_pass_at_ks(matrix, [4, 1, 2, 6])
    assert list(scores) == ["pass@1", "pass@2", "pass@4"]  # 6 > 5 samples: not estimable, not reported
    for k in (1, 2, 4):
        assert scores[f"pass@{k}"] == pytest.approx(100 * sum(brute_force(row, k) for row in matrix) / len(matrix))
    assert scores["pass@1"] == pytest.approx(average_at_k(matrix))


def _config(tmp_path, toml):
    path = tmp_path / "config.toml"
    path.write_text(toml)
    return load_config(path).experiment


def with_pass_k(ks: str) -> str:
    return SFT_TOML.replace('prompt_template = "{problem}"\n', f'prompt_template = "{{problem}}"\npass_k = {ks}\n')


@pytest.mark.parametrize(
    ("ks", "says"),
    [
        ("[1, 4]", "pass_k asks for k = 4, which needs 4 samples per problem, but [evaluation.in_loop].k_offline = 3"),
        ("[1, 3]", "pass_k asks for k = 3, which needs 3 samples per problem, but held-out 'heldout' k = 2"),
        ("[2, 2]", "pass_k must list distinct k >= 1"),
        ("[0]", "pass_k must list distinct k >= 1"),
    ],
)
def test_a_k_above_the_samples_is_refused_naming_the_budget(ks, says, tmp_path):
    with pytest.raises(ConfigError, match=says.replace("[", r"\[").replace("]", r"\]")):
        _config(tmp_path, with_pass_k(ks))


def test_leaving_pass_k_out_keeps_the_digest(tmp_path):
    plain = _config(tmp_path, SFT_TOML)
    assert "pass_k" not in plain.digest_body()["evaluation"]
    assert _config(tmp_path, with_pass_k("[1, 2]")).digest() != plain.digest()


def test_the_engine_reports_pass_at_k_in_loop_online_and_held_out(tmp_path):
    world = build_world(tmp_path / "world")
    job = make_job(world, with_pass_k("[1, 2]"), sft_job(world).command.intervention, "pass-k")
    package = open_package(run_attempt(job, tmp_path / "attempt"))
    scores = package.manifest.in_loop_scores
    assert set(scores) == {"pass_at_k", "average_at_k", "pass@1", "pass@2"}  # k_offline = 3
    assert scores["pass@1"] == pytest.approx(scores["average_at_k"])
    assert scores["average_at_k"] <= scores["pass@2"] <= scores["pass_at_k"]
    for point in package.records("checkpoint_scores"):  # online: k_online = 2
        assert {"pass@1", "pass@2"} <= set(point["scores"])
    held = score_heldout(job, package.manifest.selected_checkpoint, load_plugins())
    bench = held["benchmarks"]["heldout"]["scores"]
    assert {"pass@1", "pass@2"} <= set(bench) and held["macro_avg"]["pass@2"] == pytest.approx(bench["pass@2"])
