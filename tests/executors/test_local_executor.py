"""The local executor with real subprocesses: outcomes, stalls, fencing, slots, and one real Engine attempt.

Most tests run ``fake_engine.py`` (a stand-in that writes heartbeats and a real sealed package
as its ``fake.json`` says) so they take a second; one runs the real Engine on a tiny world.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path

import pytest

from ade_core.engine.package import open_package
from ade_core.errors import ExecutorError
from ade_core.executors import AttemptOutcome, AttemptRequest, LocalExecutor, Slot, slots_from_resources
from ade_core.executors.slots import cpu_list, usable_cpus
from ade_core.schemas.artifact import Intervention
from ade_core.schemas.config import ResourceConfig

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "engine"))  # the Engine tests' miniature world
from engine_world import SFT_TOML, build_world, make_job, sft_job  # noqa: E402

FAKE = [sys.executable, str(Path(__file__).with_name("fake_engine.py"))]
CPU = usable_cpus()[-1]
INTERVENTION = Intervention(kind="sft_selection", payload={"selected_ids": ["c0"]}, summary="one")


def request(root: Path, attempt: str, **plan: object) -> AttemptRequest:
    directory = root / attempt
    directory.mkdir(parents=True)
    (directory / "fake.json").write_text(json.dumps(plan))
    return AttemptRequest(job=make_job(root, SFT_TOML, INTERVENTION, attempt), attempt_dir=directory)


def executor(*slots: Slot, **options: object) -> LocalExecutor:
    return LocalExecutor(slots or (Slot("0", cpus=(CPU,)),), command=FAKE, poll_s=0.05, **options)  # type: ignore[arg-type]


def alive(pid: int) -> bool:
    """Running (not gone, not a zombie waiting for a reaper)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def all_gone(pids: list[int], within_s: float = 5.0) -> bool:
    """Whether every pid has stopped running within ``within_s`` (SIGKILL is delivered asynchronously)."""
    deadline = time.monotonic() + within_s
    while any(alive(pid) for pid in pids):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


async def wait_for(path: Path, timeout: float = 30.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not path.exists():
        assert asyncio.get_running_loop().time() < deadline, f"{path} never appeared"
        await asyncio.sleep(0.02)


def test_success_returns_this_attempts_sealed_package(tmp_path):
    local = executor()
    req = request(tmp_path, "a1", beats=3)
    outcome = asyncio.run(local.run(req))
    assert (outcome.status, outcome.failure, outcome.retryable, outcome.exit_code) == ("succeeded", None, False, 0)
    assert open_package(outcome.package).manifest.attempt_id == "a1"
    assert outcome.resources == {"slot": "0", "cpus": str(CPU)}
    assert outcome.started_at <= outcome.ended_at
    assert json.loads((req.attempt_dir / "job.json").read_text())["attempt_id"] == "a1"
    assert [len(spans) for spans in local.busy_intervals().values()] == [1]


@pytest.mark.parametrize(
    ("plan", "failure", "retryable", "says"),
    [
        ({"package": False, "exit": 1, "stderr": "RuntimeError: CUDA error"}, "crashed", True, "CUDA error"),
        ({"package": False, "signal": True}, "killed", True, "SIGKILL"),
        ({"package": False, "exit": 2, "stderr": "EngineError: unknown grader"}, "engine_error", False, "grader"),
        ({"package": False, "exit": 3, "stderr": "EngineInputMissing: no model at /m"}, "engine_error", False, "/m"),
        ({"attempt_id": "someone-else"}, "bad_package", True, "someone-else"),
        ({"package": False}, "bad_package", True, "without printing a package"),
    ],
)
def test_failures_are_typed_and_only_physical_faults_are_retryable(tmp_path, plan, failure, retryable, says):
    outcome = asyncio.run(executor().run(request(tmp_path, "a1", **plan)))
    assert (outcome.status, outcome.failure, outcome.retryable, outcome.package) == ("failed", failure, retryable, None)
    assert says in outcome.detail


def test_a_stalled_attempt_has_its_whole_process_group_killed(tmp_path):
    req = request(tmp_path, "a1", child=True, hang=True)
    outcome = asyncio.run(executor(stall_after_s=1.0).run(req))
    assert (outcome.status, outcome.failure, outcome.retryable) == ("failed", "stalled", True)
    leader, grandchild = json.loads((req.attempt_dir / "pids.json").read_text())
    assert not alive(leader) and not alive(grandchild)


def test_an_attempt_that_keeps_beating_is_not_stalled(tmp_path):
    # Beats for 5 s, past a 3 s stall limit; the limit leaves room for a slow interpreter start on a loaded machine.
    outcome = asyncio.run(executor(stall_after_s=3.0).run(request(tmp_path, "a1", beats=50, interval=0.1)))
    assert outcome.status == "succeeded", outcome.detail


def test_fencing_kills_a_running_attempt_and_refuses_its_late_package(tmp_path):
    req = request(tmp_path, "a1", child=True, linger=60)  # seals its package, then lives on

    async def scenario() -> AttemptOutcome:
        local = executor()
        task = asyncio.create_task(local.run(req))
        await wait_for(req.attempt_dir / "pids.json")
        while not list(req.attempt_dir.glob("package-*")):
            await asyncio.sleep(0.02)
        local.fence("a1")
        return await asyncio.wait_for(task, 30)

    outcome = asyncio.run(scenario())
    assert (outcome.status, outcome.failure, outcome.package, outcome.retryable) == ("fenced", "fenced", None, False)
    assert list(req.attempt_dir.glob("package-*")), "the package exists on disk, and still is not returned"
    assert not any(alive(pid) for pid in json.loads((req.attempt_dir / "pids.json").read_text()))


def test_an_attempt_fenced_before_it_starts_never_runs(tmp_path):
    local = executor()
    local.fence("a1")
    req = request(tmp_path, "a1")
    outcome = asyncio.run(local.run(req))
    assert outcome.status == "fenced" and not (req.attempt_dir / "job.json").exists()


def test_close_cancels_running_attempts(tmp_path):
    req = request(tmp_path, "a1", linger=60)

    async def scenario() -> AttemptOutcome:
        local = executor()
        task = asyncio.create_task(local.run(req))
        await wait_for(req.attempt_dir / "heartbeat.json")
        await local.close()
        return await task

    outcome = asyncio.run(scenario())
    assert (outcome.status, outcome.failure, outcome.retryable) == ("failed", "cancelled", False)


def test_cancelling_a_run_kills_its_process_group_and_frees_the_slot(tmp_path):
    req = request(tmp_path, "a1", child=True, linger=60)
    local = executor()

    async def scenario() -> None:
        task = asyncio.create_task(local.run(req))
        await wait_for(req.attempt_dir / "pids.json")
        with pytest.raises(ExecutorError, match="fresh id"):
            await local.run(req)
        assert local.active() == {"a1": {"slot": "0", "cpus": str(CPU)}}
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(scenario())
    assert all_gone(json.loads((req.attempt_dir / "pids.json").read_text()))
    assert not local.active() and len(local.busy_intervals()["0"]) == 1


def test_slots_bound_concurrency(tmp_path):
    local = executor(Slot("0", cpus=(CPU,)), Slot("1", cpus=(CPU,)))
    requests = [request(tmp_path, f"a{i}", beats=6, interval=0.1) for i in range(4)]

    async def scenario() -> list[AttemptOutcome]:
        return await asyncio.gather(*(local.run(r) for r in requests))

    outcomes = asyncio.run(scenario())
    assert [o.status for o in outcomes] == ["succeeded"] * 4
    spans = local.busy_intervals()
    assert sorted(len(s) for s in spans.values()) == [2, 2]
    events = sorted(
        [(start, 1) for s in spans.values() for start, _ in s] + [(end, -1) for s in spans.values() for _, end in s]
    )
    running = peak = 0
    for _, step in events:
        running += step
        peak = max(peak, running)
    assert peak == 2
    # two of the four waited for a slot (paper Fig. 4's "waiting"); the first two did not
    waits = sorted(o.waited_s for o in outcomes)
    assert waits[0] < 0.2 and waits[1] < 0.2 and waits[2] > 0.3 and waits[3] > 0.3


def test_slot_environment_reaches_the_engine_process(tmp_path):
    local = executor(Slot("cpu", cpus=(CPU,)))
    cpu_req = request(tmp_path, "a1", record=True)
    gpu_req = request(tmp_path, "a2", record=True)
    asyncio.run(local.run(cpu_req))
    gpu_outcome = asyncio.run(executor(Slot("gpu", gpus=("1",))).run(gpu_req))
    on_cpu = json.loads((cpu_req.attempt_dir / "seen.json").read_text())
    on_gpu = json.loads((gpu_req.attempt_dir / "seen.json").read_text())
    assert on_cpu == {"cuda_visible_devices": "", "omp_num_threads": "1", "affinity": [CPU]}
    assert on_gpu["cuda_visible_devices"] == "1" and gpu_outcome.resources == {
        "slot": "gpu",
        "cuda_visible_devices": "1",
    }


def test_slots_from_resources():
    cpu = slots_from_resources(ResourceConfig(cpu_threads=2), cpus=range(5))
    assert [(s.name, s.cpus, s.gpus) for s in cpu] == [("0", (0, 1), ()), ("1", (2, 3), ())]
    assert [s.cpus for s in slots_from_resources(ResourceConfig(), cpus=[0, 1])] == [(0, 1)]
    gpu = slots_from_resources(ResourceConfig(device="cuda", train_gpus=1), cpus=range(4), gpus=["0", "1"])
    assert [(s.cpus, s.gpus) for s in gpu] == [((0, 1), ("0",)), ((2, 3), ("1",))]
    paired = slots_from_resources(ResourceConfig(device="cuda", train_gpus=2, eval_gpus=1), cpus=[0], gpus="0123")
    assert [s.gpus for s in paired] == [("0", "1"), ("2", "3")]
    with pytest.raises(ExecutorError, match="needs 2 GPU"):
        slots_from_resources(ResourceConfig(device="cuda", train_gpus=2), gpus=["0"])
    assert cpu_list((0, 1, 2, 5, 7, 8)) == "0-2,5,7-8"


def test_executor_refuses_slots_it_cannot_honour():
    with pytest.raises(ExecutorError, match="distinct"):
        LocalExecutor([Slot("0"), Slot("0")])
    with pytest.raises(ExecutorError, match="cannot use"):
        LocalExecutor([Slot("0", cpus=(max(usable_cpus()) + 1000,))])


def test_the_real_engine_runs_through_the_executor(tmp_path):
    world = build_world(tmp_path / "world")
    job = sft_job(world, "exec-a1")
    local = LocalExecutor([Slot("0", cpus=tuple(usable_cpus()))], poll_s=0.2)
    outcome = asyncio.run(local.run(AttemptRequest(job=job, attempt_dir=tmp_path / "attempt")))
    assert outcome.status == "succeeded", outcome.detail
    manifest = open_package(outcome.package).manifest
    assert (manifest.attempt_id, manifest.trial_id, manifest.status) == ("exec-a1", job.trial_id, "completed")
    assert json.loads((tmp_path / "attempt" / "heartbeat.json").read_text())["phase"] == "done"
