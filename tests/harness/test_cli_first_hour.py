"""What a new user meets in the first hour with the run commands, run as they run them (real `ade` subprocesses).

An incomplete task is refused before a Run is written; a command pointed at something that is not
a run refuses without writing; every failure exits with its documented code and no traceback; an
interrupted Run says how to resume it, and `ade status` calls it interrupted.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from harness_world import config

from ade_core import TaskSpec, hookimpl
from ade_core.harness.run import SimulationSettings, init_run
from ade_core.plugins import Candidate, load_plugins
from ade_core.store import RunStore
from ade_core.testing import TaskConformance, run_command

ADE = str(Path(sys.executable).with_name("ade"))
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
CI_CONFIG = EXAMPLES / "tiny-data-selection-ci.toml"


def ade(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return run_command([ADE, *args], idle_s=15, cwd=cwd, env=env)


def assert_refused(proc: subprocess.CompletedProcess[str], code: int, *words: str) -> None:
    assert proc.returncode == code, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr + proc.stdout
    for word in words:
        assert word in proc.stderr, (word, proc.stderr)


def files_under(path: Path) -> list[str]:
    return sorted(str(p.relative_to(path)) for p in path.rglob("*"))


# --- item 3: an incomplete task is refused before anything is written -----------------------


def scaffold_without(tmp_path: Path, hook: str) -> dict[str, str]:
    """`ade new-task toy`, installed on a fresh site directory with ``hook`` no longer a hookimpl."""
    assert ade("new-task", "toy", "--dir", str(tmp_path), cwd=tmp_path).returncode == 0
    src = tmp_path / "ade-task-toy" / "src"
    plugin = src / "ade_task_toy" / "plugin.py"
    text = plugin.read_text()
    assert f"@hookimpl\ndef {hook}(" in text
    plugin.write_text(text.replace(f"@hookimpl\ndef {hook}(", f"def {hook}("))
    info = tmp_path / "site" / "ade_task_toy-0.1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: ade-task-toy\nVersion: 0.1.0\n")
    (info / "entry_points.txt").write_text("[ade]\ntoy = ade_task_toy.plugin\n")
    (tmp_path / "toy.toml").write_text(f'extends = "{CI_CONFIG}"\ntask = "toy"\nname = "toy"\n')
    path = os.pathsep.join(filter(None, (str(info.parent), str(src), os.environ.get("PYTHONPATH"))))
    return {**os.environ, "PYTHONPATH": path}


def test_a_task_without_task_inputs_is_incomplete_and_its_run_is_refused_before_anything_is_written(tmp_path):
    env = scaffold_without(tmp_path, "ade_task_inputs")
    listing = ade("plugins", cwd=tmp_path, env=env)
    assert listing.returncode == 0, listing.stderr
    (row,) = [line for line in listing.stdout.splitlines() if line.startswith("toy ")]
    assert "incomplete (missing: ade_task_inputs)" in row

    before = files_under(tmp_path)
    proc = ade("run", "toy.toml", cwd=tmp_path, env=env)
    assert_refused(proc, 2, "MissingHookError", "'toy'", "ade_task_inputs", "ade_task_toy.plugin")
    assert files_under(tmp_path) == before  # no runs/, no half-made run to resume
    # a dry run realizes nothing on frozen inputs (its sandbox is simulated), so it needs none
    dry = ade("run", "toy.toml", "--dry-run", "--progress", "none", cwd=tmp_path, env=env)
    assert dry.returncode == 0 and "Traceback" not in dry.stderr, dry.stderr[-2000:]


def test_a_task_without_a_catalog_is_refused_for_the_offline_agent_and_by_ade_catalog(tmp_path):
    env = scaffold_without(tmp_path, "ade_strategy_catalog")
    before = files_under(tmp_path)
    proc = ade("run", "toy.toml", "--dry-run", cwd=tmp_path, env=env)  # was: coroutine raised StopIteration
    assert_refused(proc, 2, "MissingHookError", "offline agent", "strategy catalog", "--agent openai")
    assert files_under(tmp_path) == before
    assert_refused(ade("catalog", "toy", cwd=tmp_path, env=env), 2, "has no strategy catalog", "ade_strategy_catalog")


class _Partial:
    """A task plugin that registers a task and answers none of its hooks."""

    @hookimpl
    def ade_register_tasks(self) -> list[TaskSpec]:
        return [TaskSpec(name="partial", title="P", description="d", paradigm="sft", metric_order=("pass_at_k",))]


def test_the_conformance_kit_fails_a_task_lacking_a_required_hook():
    registry = load_plugins([Candidate("partial", _Partial(), "ade-task-partial", "0.1")], entry_points=False)
    handle = registry.task("partial")
    assert "ade_task_inputs" in handle.missing_hooks()

    class Conformance(TaskConformance):
        task = "partial"

    with pytest.raises(AssertionError, match="does not implement .*ade_task_inputs"):
        Conformance().test_required_hooks_implemented(handle)


# --- item 4: run commands on things that are not runs, run ids, read-only status ---------------


@pytest.mark.parametrize("command", ["status", "pause", "finish", "cancel", "heldout", "resume", "report"])
def test_a_command_pointed_at_a_non_run_refuses_without_writing(tmp_path, command):
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    proc = ade(command, "scratch", cwd=tmp_path)
    assert_refused(proc, 2, "NotARunError", "'scratch' is not an ADE run", "runs/scratch", "run id")
    assert files_under(tmp_path) == ["scratch"]  # no state.sqlite, no runs/


def test_a_store_without_a_run_is_not_a_run(tmp_path):
    RunStore.open(tmp_path / "scratch").close()  # what `ade status scratch` used to leave behind
    before = {p: p.read_bytes() for p in (tmp_path / "scratch").iterdir()}
    proc = ade("status", "scratch", cwd=tmp_path)  # was: "phase: uninitialized", exit 0
    assert_refused(proc, 2, "NotARunError", "no initialized run")
    assert {p: p.read_bytes() for p in (tmp_path / "scratch").iterdir()} == before


def test_run_commands_take_a_run_id_status_only_reads_and_a_completed_run_is_not_steered(tmp_path):
    done = ade("run", str(CI_CONFIG), "--dry-run", "--progress", "none", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    (run_dir,) = (tmp_path / "runs").iterdir()
    store = run_dir / "state.sqlite"
    digest, listing = hashlib.sha256(store.read_bytes()).hexdigest(), files_under(run_dir)

    status = ade("status", run_dir.name, "--json", cwd=tmp_path)
    assert status.returncode == 0, status.stderr
    data = json.loads(status.stdout)
    assert data["phase"] == "completed" and data["controller"] == "none" and not data["interrupted"]
    assert hashlib.sha256(store.read_bytes()).hexdigest() == digest  # read-only: not a byte changed,
    assert files_under(run_dir) == listing  # not a file added

    for action in ("pause", "finish", "cancel"):  # was: "completed, operator cancelled"
        assert_refused(ade(action, run_dir.name, cwd=tmp_path), 2, "already completed", f"nothing to {action}")
    after = json.loads(ade("status", f"runs/{run_dir.name}", "--json", cwd=tmp_path).stdout)
    assert after["phase"] == "completed" and after["operator"] == "running"
    assert after["state_digest"] == data["state_digest"]

    typo = ade("status", run_dir.name[:-2], cwd=tmp_path)
    assert_refused(typo, 2, "NotARunError", f"did you mean {run_dir.name!r}")
    assert "run id" in ade("status", "--help", cwd=tmp_path).stdout


# --- item 9: exit codes ------------------------------------------------------------------------


def test_a_missing_local_model_exits_3_before_anything_is_written(tmp_path):
    (tmp_path / "c.toml").write_text(f'extends = "{CI_CONFIG}"\n[model]\ntarget = "models/absent"\n')
    proc = ade("run", "c.toml", cwd=tmp_path)
    assert_refused(proc, 3, "EnvironmentProblem", "[model].target", "models/absent", "does not exist")
    assert files_under(tmp_path) == ["c.toml"]


def test_an_unreachable_isolation_floor_exits_3(tmp_path):
    no_tools = {**os.environ, "PATH": str(tmp_path / "empty")}  # no bubblewrap: namespaces are out of reach
    strict = ["--set", 'operational.sandbox.min_isolation="strict"']
    proc = ade("run", str(CI_CONFIG), *strict, cwd=tmp_path, env=no_tools)
    assert_refused(proc, 3, "EnvironmentProblem", "'strict'", "ade sandbox doctor")
    assert files_under(tmp_path) == []
    (tmp_path / "s.py").write_text("def f():\n    return 1\n")
    direct = ade("sandbox", "run", "s.py", "--entrypoint", "f", "--min-isolation", "strict", cwd=tmp_path, env=no_tools)
    assert_refused(direct, 3, "IsolationUnavailable", "'strict'")


def test_a_run_that_ends_suspended_exits_1(tmp_path):
    run_dir = tmp_path / "run"
    loaded = config(coordinators=1, plans=1, extra=["operational.recovery.on_exhausted=suspend_run"])
    simulation = SimulationSettings(failures={"C1/P1/T1": ("crashed", "killed", "crashed")})
    init_run(run_dir, loaded, dry_run=True, simulation=simulation)
    proc = ade("resume", "run", "--progress", "none", cwd=tmp_path)
    assert_refused(proc, 1, "suspended", "ade resume run")
    assert json.loads(ade("status", "run", "--json", cwd=tmp_path).stdout)["phase"] == "suspended"


# --- item 11: interrupting a Run -----------------------------------------------------------------


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


@pytest.mark.parametrize(
    ("signum", "code", "inherited"),
    [(signal.SIGINT, 130, "default"), (signal.SIGTERM, 143, "default"), (signal.SIGINT, 130, "ignored")],
)
def test_an_interrupted_run_says_how_to_resume_and_status_calls_it_interrupted(tmp_path, signum, code, inherited):
    # long enough (seconds, not one) that a reader starved of CPU still interrupts it in the middle of search
    budget = ["--set", "budget.plans_per_coordinator=60"]
    args = [ADE, "run", str(CI_CONFIG), "--dry-run", "--progress", "plain", *budget, "--run-dir", "runs/r"]
    # "ignored": started as a background job of a non-interactive shell is, with SIGINT ignored
    setup = _ignore_sigint if inherited == "ignored" else None
    run = subprocess.Popen(
        args, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=setup
    )
    assert run.stderr is not None
    started = time.monotonic()
    for line in run.stderr:  # the first Plan's Trial is under way: the controller is in the middle of search
        if "C1/P1/T1" in line or time.monotonic() - started > 60:
            break
    run.send_signal(signum)
    stdout, stderr = run.communicate(timeout=120)
    assert run.returncode == code, (stdout, stderr)
    assert "Traceback" not in stderr and "continue it with: ade resume runs/r" in stderr

    status = ade("status", "runs/r", cwd=tmp_path)
    assert status.returncode == 0, status.stderr
    first = status.stdout.splitlines()[0]
    assert "phase search" in first and "interrupted" in first and "operator running" not in first
    assert json.loads(ade("status", "runs/r", "--json", cwd=tmp_path).stdout)["interrupted"] is True

    resumed = ade("resume", "runs/r", "--progress", "none", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    final = json.loads(ade("status", "runs/r", "--json", cwd=tmp_path).stdout)
    assert final["phase"] == "completed" and not final["interrupted"]


def test_the_locator_names_the_store_file_the_store_writes():
    from ade_core.harness import locate
    from ade_core.store import STATE_FILE

    assert locate.STATE_FILE == STATE_FILE  # repeated there so that `ade --version` does not load the store
