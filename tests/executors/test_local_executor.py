"""The local executor with real subprocesses: outcomes, stalls, fencing, resources, the resource policy, and one
real Engine attempt.

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

from ade_core.engine.baseline import BaseEvaluationJob
from ade_core.engine.package import open_package
from ade_core.errors import ExecutorError
from ade_core.executors import LocalExecutor, slots_from_resources
from ade_core.executors.base import (
    IN_LOOP_KINDS,
    JOB_PLACEHOLDER,
    AttemptOutcome,
    EngineRequest,
    Lease,
    Resources,
    Span,
    run,
)
from ade_core.executors.requests import attempt_request, base_eval_request
from ade_core.executors.slots import Slot, cpu_list, usable_cpus
from ade_core.schemas.artifact import Intervention
from ade_core.schemas.config import ResourceConfig

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "engine"))  # the Engine tests' miniature world
from engine_world import SFT_TOML, build_world, make_job, sft_job  # noqa: E402

FAKE = [sys.executable, str(Path(__file__).with_name("fake_engine.py"))]
CPU = usable_cpus()[-1]
CORES = usable_cpus()[:2]  # two where the machine has them (CI has two)
INTERVENTION = Intervention(kind="sft_selection", payload={"selected_ids": ["c0"]}, summary="one")


def request(root: Path, attempt: str, lease: Lease | None = None, **plan: object) -> EngineRequest:
    directory = root / attempt
    directory.mkdir(parents=True)
    (directory / "fake.json").write_text(json.dumps(plan))
    return attempt_request(make_job(root, SFT_TOML, INTERVENTION, attempt), directory, lease=lease)


def evaluation(root: Path, name: str, kind: str = "base_eval", **plan: object) -> EngineRequest:
    """A request without a package (the fake's ``engine base-eval``) of ``kind``."""
    directory = root / name
    directory.mkdir(parents=True)
    (directory / "fake.json").write_text(json.dumps(plan))
    job = BaseEvaluationJob.of(make_job(root, SFT_TOML, INTERVENTION, name).config, str(root), None)
    if kind == "base_eval":
        return base_eval_request(job, directory, name)
    return EngineRequest(kind, name, ("engine", "base-eval", JOB_PLACEHOLDER), directory, job, Resources(cpus=1))


def executor(cores=(CPU,), **options: object) -> LocalExecutor:
    return LocalExecutor(cpus=list(cores), gpus=[], program=FAKE, poll_s=0.05, **options)


def overlap(a: Span, b: Span) -> bool:
    return a.started < b.ended and b.started < a.ended


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
    outcome = asyncio.run(run(local, req))
    assert (outcome.status, outcome.failure, outcome.retryable, outcome.exit_code) == ("succeeded", None, False, 0)
    assert open_package(outcome.package).manifest.attempt_id == "a1"
    assert outcome.resources == {"executor": "local", "slot": f"cpu{CPU}", "cpus": str(CPU), "threads": "1"}
    assert outcome.started_at <= outcome.ended_at and outcome.kind == "attempt"
    assert json.loads((req.directory / "job.json").read_text())["attempt_id"] == "a1"
    assert [(s.request_id, s.kind) for s in local.timeline()] == [("a1", "attempt")]
    assert local.poll("a1").state == "done" and local.poll("nobody").state == "unknown"
    assert not (req.directory / "process.json").exists()


def test_a_request_without_a_package_returns_its_result_line(tmp_path):
    outcome = asyncio.run(run(executor(), evaluation(tmp_path, "base-model")))
    assert (outcome.status, outcome.kind, outcome.package) == ("succeeded", "base_eval", None)
    assert outcome.result == {"scores": {"pass_at_k": 0.25}, "missing_reason": None}
    silent = asyncio.run(run(executor(), evaluation(tmp_path, "quiet", result=False)))
    assert (silent.status, silent.failure, silent.retryable) == ("failed", "bad_package", True)
    assert "printed no result" in silent.detail


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
    outcome = asyncio.run(run(executor(), request(tmp_path, "a1", **plan)))
    assert (outcome.status, outcome.failure, outcome.retryable, outcome.package) == ("failed", failure, retryable, None)
    assert says in outcome.detail


def test_a_stalled_attempt_has_its_whole_process_group_killed(tmp_path):
    req = request(tmp_path, "a1", lease=Lease(stall_after_s=1.0), child=True, hang=True)
    outcome = asyncio.run(run(executor(), req))
    assert (outcome.status, outcome.failure, outcome.retryable) == ("failed", "stalled", True)
    assert all_gone(json.loads((req.directory / "pids.json").read_text()))  # the leader and its grandchild


def test_an_attempt_that_keeps_beating_is_not_stalled(tmp_path):
    # Beats for 5 s, past a 3 s stall limit; the limit leaves room for a slow interpreter start on a loaded machine.
    req = request(tmp_path, "a1", lease=Lease(stall_after_s=3.0), beats=50, interval=0.1)
    outcome = asyncio.run(run(executor(), req))
    assert outcome.status == "succeeded", outcome.detail


def test_fencing_kills_a_running_attempt_and_refuses_its_late_package(tmp_path):
    req = request(tmp_path, "a1", child=True, linger=60)  # seals its package, then lives on

    async def scenario() -> AttemptOutcome:
        local = executor()
        submission = local.submit(req)
        await wait_for(req.directory / "pids.json")
        while not list(req.directory.glob("package-*")):
            await asyncio.sleep(0.02)
        assert local.poll("a1").state == "running" and local.poll("a1").heartbeat["attempt_id"] == "a1"
        local.fence("a1")
        return await asyncio.wait_for(submission.outcome(), 30)

    outcome = asyncio.run(scenario())
    assert (outcome.status, outcome.failure, outcome.package, outcome.retryable) == ("fenced", "fenced", None, False)
    assert list(req.directory.glob("package-*")), "the package exists on disk, and still is not returned"
    assert all_gone(json.loads((req.directory / "pids.json").read_text()))


def test_an_attempt_fenced_before_it_starts_never_runs(tmp_path):
    local = executor()
    local.fence("a1")
    req = request(tmp_path, "a1")
    outcome = asyncio.run(run(local, req))
    assert outcome.status == "fenced" and not (req.directory / "job.json").exists()


def test_close_cancels_running_attempts(tmp_path):
    req = request(tmp_path, "a1", linger=60)

    async def scenario() -> AttemptOutcome:
        local = executor()
        submission = local.submit(req)
        await wait_for(req.directory / "heartbeat.json")
        await local.close()
        return await submission

    outcome = asyncio.run(scenario())
    assert (outcome.status, outcome.failure, outcome.retryable) == ("failed", "cancelled", False)


def test_cancel_stops_one_request_queued_or_running(tmp_path):
    running, queued = request(tmp_path, "a1", linger=60), request(tmp_path, "a2")

    async def scenario() -> tuple[AttemptOutcome, AttemptOutcome]:
        local = executor()
        first, second = local.submit(running), local.submit(queued)
        await wait_for(running.directory / "heartbeat.json")
        assert local.poll("a2").state == "queued"
        local.cancel("a2")
        local.cancel("a1")
        return await first, await second

    first, second = asyncio.run(scenario())
    assert (first.failure, second.failure) == ("cancelled", "cancelled")
    assert not (queued.directory / "job.json").exists(), "a request cancelled while queued never starts"


def test_cancelling_the_awaiter_kills_its_process_group_and_frees_the_cores(tmp_path):
    req = request(tmp_path, "a1", child=True, linger=60)
    local = executor()

    async def scenario() -> None:
        task = asyncio.ensure_future(run(local, req))
        await wait_for(req.directory / "pids.json")
        with pytest.raises(ExecutorError, match="fresh id"):
            local.submit(req)
        assert local.active() == {"a1": {"executor": "local", "slot": f"cpu{CPU}", "cpus": str(CPU), "threads": "1"}}
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(scenario())
    assert all_gone(json.loads((req.directory / "pids.json").read_text()))
    assert not local.active() and len(local.timeline()) == 1


def test_a_dead_controllers_request_is_recovered_by_a_new_executor(tmp_path):
    req = request(tmp_path, "a1", child=True, linger=60)

    async def scenario() -> tuple[bool, AttemptOutcome]:
        first = executor()
        submission = first.submit(req)
        await wait_for(req.directory / "pids.json")
        # the controller that holds ``first`` is gone; a new one recovers the request by its directory
        recovered = executor().recover("a1", req.directory)
        return recovered, await asyncio.wait_for(submission.outcome(), 30)

    recovered, outcome = asyncio.run(scenario())
    assert recovered and outcome.failure == "killed"
    assert all_gone(json.loads((req.directory / "pids.json").read_text()))
    assert not executor().recover("a1", req.directory), "nothing is left to recover"
    assert not executor().recover("a2", req.directory), "another request's directory is not touched"


def test_cores_bound_concurrency(tmp_path):
    local = executor(CORES, share=Resources(cpus=1))
    requests = [request(tmp_path, f"a{i}", beats=6, interval=0.1) for i in range(4)]

    async def scenario() -> list[AttemptOutcome]:
        return await asyncio.gather(*(run(local, r) for r in requests))

    outcomes = asyncio.run(scenario())
    assert [o.status for o in outcomes] == ["succeeded"] * 4
    spans = local.timeline()
    events = sorted([(s.started, 1) for s in spans] + [(s.ended, -1) for s in spans])
    running = peak = 0
    for _, step in events:
        running += step
        peak = max(peak, running)
    assert peak == len(CORES)
    assert {o.resources["cpus"] for o in outcomes} == {str(c) for c in CORES}
    # the first ones started at once; the others waited for a core (paper Fig. 4's "waiting")
    waits = sorted(o.waited_s for o in outcomes)
    assert waits[0] < 0.2 and waits[-1] > 0.3


def test_heldout_never_overlaps_in_loop_work_and_in_loop_work_overlaps(tmp_path):
    """The paper's resource policy, read off the recorded timeline: two attempts run side by side; held-out
    evaluations queued behind them wait for both to end although a core is free, run side by side, and hold
    back the in-loop request queued after them."""
    local = executor(CORES, share=Resources(cpus=1))
    order = [
        request(tmp_path, "a1", beats=6, interval=0.1),
        evaluation(tmp_path, "h1", "heldout", seconds=0.5),
        evaluation(tmp_path, "h2", "heldout", seconds=0.5),
        request(tmp_path, "a2", beats=2),
        evaluation(tmp_path, "base", seconds=0.1),
    ]
    if len(CORES) > 1:
        order.insert(1, request(tmp_path, "a0", beats=6, interval=0.1))

    async def scenario() -> list[AttemptOutcome]:
        submissions = [local.submit(r) for r in order]
        return [await s for s in submissions]

    outcomes = asyncio.run(scenario())
    assert all(o.status == "succeeded" for o in outcomes), [o.detail for o in outcomes]
    spans = {s.request_id: s for s in local.timeline()}
    held = [s for s in spans.values() if s.kind == "heldout"]
    in_loop = [s for s in spans.values() if s.kind in IN_LOOP_KINDS]
    assert not any(overlap(h, i) for h in held for i in in_loop)
    assert spans["h1"].started >= max(spans[r].ended for r in spans if r in ("a0", "a1"))
    assert spans["a2"].started >= max(s.ended for s in held), "first come, first served"
    if len(CORES) > 1:
        assert overlap(spans["a0"], spans["a1"]), "training attempts may overlap each other's evaluation"
        assert overlap(spans["h1"], spans["h2"])


def test_declared_resources_reach_the_engine_process(tmp_path):
    cpu_req = request(tmp_path, "a1", record=True)
    gpu_req = request(tmp_path, "a2", record=True)
    asyncio.run(run(executor(), cpu_req))
    on_gpu = LocalExecutor(cpus=[CPU], gpus=["1"], share=Resources(cpus=1, gpus=1), program=FAKE, poll_s=0.05)
    gpu_outcome = asyncio.run(run(on_gpu, gpu_req))
    on_cpu = json.loads((cpu_req.directory / "seen.json").read_text())
    seen_gpu = json.loads((gpu_req.directory / "seen.json").read_text())
    assert on_cpu == {"cuda_visible_devices": "", "omp_num_threads": "1", "affinity": [CPU]}
    assert seen_gpu["cuda_visible_devices"] == "1" and gpu_outcome.resources == {
        "executor": "local",
        "slot": "gpu1",
        "cpus": str(CPU),
        "cuda_visible_devices": "1",
        "threads": "1",
    }
    threaded = evaluation(tmp_path, "two-threads", "sampling", record=True)
    threaded = EngineRequest(
        "sampling", "t", threaded.command, threaded.directory, threaded.job, Resources(cpus=len(CORES), threads=2)
    )
    outcome = asyncio.run(run(executor(CORES), threaded))
    assert json.loads((threaded.directory / "seen.json").read_text()) == {"omp_num_threads": "2"}
    assert outcome.resources["threads"] == "2" and outcome.resources["cpus"] == cpu_list(CORES)


def test_requests_beyond_the_machine_are_refused_with_the_fix(tmp_path):
    local = executor(custom={"nvme": 1})
    base = request(tmp_path, "a1")
    for resources, says in [
        (Resources(cpus=len(usable_cpus()) + 1), "CPU cores"),
        (Resources(gpus=1), "GPUs"),
        (Resources(memory_gb=10**6), "memory"),
        (Resources(custom={"tpu": 1}), "custom resource 'tpu'"),
        (Resources(custom={"nvme": 2}), "custom resource 'nvme'"),
    ]:
        asked = EngineRequest(base.kind, base.request_id, base.command, base.directory, base.job, resources)
        with pytest.raises(ExecutorError, match=says):
            local.resolve(asked.resources)
    with pytest.raises(ExecutorError, match="must be > 0"):
        Resources(memory_gb=0)
    with pytest.raises(ExecutorError, match="unknown request kind"):
        EngineRequest("training", "x", ("engine",), tmp_path, base.job)  # type: ignore[arg-type]
    with pytest.raises(ExecutorError, match="cannot use"):
        LocalExecutor(cpus=[max(usable_cpus()) + 1000])


def test_custom_resources_and_memory_are_held_while_a_request_runs(tmp_path):
    local = executor(CORES, share=Resources(cpus=1), custom={"nvme": 1})
    first, second = (request(tmp_path, name, beats=4, interval=0.1) for name in ("a1", "a2"))
    first, second = (
        EngineRequest(r.kind, r.request_id, r.command, r.directory, r.job, Resources(cpus=1, custom={"nvme": 1}))
        for r in (first, second)
    )

    async def scenario() -> list[AttemptOutcome]:
        return await asyncio.gather(run(local, first), run(local, second))

    outcomes = asyncio.run(scenario())
    spans = {s.request_id: s for s in local.timeline()}
    assert [o.status for o in outcomes] == ["succeeded"] * 2
    assert not overlap(spans["a1"], spans["a2"]), "one unit of nvme: the second waits for the first"
    assert outcomes[0].resources["custom.nvme"] == "1"


def test_capacity_counts_the_requests_that_fit_side_by_side():
    """What the held-out pass splits its checkpoints by: how many requests of a shape run at once."""
    local = executor(CORES, share=Resources(cpus=1), custom={"nvme": 3}, memory_gb=4)
    assert local.capacity(Resources(cpus=1, threads=1)) == len(CORES)
    assert local.capacity(Resources()) == len(CORES)  # the share: one core each
    assert local.capacity(Resources(cpus=1, custom={"nvme": 2})) == 1
    assert local.capacity(Resources(cpus=1, memory_gb=3)) == 1
    assert executor(CORES, share=Resources(cpus=1), max_running=1).capacity(Resources(cpus=1)) == 1
    assert executor(CORES).capacity(Resources()) == 1  # the default share takes every core
    with pytest.raises(ExecutorError, match="GPUs"):
        local.capacity(Resources(gpus=1))  # never grantable: refused as submit refuses it


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
    assert Slot("x", cpus=(0, 1)).environment(threads=1)["OMP_NUM_THREADS"] == "1"


def test_the_real_engine_runs_through_the_executor_and_records_its_threads(tmp_path):
    world = build_world(tmp_path / "world")
    job = sft_job(world, "exec-a1")
    local = LocalExecutor(share=Resources(cpus=1), poll_s=0.2)
    outcome = asyncio.run(run(local, attempt_request(job, tmp_path / "attempt")))
    assert outcome.status == "succeeded", outcome.detail
    manifest = open_package(outcome.package).manifest
    assert (manifest.attempt_id, manifest.trial_id, manifest.status) == ("exec-a1", job.trial_id, "completed")
    assert json.loads((tmp_path / "attempt" / "heartbeat.json").read_text())["phase"] == "done"
    assert manifest.resources == {**outcome.resources, "torch_threads": "1"}
