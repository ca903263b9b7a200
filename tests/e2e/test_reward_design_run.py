"""A whole Reward Design Run on the tiny world with the offline agent: `ade run` of the CI preset.

Bootstrap (Base and the outcome-only reference), Plans from the reward catalog, Builder rounds through
admission with probes and replay, GRPO in the sandbox, Analyzer review over whole rollout groups,
memory, final selection, held-out evaluation, and the report's GRPO figures and rollout browser,
opened in headless Chromium with a group-type filter.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ade_core.store import RunStore
from ade_core.testing import run_command

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
CONFIG = REPO / "examples" / "tiny-reward-design-ci.toml"
ADE = str(Path(sys.executable).with_name("ade"))
RUN_S = 200  # the whole Run on an idle 2-core machine (the hang detector allows 10x)
CHROMIUM_ENV = "ADE_REPORT_REQUIRE_CHROMIUM"


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run_dir = tmp_path_factory.mktemp("reward-run") / "run"
    done = run_command(
        [ADE, "run", str(CONFIG), "--run-dir", str(run_dir), "--progress", "none"], idle_s=RUN_S, cwd=REPO
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return run_dir


def _status(run_dir: Path) -> dict:
    proc = subprocess.run([ADE, "status", str(run_dir), "--json"], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_the_run_completes_through_every_stage_with_catalog_rewards(run):
    status = _status(run)
    assert status["phase"] == "completed", status["phase"]
    from ade_core.schemas.trial import Trial

    with RunStore.open_read_only(run) as store:
        trials = [Trial.model_validate(d.document) for d in store.list("trial")]
        record = store.get_model("run", "run")
        assert record.base_model and "average_at_k" in record.base_model  # Base next to every score
        search = [t for t in trials if t.plan_id != "P000"]
        assert len(search) == 5 and all(t.status == "completed" for t in trials)
        for trial in search:
            artifact = store.objects.read_json(trial.strategy_digest)
            assert "async def compute_score" in artifact["source"]
            admission = store.objects.read_json(trial.build_rounds[-1].admission)  # every check, recorded
            checks = {c["name"]: c["status"] for c in admission["checks"]}
            assert checks["probe:replay"] == "passed" and checks["probe:reward_hacking"] == "passed", checks
        for trial in trials:
            assert isinstance(trial.records.review, str), trial.records.review  # the review ran
            review = store.objects.read_json(trial.records.review)
            assert review["coverage"]["training_rollouts"]["coverage"] >= 0.25, review["coverage"]
            assert review["coverage"]["eval_responses"]["coverage"] == 1.0
            assert trial.plan_memory  # one Plan-Memory update per terminal Trial ...
        published = sorted(e.commit_key for e in store.queue(status="published"))
        assert published == sorted(f"{t.trial_id}#run-memory" for t in trials)  # ... and one Run-Memory update
        assert record.selection.trial_id in {t.trial_id for t in trials}
    directions = [p["direction"] for p in status["plans"] if p["plan_id"] != "P000"]
    assert [d.split("(")[0] for d in directions] == [
        "step_credit",
        "process_group",
        "sibling_corroborated",
        "process_row",
        "format_bonus",
    ]
    held = status["held_out"]["evaluations"]
    assert [(e["scope"], e["trial_id"]) for e in held][-1] == ("final_selection", status["selection"]["trial_id"])


def test_the_report_shows_grpo_diagnostics_and_a_filterable_rollout_browser(run, tmp_path):
    html = (run / "report.html").read_text(encoding="utf-8")
    assert 'id="fig-grpo_diagnostics"' in html and "reference P000/T1" in html
    assert 'class="rollout-browser"' in html and 'href="#rollouts-all_wrong"' in html
    assert html.count('<details class="step"') == 4  # the CI preset's four GRPO steps
    assert "passed probe:replay: replayed 4 groups" in html and "passed probe:reward_hacking" in html
    assert "<script" not in html and "http://" not in html and "https://" not in html  # self-contained
    groups = html.count('<div class="group ')
    assert groups == 4 * 4  # four prompts per step
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        if os.environ.get(CHROMIUM_ENV):
            pytest.fail(f"{CHROMIUM_ENV} is set: needs headless Chromium (apt-get install chromium)")
        pytest.skip("needs headless Chromium (apt-get install chromium)")
    import matplotlib.image

    kinds = {"all_wrong": (0.64, 0.10, 0.36), "mixed": (0.90, 0.63, 0.0), "all_correct": (0.10, 0.50, 0.35)}
    present = {kind: f'class="group {kind}"' in html.split('<details class="step"')[1] for kind in kinds}
    shown = next(kind for kind, here in present.items() if here)  # a type present in the opened first step
    shot = tmp_path / "browser.png"
    subprocess.run(
        [
            browser,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            f"--user-data-dir={tmp_path / 'profile'}",
            f"--screenshot={shot}",
            "--window-size=1280,10000",  # the whole report down to the browser: a filter never scrolls
            (run / "report.html").resolve().as_uri() + f"#rollouts-{shown}",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    rgb = matplotlib.image.imread(shot)[..., :3]

    def pixels(color: tuple[float, float, float]) -> int:
        return int((abs(rgb - color).max(axis=-1) < 0.04).sum())

    assert pixels(kinds[shown]) > 200, "the filtered group type's border is not on screen"
    for kind, color in kinds.items():
        if kind != shown:
            assert pixels(color) < 50, f"{kind} groups are shown under the #{shown} filter"
