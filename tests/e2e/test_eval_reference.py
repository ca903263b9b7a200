"""``ade eval`` puts a checkpoint next to Base and the task's generic reference.

The reference Trial is the one the session's `ade trial` (tests/e2e/conftest.py) trained and cached
under the CI preset, so this test finds it in that cache and trains nothing.
"""

from __future__ import annotations

import json
import os
import shutil

from tiny_run_steps import CONFIG, REPO, ade

from ade_core.engine.data import resolve_model
from ade_core.engine.package import open_package


def test_eval_scores_the_cached_generic_reference_next_to_base(killed_and_resumed, tmp_path):
    cache = killed_and_resumed["root"] / "cache"
    assert killed_and_resumed["trial"][0] == 0  # `ade trial` trained and cached the reference
    checkpoint = tmp_path / "checkpoint"
    shutil.copytree(resolve_model(REPO, "tiny"), checkpoint)
    env = {**os.environ, "ADE_CACHE_DIR": str(cache)}
    args = ("eval", str(checkpoint), "--config", str(CONFIG), "--samples", "4", "--passk", "1,4", "--limit", "3")
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
