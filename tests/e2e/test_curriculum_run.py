"""A whole Curriculum Run on the tiny world with the offline agent: `ade run` of the CI preset.

Bootstrap (Base and the random reference), Plans from the curriculum catalog, Builder rounds admitted on
𝓑's own inventory, GRPO consuming each realized schedule in order, Analyzer review over whole rollout
groups and every in-loop response, memory, final selection, held-out evaluation, and the report's
coverage and reuse figure.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ade_core.engine.package import open_package
from ade_core.store import RunStore
from ade_core.testing import run_command

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
CONFIG = REPO / "examples" / "tiny-curriculum-ci.toml"
ADE = str(Path(sys.executable).with_name("ade"))
RUN_S = 170  # the whole Run on an idle 2-core machine (the hang detector allows 10x)


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run_dir = tmp_path_factory.mktemp("curriculum-run") / "run"
    done = run_command(
        [ADE, "run", str(CONFIG), "--run-dir", str(run_dir), "--progress", "none"], idle_s=RUN_S, cwd=REPO
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return run_dir


def test_the_run_completes_with_catalog_curricula_consumed_as_scheduled(run):
    proc = subprocess.run([ADE, "status", str(run), "--json"], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    status = json.loads(proc.stdout)
    assert status["phase"] == "completed", status["phase"]
    from ade_core.schemas.trial import Trial

    with RunStore.open_read_only(run) as store:
        trials = [Trial.model_validate(d.document) for d in store.list("trial")]
        record = store.get_model("run", "run")
        assert record.base_model and "average_at_k" in record.base_model
        search = [t for t in trials if t.plan_id != "P000"]
        assert len(search) == 5 and all(t.status == "completed" for t in trials)
        for trial in trials:
            artifact = store.objects.read_json(trial.strategy_digest)
            assert "async def build_curriculum" in artifact["source"]
            steps = open_package(Path(trial.package.path)).records("consumed_problems")
            assert len(steps) == 4 and all(s["matches_schedule"] for s in steps)  # consumed == scheduled
            review = store.objects.read_json(trial.records.review)
            assert review["coverage"]["training_rollouts"]["coverage"] >= 0.25, review["coverage"]
            assert review["coverage"]["eval_responses"]["coverage"] == 1.0
            assert trial.plan_memory
        published = sorted(e.commit_key for e in store.queue(status="published"))
        assert published == sorted(f"{t.trial_id}#run-memory" for t in trials)
    directions = [p["direction"].split("(")[0] for p in status["plans"] if p["plan_id"] != "P000"]
    assert directions == ["frontier", "level_matched", "easy_to_hard", "subject_round_robin", "band_cycling"]
    held = status["held_out"]["evaluations"]
    assert [(e["scope"], e["trial_id"]) for e in held][-1] == ("final_selection", status["selection"]["trial_id"])


def test_the_report_shows_coverage_and_reuse(run):
    html = (run / "report.html").read_text(encoding="utf-8")
    assert 'id="fig-schedule"' in html and "curriculum coverage and reuse" in html
    assert 'id="fig-grpo_diagnostics"' in html and "reference P000/T1" in html
    assert "<script" not in html and "http://" not in html and "https://" not in html
