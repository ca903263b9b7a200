"""A researcher's files beside a config never shadow the modules ADE's processes import.

``random.py`` in the working directory used to shadow the standard library in the Engine (started
with ``python -m``) and in the grading workers (multiprocessing's fork server starts with
``python -c``): every evaluation was recorded as missing.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest

from ade_core.config import load_config
from ade_core.engine.baseline import BaseEvaluationJob
from ade_core.executors.interpreter import python_command
from ade_core.executors.local import LocalExecutor
from ade_core.harness.base_model import engine_base_evaluator
from ade_core.testing import run_command

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "examples" / "tiny-data-selection-ci.toml"
ADE = str(Path(sys.executable).with_name("ade"))
SHADOW = 'raise ImportError("the working directory\'s random.py was imported")\n'

GRADE = """
from ade_core.engine.grading.pool import grade_batch
from ade_core.plugins import load_plugins

if __name__ == "__main__":
    grader = load_plugins().graders()["boxed_exact"]
    print([o.status for o in grade_batch(grader, [("so \\\\boxed{2}", "2")] * 3, workers=1)])
"""


@pytest.fixture
def shadowed(tmp_path: Path) -> Path:
    """A working directory holding a ``random.py`` that fails when imported."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "random.py").write_text(SHADOW)
    return work


def test_grading_workers_do_not_import_from_the_working_directory(shadowed, tmp_path):
    """The pool's fork server starts with ``-c``; the working directory must stay off its path."""
    script = tmp_path / "scripts" / "grade.py"  # run as a file, as a console script is: cwd is not sys.path[0]
    script.parent.mkdir()
    script.write_text(GRADE)
    done = run_command([sys.executable, str(script)], idle_s=10, cwd=shadowed)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "['graded', 'graded', 'graded']"


def test_python_command_keeps_the_working_directory_off_the_path(shadowed):
    done = run_command(
        python_command("-c", "import random, sys; print(random.__file__); print(repr(sys.path[0]))"),
        idle_s=10,
        cwd=shadowed,
    )
    assert done.returncode == 0, done.stderr
    assert not done.stdout.splitlines()[0].startswith(str(shadowed))


def _job_file(directory: Path) -> Path:
    loaded = load_config(CONFIG, ["evaluation.in_loop.limit=6"])
    job = BaseEvaluationJob.of(loaded.experiment, loaded.base_dir)
    path = directory / "job.json"
    path.write_text(job.model_dump_json())
    return path


def test_ade_evaluates_with_a_random_py_in_the_working_directory(shadowed, tmp_path):
    """``ade`` (console script) grades in worker processes: the evaluation is scored, not missing."""
    done = run_command([ADE, "engine", "base-eval", str(_job_file(tmp_path))], idle_s=15, cwd=shadowed)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["missing_reason"] is None and set(result["scores"]) == {"pass_at_k", "average_at_k"}


def test_the_harness_starts_the_engine_off_the_working_directory(shadowed, tmp_path, monkeypatch):
    """The base-model evaluation subprocess (``python -m ade_core.cli``) runs where the operator stands."""
    loaded = load_config(CONFIG, ["evaluation.in_loop.limit=6"])
    monkeypatch.chdir(shadowed)
    evaluate = engine_base_evaluator(LocalExecutor(), loaded.experiment, loaded.base_dir, tmp_path / "run")
    scores = asyncio.run(evaluate())
    assert isinstance(scores, dict) and set(scores) == {"pass_at_k", "average_at_k"}, scores
