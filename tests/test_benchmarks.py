"""Every script in ``benchmarks/`` runs in its ``--quick`` mode and prints its figures.

A benchmark nothing runs rots unnoticed (``eval_throughput.py`` once did). ``--quick`` runs a
script at tiny sizes in seconds; these tests only check that it still works end to end and
prints the rows of its tables, never its timings or targets (those are measurements, which
belong to the full runs).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from ade_core.testing import run_command

pytestmark = pytest.mark.benchmark

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = sorted((ROOT / "benchmarks").glob("*.py"))

# What each script's quick run prints when every section worked: table rows and section heads.
FIGURES = {
    "eval_throughput.py": (
        "(a) Math grading",
        "GradingPool, 2 workers kept from a batch",
        "grade_batch, 2 worker processes",
        "16 sequences per batch",
        "one pool per attempt (now)",
    ),
    "harness_overhead.py": ("baseline: bare store transition", "overhead per Trial", "idle while queued"),
    "judge_quality.py": (
        "offline judge, error_rate=0.1",
        "| wrong_answer + wrong_step | correctness |",
        "| truncated | completeness |",
        "| missing_box | format |",
    ),
    "process_judge_agreement.py": (
        "offline process judge, error_rate=0.1",
        "| derivation_soundness | wrong_step |",
        "| conclusion_support | missing_box, truncated, wrong_answer |",
        "| substantive_relevance | other_question |",
    ),
    "sandbox_overhead.py": (
        "machine isolation level",
        "run_strategy level=process ",
        "worker.call",
        "(b) (a) minus the trivial run",
    ),
    "startup.py": ("baseline: python -c pass", "import ade_core", "load_plugins() + load_config()"),
    "curriculum_validity.py": ("| reference |", "| frontier |", "| hardest_only |", "| base (untrained) |"),
    "tiny_world_validity.py": ("| defect_free |", "| defect_heavy |", "| base |", "| hardest_only |"),
}

# Each script's quick run on an idle 2-core machine, rounded up (seconds); the rest take a few seconds.
IDLE_S = {"tiny_world_validity.py": 40, "curriculum_validity.py": 30, "eval_throughput.py": 15}


def test_every_benchmark_script_is_covered():
    assert sorted(FIGURES) == [p.name for p in SCRIPTS], "give the new script a --quick mode and list its figures"


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_the_benchmark_runs_quick_and_prints_its_figures(script, tmp_path):
    done = run_command(
        [sys.executable, str(script), "--quick"],
        idle_s=IDLE_S.get(script.name, 10),
        cwd=tmp_path,  # anything a script writes beside it lands here, not in the repository
    )
    assert done.returncode == 0, f"{script.name} --quick failed:\n{done.stdout}\n{done.stderr}"
    missing = [figure for figure in FIGURES[script.name] if figure not in done.stdout]
    assert not missing, f"{script.name} --quick printed no {missing}:\n{done.stdout}"
