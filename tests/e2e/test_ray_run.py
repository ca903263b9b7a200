"""The CI preset's Run on a Ray cluster, as docs/scale-out.md starts one: killed mid-training, resumed.

The session's local Ray cluster (a head and a second node on loopback, ``executors.ray.local_cluster``)
runs every Engine request of the Run. The controller is SIGKILLed while a search Trial trains on a
Ray worker; `ade resume` is a new driver that stops what the dead one left, fences the lost attempt
and runs a fresh one, so the Trial commits once. The in-loop scores equal the local executor's Run
of the same preset (``killed_and_resumed``, killed and resumed the same way) at the same seed and
threads.
"""

from __future__ import annotations

import pytest
from tiny_run_steps import KILL_IN, ade, engine_pid, start_and_kill_mid_training, status, still_running

from ade_core.schemas.trial import Attempt, Trial
from ade_core.store import RunStore, check_store


@pytest.fixture(scope="module")
def ray_run(tmp_path_factory: pytest.TempPathFactory, ray_cluster: dict) -> dict:
    run_dir = tmp_path_factory.mktemp("ray-run") / "run"
    on_ray = ["--set", "operational.executor.kind=ray"]
    on_ray += ["--set", f"operational.executor.address='{ray_cluster['address']}'"]
    on_ray += ["--set", "operational.report.heldout_final=false"]  # in-loop scores are what is compared
    start_and_kill_mid_training(run_dir, *on_ray)
    killed = status(run_dir)
    orphan = engine_pid(run_dir, f"{KILL_IN.replace('/', '_')}_a1")  # the dead controller's Engine, on a worker
    resumed = ade("resume", str(run_dir), "--progress", "plain")
    return {
        "run_dir": run_dir,
        "killed": killed,
        "resumed": resumed,
        "final": status(run_dir),
        "orphan_alive_after_resume": still_running(orphan, run_dir),
    }


def test_a_dead_controllers_ray_work_is_rerun_under_fencing_and_committed_once(ray_run) -> None:
    killed, resumed, final = (ray_run[k] for k in ("killed", "resumed", "final"))
    assert killed["phase"] == "search"
    assert {t["trial_id"]: t["status"] for p in killed["plans"] for t in p["trials"]}[KILL_IN] == "running"
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert final["phase"] == "completed"
    assert not ray_run["orphan_alive_after_resume"]  # the lost attempt's Engine did not train on beside its retry
    with RunStore.open(ray_run["run_dir"]) as store:
        assert check_store(store) == []
        trial = Trial.model_validate(store.get("trial", KILL_IN).document)
        attempts = [Attempt.model_validate(store.get("attempt", key).document) for key in trial.attempts]
        keys = [entry.commit_key for entry in store.queue()]
    assert [(a.status, a.failure) for a in attempts] == [("fenced", "lost"), ("succeeded", None)]
    assert attempts[-1].resources["executor"] == "ray"
    assert len(keys) == len(set(keys))  # no Trial committed twice


def test_in_loop_scores_on_ray_equal_the_local_executors(ray_run, killed_and_resumed) -> None:
    def scores(final: dict) -> dict:
        return {t["trial_id"]: t["scores"] for p in final["plans"] for t in p["trials"]}

    on_ray, local = scores(ray_run["final"]), scores(killed_and_resumed["final"])
    assert set(on_ray) == {"P000/T1", "C1/P1/T1", "C1/P2/T1"}
    assert on_ray == local
    assert ray_run["final"]["base_model"] == killed_and_resumed["final"]["base_model"]
