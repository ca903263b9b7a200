"""A third party's strategy on the CI preset, beside the Run: `ade admit` before and after `ade trial`, whose
first Trial under the config also evaluates Base and trains the generic reference, and `ade eval`, which puts a
checkpoint next to Base and that reference, found in the cache and trained nothing more.
"""

from __future__ import annotations

import json
import os
import shutil

import pytest
from tiny_run_steps import REPO, ade

from ade_core.engine.data import resolve_model
from ade_core.engine.package import open_package

pytestmark = pytest.mark.e2e


def test_a_third_party_strategy_ran_alongside(third_party_trial) -> None:
    code, out, err, _ = third_party_trial["trial"]
    assert code == 0, err[-3000:]
    result = json.loads(out)
    assert result["trial"]["status"] == "completed" and result["trial"]["in_loop_scores"]["average_at_k"] >= 0
    assert result["reference"]["in_loop_scores"] and result["base"]["in_loop_scores"]
    # the first Trial under this config announced the extra work, did it before the user's Trial, and
    # the elapsed time covers all of it
    assert "first Trial under this config: it will also train the generic reference and evaluate the untrained" in err
    assert err.index("reference Trial (cached in") < err.index("Base: evaluating") < err.rindex("engine: training")
    timings = result["timings_s"]
    assert result["elapsed_s"] >= timings["reference"] + timings["Base"] + timings["strategy"]
    assert "Warning" not in err  # third-party deprecation warnings stay out of the terminal


def test_ade_trial_shows_base_and_the_reference_and_their_differences(third_party_trial) -> None:
    code, _, err, shown = third_party_trial["trial"]
    assert code == 0, err[-3000:]
    lines = shown.splitlines()
    header = next(line for line in lines if line.startswith("metric"))
    assert header.split() == ["metric", "strategy", "Base", "reference", "vs", "Base", "vs", "ref"]
    row = next(line for line in lines if line.startswith("average_at_k")).split()
    mine, base, reference, vs_base, vs_ref = (float(x) for x in row[1:6])
    assert vs_base == pytest.approx(mine - base, abs=0.11) and vs_ref == pytest.approx(mine - reference, abs=0.11)
    assert lines[-1].startswith("elapsed ") and "reference" in lines[-1] and "Base" in lines[-1]
    before, after = third_party_trial["admits"]
    assert before.returncode == after.returncode == 0, before.stderr + after.stderr
    assert "not computed for this config yet" in before.stdout  # admit never trains or evaluates
    assert "cached for this config (in-loop):" in after.stdout and "Base" in after.stdout


def test_eval_scores_the_cached_generic_reference_next_to_base(third_party_trial, tmp_path):
    cache = third_party_trial["cache"]
    assert third_party_trial["trial"][0] == 0  # `ade trial` trained and cached the reference
    checkpoint = tmp_path / "checkpoint"
    shutil.copytree(resolve_model(REPO, "tiny"), checkpoint)
    env = {**os.environ, "ADE_CACHE_DIR": str(cache)}
    config = str(third_party_trial["config"])
    args = ("eval", str(checkpoint), "--config", config, "--samples", "4", "--passk", "1,4", "--limit", "3")
    done = ade(*args, "--out", str(tmp_path / "e"), "--json", env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    scores = json.loads(done.stdout)["scores"]
    assert set(scores) == {"checkpoint", "reference", "Base"}
    assert scores["checkpoint"] == scores["Base"]  # the base weights, copied
    (cached,) = cache.rglob("reference/summary.json")
    reference = json.loads(cached.read_text())
    job = json.loads((tmp_path / "e" / "reference" / "job.json").read_text())
    assert job["model"] == open_package(reference["package"]).manifest.selected_checkpoint
    assert "reference Trial (cached in" not in done.stderr  # found in the cache, not trained again
    table = ade(*args, "--out", str(tmp_path / "e"), env=env)
    header = table.stdout.splitlines()[0].split()
    assert header == ["metric", "checkpoint", "reference", "Base"]
