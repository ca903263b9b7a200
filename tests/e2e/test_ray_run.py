"""The local Run of the CI preset, forked from a mid-run revision and continued on a Ray cluster, as
docs/scale-out.md starts one: killed mid-training, resumed, completed as a Run of its own.

`ade fork` copies the local Run (``killed_and_resumed``) up to the revision before its second search Plan:
Base's scores, the reference Trial P000 and the first search Trial. `ade resume --set
operational.executor.kind=ray` then runs every Engine request that is left on the session's local Ray
cluster (a head and a second node on loopback, ``executors.ray.local_cluster``). The controller is
SIGKILLed while the second search Trial trains on a Ray worker; a second `ade resume` is a new driver that
stops what the dead one left, fences the lost attempt and runs a fresh one, so the Trial commits once. Its
in-loop scores equal the local Run's at the same seed and threads. (The Base evaluation through Ray is
checked on its own in tests/executors/test_ray_executor.py.)
"""

from __future__ import annotations

import pytest
from tiny_run_steps import (
    RESUME_S,
    ade,
    engine_pid,
    revision_before,
    start_and_kill_mid_training,
    status,
    still_running,
)

from ade_core.schemas.trial import Attempt, Trial
from ade_core.store import RunStore, check_store

pytestmark = pytest.mark.e2e

SEARCH = ("C1/P1/T1", "C1/P2/T1")
ON_RAY = "C1/P2/T1"  # the Trial the fork runs, on Ray: killed while it trains, then rerun


@pytest.fixture(scope="module")
def ray_run(tmp_path_factory: pytest.TempPathFactory, ray_cluster: dict, killed_and_resumed: dict) -> dict:
    local = killed_and_resumed["run_dir"]
    revision = revision_before(local, "C1/P2")
    run_dir = tmp_path_factory.mktemp("ray-run") / "run"
    forked = ade("fork", f"{local}@{revision}", "--run-dir", str(run_dir))
    assert forked.returncode == 0, forked.stderr
    on_ray = ["--set", "operational.executor.kind=ray"]
    on_ray += ["--set", f"operational.executor.address='{ray_cluster['address']}'"]
    on_ray += ["--set", "operational.report.heldout_final=false"]  # in-loop scores are what is compared
    start_and_kill_mid_training(run_dir, *on_ray, resume=True, kill_in=ON_RAY)
    killed = status(run_dir)
    orphan = engine_pid(run_dir, f"{ON_RAY.replace('/', '_')}_a1")  # the dead controller's Engine, on a worker
    resumed = ade("resume", str(run_dir), "--progress", "plain", idle_s=RESUME_S)
    return {
        "run_dir": run_dir,
        "revision": revision,
        "killed": killed,
        "resumed": resumed,
        "final": status(run_dir),
        "orphan_alive_after_resume": still_running(orphan, run_dir),
    }


def test_a_dead_controllers_ray_work_is_rerun_under_fencing_and_committed_once(ray_run) -> None:
    killed, resumed, final = (ray_run[k] for k in ("killed", "resumed", "final"))
    assert killed["phase"] == "search"
    assert {t["trial_id"]: t["status"] for p in killed["plans"] for t in p["trials"]}[ON_RAY] == "running"
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert final["phase"] == "completed"
    assert not ray_run["orphan_alive_after_resume"]  # the lost attempt's Engine did not train on beside its retry
    with RunStore.open(ray_run["run_dir"]) as store:
        assert check_store(store) == []
        trial = Trial.model_validate(store.get("trial", ON_RAY).document)
        attempts = [Attempt.model_validate(store.get("attempt", key).document) for key in trial.attempts]
        keys = [entry.commit_key for entry in store.queue()]
    assert [(a.status, a.failure) for a in attempts] == [("fenced", "lost"), ("succeeded", None)]
    assert attempts[-1].resources["executor"] == "ray"
    assert len(keys) == len(set(keys))  # no Trial committed twice


def test_the_fork_from_a_mid_run_revision_completes_as_its_own_run(ray_run, killed_and_resumed) -> None:
    final, run_dir = ray_run["final"], ray_run["run_dir"]
    assert final["forked_from"] == f"run@{ray_run['revision']}"
    assert {t["trial_id"] for p in final["plans"] for t in p["trials"]} == {"P000/T1", *SEARCH}
    assert (run_dir / "report.html").is_file()
    assert killed_and_resumed["final"]["revision"] > ray_run["revision"]  # the fork left the local Run as it was


def test_in_loop_scores_on_ray_equal_the_local_executors(ray_run, killed_and_resumed) -> None:
    def scores(final: dict) -> dict:
        return {t["trial_id"]: t["scores"] for p in final["plans"] for t in p["trials"]}

    on_ray, local = scores(ray_run["final"]), scores(killed_and_resumed["final"])
    assert set(on_ray) == {"P000/T1", *SEARCH}
    assert on_ray[ON_RAY] == local[ON_RAY]  # trained and evaluated on Ray
    assert on_ray == local and ray_run["final"]["base_model"] == killed_and_resumed["final"]["base_model"]
