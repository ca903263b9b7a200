"""The Ray executor on a real local Ray cluster: a head and a second node process on loopback, started once per
test session (``ray_cluster`` in tests/conftest.py). Most tests run the stand-in Engine (``fake_engine.py``);
the real Engine's Base evaluation is compared here, its search Trials on a whole Run (tests/e2e/test_ray_run.py)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from pathlib import Path

import pytest
from test_local_executor import FAKE, alive, all_gone, evaluation, overlap, request, wait_for  # noqa: E402

from ade_core.engine.package import open_package
from ade_core.errors import ExecutorError
from ade_core.executors.base import IN_LOOP_KINDS, AttemptOutcome, EngineRequest, Resources, run
from ade_core.executors.ray import RayExecutor


@pytest.fixture(scope="module")
def ray_executor_factory(ray_cluster):
    def make(**options: object) -> RayExecutor:
        options.setdefault("share", Resources(cpus=1))  # unset, a request would take the largest node's 2 CPUs
        return RayExecutor(ray_cluster["address"], program=FAKE, poll_s=0.05, **options)

    return make


def test_an_attempt_runs_as_a_ray_task_and_its_package_is_checked(tmp_path, ray_executor_factory):
    executor = ray_executor_factory()
    req = request(tmp_path, "a1", beats=3)
    outcome = asyncio.run(run(executor, req))
    assert (outcome.status, outcome.failure, outcome.exit_code) == ("succeeded", None, 0), outcome.detail
    assert open_package(outcome.package).manifest.attempt_id == "a1"
    assert outcome.resources["executor"] == "ray" and outcome.resources["node"]
    assert "placement_group" not in outcome.resources  # one CPU: no placement group
    assert [(s.request_id, s.kind) for s in executor.timeline()] == [("a1", "attempt")]


def test_failures_are_typed_as_on_the_local_executor(tmp_path, ray_executor_factory):
    executor = ray_executor_factory()
    crashed = asyncio.run(run(executor, request(tmp_path, "a1", package=False, exit=1, stderr="boom")))
    typed = asyncio.run(run(executor, request(tmp_path, "a2", package=False, exit=2, stderr="EngineError: x")))
    assert (crashed.failure, crashed.retryable) == ("crashed", True) and "boom" in crashed.detail
    assert (typed.failure, typed.retryable) == ("engine_error", False)


def test_a_multi_cpu_request_runs_in_its_own_placement_group(tmp_path, ray_executor_factory):
    executor = ray_executor_factory()
    req = request(tmp_path, "a1", record=True)
    two = EngineRequest(req.kind, req.request_id, req.command, req.directory, req.job, Resources(cpus=2, threads=2))
    outcome = asyncio.run(run(executor, two))
    assert outcome.status == "succeeded", outcome.detail
    assert outcome.resources["placement_group"] and outcome.resources["threads"] == "2"
    assert json.loads((req.directory / "seen.json").read_text())["omp_num_threads"] == "2"


def test_a_second_node_receives_work(tmp_path, ray_executor_factory, ray_cluster):
    executor = ray_executor_factory()
    req = request(tmp_path, "a1")
    pinned = EngineRequest(
        req.kind, req.request_id, req.command, req.directory, req.job, Resources(cpus=1, custom={"second_node": 1})
    )
    there = asyncio.run(run(executor, pinned))
    here = asyncio.run(run(executor, request(tmp_path, "a2")))
    assert there.status == "succeeded", there.detail
    assert here.status == "succeeded", here.detail
    assert there.resources["node"] == ray_cluster["second_node_id"]


def test_a_killed_worker_is_a_retryable_failure_and_a_fresh_attempt_succeeds(tmp_path, ray_executor_factory):
    executor = ray_executor_factory()
    req = request(tmp_path, "a1", child=True, linger=60)

    async def scenario() -> AttemptOutcome:
        submission = executor.submit(req)
        await wait_for(req.directory / "pids.json")  # the Engine and its child are running
        marker = json.loads((req.directory / "process.json").read_text())
        os.kill(marker["worker"], signal.SIGKILL)  # the Ray worker dies mid-attempt
        return await asyncio.wait_for(submission.outcome(), 60)

    outcome = asyncio.run(scenario())
    assert (outcome.failure, outcome.retryable) == ("killed", True), outcome.detail
    assert all_gone(json.loads((req.directory / "pids.json").read_text()), within_s=10)
    retried = asyncio.run(run(executor, request(tmp_path, "a1.r1")))  # the Harness's fresh attempt id
    assert retried.status == "succeeded", retried.detail


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the parent-death signal is Linux's")
def test_an_engine_dies_with_its_worker_by_the_parent_death_signal_alone(tmp_path):
    """No executor cleans up here: a worker process running ``run_request`` is SIGKILLed, and its Engine goes
    with it (setpriv's, or the trampoline's, parent-death signal)."""
    import subprocess
    import time

    worker_code = (
        "import sys; from ade_core.executors.ray_worker import run_request; "
        "run_request('r1', ['engine', 'run'], '{}', sys.argv[1], {}, "
        "[sys.executable, '-c', 'import time; time.sleep(120)'])"
    )
    worker = subprocess.Popen([sys.executable, "-c", worker_code, str(tmp_path)])
    try:
        marker = tmp_path / "process.json"
        deadline = time.monotonic() + 30
        while not marker.exists():
            assert time.monotonic() < deadline and worker.poll() is None, "the worker never started its Engine"
            time.sleep(0.05)
        engine = json.loads(marker.read_text())["pid"]
        assert alive(engine)
    finally:
        worker.kill()
        worker.wait()
    assert all_gone([engine], within_s=10)


def test_fencing_cancels_the_task_and_kills_the_engine(tmp_path, ray_executor_factory):
    executor = ray_executor_factory()
    req = request(tmp_path, "a1", child=True, linger=60)

    async def scenario() -> AttemptOutcome:
        submission = executor.submit(req)
        await wait_for(req.directory / "pids.json")
        executor.fence("a1")
        return await asyncio.wait_for(submission.outcome(), 60)

    outcome = asyncio.run(scenario())
    assert (outcome.status, outcome.failure, outcome.package) == ("fenced", "fenced", None)
    assert all_gone(json.loads((req.directory / "pids.json").read_text()), within_s=10)


def test_a_task_that_never_starts_is_unscheduled_and_retryable(tmp_path, ray_executor_factory, ray_cluster):
    patient, executor = ray_executor_factory(), ray_executor_factory(pending_timeout_s=1.0)
    head = Resources(cpus=2)  # only the head node has two CPUs
    hog = request(tmp_path, "hog", beats=80, interval=0.05)
    hog = EngineRequest(hog.kind, hog.request_id, hog.command, hog.directory, hog.job, head)
    late = request(tmp_path, "late")
    late = EngineRequest(late.kind, late.request_id, late.command, late.directory, late.job, head)

    async def scenario() -> tuple[AttemptOutcome, AttemptOutcome]:
        first = patient.submit(hog)  # a worker may take more than a second to start the first time
        await wait_for(hog.directory / "process.json")
        second = executor.submit(late)  # the head's two CPUs are taken: nothing can place it
        return await first, await second

    first, second = asyncio.run(scenario())
    assert first.status == "succeeded", first.detail
    assert (second.failure, second.retryable) == ("unscheduled", True), second.detail


def test_heldout_never_overlaps_in_loop_work_on_ray(tmp_path, ray_executor_factory):
    executor = ray_executor_factory()
    order = [
        request(tmp_path, "a0", beats=6, interval=0.1),
        request(tmp_path, "a1", beats=6, interval=0.1),
        evaluation(tmp_path, "h1", "heldout", seconds=0.3),
        evaluation(tmp_path, "h2", "heldout", seconds=0.3),
        request(tmp_path, "a2", beats=2),
    ]

    async def scenario() -> list[AttemptOutcome]:
        submissions = [executor.submit(r) for r in order]
        return [await s for s in submissions]

    outcomes = asyncio.run(scenario())
    assert all(o.status == "succeeded" for o in outcomes), [o.detail for o in outcomes]
    spans = {s.request_id: s for s in executor.timeline()}
    held = [s for s in spans.values() if s.kind == "heldout"]
    in_loop = [s for s in spans.values() if s.kind in IN_LOOP_KINDS]
    assert not any(overlap(h, i) for h in held for i in in_loop)
    assert overlap(spans["a0"], spans["a1"])


def test_requests_the_cluster_can_never_grant_are_refused(ray_executor_factory):
    executor = ray_executor_factory()
    with pytest.raises(ExecutorError, match="can never grant"):
        executor.resolve(Resources(gpus=4))
    with pytest.raises(ExecutorError, match="custom_thing"):
        executor.resolve(Resources(custom={"custom_thing": 1}))


def test_capacity_sums_what_each_node_can_run(ray_executor_factory, ray_cluster):
    executor = ray_executor_factory()
    assert executor.capacity(Resources(cpus=1)) == int(ray_cluster["cpus"])  # the head's 2 and the second node's 1
    assert executor.capacity(Resources(cpus=2)) == 1  # only the head has two
    assert executor.capacity(Resources(cpus=1, custom={"second_node": 1})) == 1
    assert ray_executor_factory(max_running=2).capacity(Resources(cpus=1)) == 2


def test_the_executor_overhead_benchmark_runs_on_both_executors(tmp_path, ray_cluster):
    """benchmarks/harness_overhead.py --executors, at tiny sizes on the session's cluster (figures, not targets)."""
    import importlib.util

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "harness_overhead.py"
    spec = importlib.util.spec_from_file_location("harness_overhead", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    overhead = bench.executor_overhead(ray_cluster["address"], 2, tmp_path)
    idle = bench.executor_idle(ray_cluster["address"], 3, 1, tmp_path)
    assert set(overhead) == {"direct", "local", "ray"} and overhead["direct"] > 0
    assert set(idle) == {"local", "ray"} and all(0 <= share <= 1 and cold >= 0 for share, cold in idle.values())


def test_doctor_reports_the_cluster_and_the_sandbox_level_on_every_node(ray_cluster):
    from ade_core.config import load_config
    from ade_core.doctor import check_config, probe_machine, render_config

    root = Path(__file__).resolve().parents[2]
    config = root / "examples" / "tiny-data-selection-ci.toml"
    sets = ["operational.executor.kind=ray", f"operational.executor.address='{ray_cluster['address']}'"]
    report = check_config(str(config), load_config(config, sets), probe_machine())
    found = {r.key: r for r in report.requirements}
    cluster = found["[operational.executor].kind = 'ray'"]
    assert cluster.met and "2 node(s)" in cluster.detail and "second_node 1" in cluster.detail, cluster.detail
    workers = next(r for key, r in found.items() if key.endswith("on workers"))
    assert workers.detail.count("reaches") == 2, workers.detail  # one probe task on each node
    assert report.uses["operational.executor.address"] == ray_cluster["address"]
    assert "a reachable Ray cluster" in "\n".join(render_config(report))


def test_losing_the_node_that_runs_an_attempt_is_a_retryable_failure(tmp_path, ray_executor_factory):
    """Kept last in the module: it kills the second node's raylet, the node's Ray process."""
    executor = ray_executor_factory()
    req = request(tmp_path, "a1", child=True, linger=60)
    pinned = EngineRequest(
        req.kind, req.request_id, req.command, req.directory, req.job, Resources(cpus=1, custom={"second_node": 1})
    )

    async def scenario() -> AttemptOutcome:
        submission = executor.submit(pinned)
        await wait_for(req.directory / "pids.json")
        worker = json.loads((req.directory / "process.json").read_text())["worker"]
        raylet = int(Path(f"/proc/{worker}/stat").read_text().rsplit(")", 1)[1].split()[1])  # the worker's parent
        assert "raylet" in Path(f"/proc/{raylet}/cmdline").read_text()
        os.kill(raylet, signal.SIGKILL)
        return await asyncio.wait_for(submission.outcome(), 120)

    outcome = asyncio.run(scenario())
    assert outcome.status == "failed" and outcome.retryable, (outcome.failure, outcome.detail)
    assert outcome.failure in ("node_lost", "killed"), outcome.detail
    assert all_gone(json.loads((req.directory / "pids.json").read_text()), within_s=20)


@pytest.mark.trial
def test_the_real_engines_base_evaluation_on_ray_scores_as_on_the_local_executor(tmp_path, ray_cluster):
    from ade_core.config import load_config
    from ade_core.executors.factory import make_executor
    from ade_core.harness.base_model import engine_base_evaluator
    from ade_core.schemas.operational import ExecutorSettings

    config = Path(__file__).resolve().parents[2] / "examples" / "tiny-data-selection-ci.toml"
    loaded = load_config(config, ["evaluation.in_loop.limit=12", "evaluation.decoding.max_new_tokens=48"])
    resources = loaded.experiment.resources

    def scores(settings: ExecutorSettings, where: str) -> dict:
        executor = make_executor(settings, resources)

        async def evaluated():
            try:
                return await engine_base_evaluator(executor, loaded.experiment, loaded.base_dir, tmp_path / where)()
            finally:
                await executor.close()

        return asyncio.run(evaluated())

    local = scores(ExecutorSettings(), "local")
    on_ray = scores(ExecutorSettings(kind="ray", address=ray_cluster["address"]), "ray")
    assert isinstance(local, dict) and set(local) >= {"average_at_k", "pass_at_k"}, local
    assert on_ray == local
