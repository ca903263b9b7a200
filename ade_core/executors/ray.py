"""The Ray executor: every Engine request as a Ray task on an existing Ray cluster (``kind = "ray"``).

A request becomes one task of ``executors.ray_worker.run_request`` with the resources it declares
(``num_cpus``, ``num_gpus``, ``memory``, custom resources); a request for more than one CPU or GPU
runs in its own placement group (one bundle, ``STRICT_PACK``: its devices on one node), removed when
it ends. The worker runs the same ``ade`` command the local executor would, in the request's
directory, which must be shared between the controller and the workers (a local cluster's disk, or a
network file system); the controller opens the package from there and checks it against the digest
the worker computed.

Retries belong to the Harness: tasks run with ``max_retries = 0``. A task whose worker died is
``killed``, one whose node died is ``node_lost``, one that never started within ``pending_timeout_s`` is
``unscheduled``, all retryable; the Harness retries them with a fresh attempt id. Heartbeats,
stalls, fencing and cancellation work as on the local executor (a cancelled task kills its Engine's
process group on the worker), and so does the resource policy: the controller admits requests first
come first served, and a held-out request never runs beside in-loop work.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

from ade_core.engine.attempt import HEARTBEAT
from ade_core.engine.package import open_package
from ade_core.engine.threads import RESOURCES_ENV
from ade_core.errors import ExecutorError
from ade_core.executors.base import PACKAGE_KINDS, AttemptOutcome, EngineRequest, Resources
from ade_core.executors.local import declared, fill_share, kill_orphan
from ade_core.executors.queued import QueuedExecutor, now, read_beat, read_json
from ade_core.executors.ray_worker import PROCESS_FILE, manifest_digest, run_request
from ade_core.executors.slots import Slot

_THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")
_GRACE_S = 5.0  # a cancelled task still running after this long is force-cancelled (its worker ends)


def _lost_errors(ray: Any) -> tuple[type[Exception], ...]:
    """Ray's errors for a task whose node (or its raylet) went away."""
    return (ray.exceptions.NodeDiedError, ray.exceptions.ObjectLostError, ray.exceptions.LocalRayletDiedError)


class RayExecutor(QueuedExecutor):
    """Runs requests as Ray tasks on the cluster at ``address`` (``"auto"``: the one this machine belongs to).

    ``share`` is what a request that declares nothing gets (unset CPUs: every CPU of the largest node);
    ``max_running`` caps concurrent requests
    (None: the cluster's resources bound them, Ray queues the rest). ``program`` replaces the ``ade``
    invocation on the workers (tests run a stand-in Engine).
    """

    kind = "ray"

    def __init__(
        self,
        address: str = "auto",
        *,
        share: Resources | None = None,
        max_running: int | None = None,
        pending_timeout_s: float = 600.0,
        poll_s: float = 0.5,
        program: list[str] | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        super().__init__(max_running=max_running, poll_s=poll_s)
        import ray

        if pending_timeout_s <= 0:
            raise ExecutorError(f"pending_timeout_s must be > 0 (got {pending_timeout_s})")
        if not ray.is_initialized():
            try:
                ray.init(address=address, log_to_driver=False, logging_level=logging.ERROR)
            except (ConnectionError, RuntimeError) as exc:
                raise ExecutorError(
                    f"no Ray cluster at {address!r} ({exc}); start one (`ray start --head`, see docs/scale-out.md) "
                    "or set [operational.executor] address"
                ) from None
        self._cluster = {name: float(amount) for name, amount in ray.cluster_resources().items()}
        self._nodes = [
            {name: float(amount) for name, amount in node["Resources"].items()}
            for node in ray.nodes()
            if node.get("Alive")
        ]
        self._largest_node_cpus = int(max((node.get("CPU", 0.0) for node in self._nodes), default=1.0)) or 1
        self._share = share or Resources()
        self._pending_timeout_s = pending_timeout_s
        self._program = list(program) if program else None
        self._env = dict(env or {})
        self._refs: dict[str, Any] = {}
        self._killed_for: dict[str, str] = {}
        self._stopped_at: dict[str, float] = {}  # when a running request was asked to stop
        self._remote = ray.remote(run_request)

    def cluster(self) -> dict[str, float]:
        """The cluster's total resources when the executor connected (CPU, GPU, memory, custom, nodes)."""
        return dict(self._cluster)

    def recover(self, request_id: str, directory: Path) -> bool:
        """Kill what a dead controller left running for ``request_id`` when its worker ran on this host.

        A task on another node dies with its controller's driver: Ray cancels the tasks a driver owned
        when the driver exits, and the worker kills its Engine's process group as it goes.
        """
        marker = read_json(Path(directory) / PROCESS_FILE)
        if not marker or marker.get("host") != socket.gethostname():
            return False
        return kill_orphan(Path(directory), request_id)

    # --- resources -----------------------------------------------------------------------------
    def resolve(self, asked: Resources) -> Resources:
        """``asked`` with the per-attempt share filled in; refused when no node of the cluster could run it
        (a task, placement group included, runs on one node)."""
        need = fill_share(asked, self._share, self._largest_node_cpus)
        wanted = _wanted(need)
        if not any(all(node.get(name, 0.0) >= amount for name, amount in wanted.items()) for node in self._nodes):
            asked_for = ", ".join(f"{amount:g} {name}" for name, amount in wanted.items())
            have = "; ".join(
                ", ".join(f"{amount:g} {name}" for name, amount in sorted(node.items()) if not name.startswith("node:"))
                for node in self._nodes
            )
            raise ExecutorError(
                f"the Ray cluster can never grant {asked_for}: no node has them (nodes: {have}); lower the request "
                "(the config's [resources]) or add a node that has them"
            )
        return need

    def _room(self, need: Resources) -> int:
        wanted = _wanted(need)
        if not wanted:
            return 1
        return sum(min(int(node.get(name, 0.0) // amount) for name, amount in wanted.items()) for node in self._nodes)

    def _fits(self, need: Resources) -> bool:
        return True  # Ray queues a task until a node has its resources

    def _grant(self, need: Resources) -> Slot:
        return Slot("ray")

    def _release(self, slot: Slot, need: Resources) -> None:
        return None

    def _recorded(self, slot: Slot, need: Resources) -> dict[str, str]:
        return {"executor": "ray", "cpus": str(need.cpus), "gpus": str(need.gpus or 0), **declared(need)}

    def _stop(self, request_id: str, reason: str) -> None:
        ref = self._refs.get(request_id)
        if ref is not None:
            import ray

            self._killed_for.setdefault(request_id, reason)
            self._stopped_at.setdefault(request_id, time.monotonic())
            ray.cancel(ref)  # the worker gets KeyboardInterrupt and kills its Engine's process group

    # --- one request ---------------------------------------------------------------------------
    async def _run_on(self, slot: Slot, need: Resources, request: EngineRequest, queued_at: datetime) -> AttemptOutcome:
        from ray.util.placement_group import placement_group, remove_placement_group
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        rid, directory = request.request_id, Path(request.directory)
        started_at = now()
        directory.mkdir(parents=True, exist_ok=True)
        (directory / HEARTBEAT).unlink(missing_ok=True)
        (directory / PROCESS_FILE).unlink(missing_ok=True)
        recorded = self._recorded(slot, need)
        threads = str(need.threads)
        env = {**self._env, **dict.fromkeys(_THREAD_VARIABLES, threads), RESOURCES_ENV: json.dumps(recorded)}
        options: dict[str, Any] = {
            "num_cpus": need.cpus,
            "num_gpus": need.gpus or 0,
            "max_retries": 0,
            "retry_exceptions": False,
            "name": f"ade:{request.kind}:{rid}",
        }
        if need.custom:
            options["resources"] = dict(need.custom)
        if need.memory_gb is not None:
            options["memory"] = int(need.memory_gb * 2**30)
        group = None
        if (need.cpus or 0) > 1 or (need.gpus or 0) > 1:  # a multi-device request: its devices on one node
            bundle = {"CPU": float(need.cpus or 0), **({"GPU": float(need.gpus)} if need.gpus else {})}
            bundle.update({name: float(amount) for name, amount in need.custom.items()})
            group = placement_group([bundle], strategy="STRICT_PACK", name=f"ade:{rid}")
            options["scheduling_strategy"] = PlacementGroupSchedulingStrategy(group, placement_group_bundle_index=0)
            waited = await self._group_ready(group, rid)
            if waited is not None:  # never placed, or stopped while it waited: no task was submitted
                remove_placement_group(group)
                reason = self._killed_for.pop(rid, None) or waited
                detail = f"no node could hold the placement group ({bundle}) within {self._pending_timeout_s:g}s"
                return self._outcome(request, recorded, started_at, reason, detail, queued_at=queued_at)
        job = request.job.model_dump_json()
        ref = self._remote.options(**options).remote(
            rid, list(request.command), job, str(directory), env, self._program
        )
        self._refs[rid] = ref
        if self._closed or rid in self._fenced or rid in self._cancelled:
            self._stop(rid, "fenced" if rid in self._fenced else "cancelled")
        try:
            info, failure = await self._watch(ref, request, directory)
        except asyncio.CancelledError:
            self._stop(rid, "cancelled")
            raise
        finally:
            self._refs.pop(rid, None)
            self._stopped_at.pop(rid, None)
            if group is not None:
                remove_placement_group(group)
        killed_for = self._killed_for.pop(rid, None)
        if info is None:  # the task itself failed: a Ray-level failure, or we stopped it
            reason = killed_for or failure[0]
            detail = {
                "stalled": f"no heartbeat progress for {request.lease.stall_after_s}s; task cancelled",
                "unscheduled": f"the task did not start within {self._pending_timeout_s:g}s; cancelled",
                "cancelled": "cancelled; task cancelled",
            }.get(reason, failure[1])
            kill_orphan(directory, rid)  # a worker that died leaves its Engine's group on this host
            return self._outcome(request, recorded, started_at, reason, detail, queued_at=queued_at)
        self._worker_times(rid, info, queued_at)
        recorded = {**recorded, "node": info["node"], "host": info["host"]}
        if info.get("placement_group"):
            recorded["placement_group"] = info["placement_group"]
        ours = {
            "stalled": "no heartbeat progress; task cancelled",
            "cancelled": "cancelled; task cancelled",
            "unscheduled": f"not started within {self._pending_timeout_s:g}s; cancelled (it ran anyway: refused)",
        }
        outcome = await asyncio.to_thread(
            self._judged, request, recorded, started_at, queued_at, int(info["exit_code"]), killed_for, ours
        )
        if outcome.package is not None and request.kind in PACKAGE_KINDS:
            found = manifest_digest(outcome.package)
            if found is None or found != info.get("package_digest"):
                sealed = info.get("package_digest")
                problem = f"package {outcome.package} differs from what the worker sealed ({found} != {sealed})"
                return self._outcome(request, recorded, started_at, "bad_package", problem, queued_at=queued_at)
            open_package(outcome.package)
        return outcome

    def _worker_times(self, request_id: str, info: dict[str, Any], queued_at: datetime) -> None:
        """The timeline's start and end from the worker's clock (when the command really ran), not from when
        this driver noticed; bounded by the queueing and now, so a node's clock skew cannot invert a span."""
        offset = time.monotonic() - time.time()
        queued = time.monotonic() - (now() - queued_at).total_seconds()
        ended = min(float(info["ended"]) + offset, time.monotonic())
        self._began[request_id] = min(max(float(info["began"]) + offset, queued), ended)
        self._ended[request_id] = ended

    async def _group_ready(self, group: Any, request_id: str) -> str | None:
        """Wait for a placement group to be placed: None once it is, else why not (unscheduled, fenced, cancelled)."""
        ready = asyncio.wrap_future(group.ready().future())
        deadline = time.monotonic() + self._pending_timeout_s
        while not (await asyncio.wait({ready}, timeout=self._poll_s))[0]:
            if self._closed or request_id in self._cancelled:
                return "cancelled"
            if request_id in self._fenced:
                return "fenced"
            if time.monotonic() > deadline:
                return "unscheduled"
        return None

    async def _watch(
        self, ref: Any, request: EngineRequest, directory: Path
    ) -> tuple[dict[str, Any] | None, tuple[str, str]]:
        """Wait for the task; stop it when it never starts or its heartbeat stalls. ``(result, (failure, detail))``."""
        import ray

        rid = request.request_id
        submitted = last_progress = time.monotonic()
        last_beat: Any = None
        future = asyncio.wrap_future(ref.future())
        while True:
            done, _ = await asyncio.wait({future}, timeout=self._poll_s)
            if done:
                break
            asked = self._stopped_at.get(rid)
            if asked is not None and time.monotonic() - asked > _GRACE_S:  # the interrupt did not land: end the worker
                self._stopped_at[rid] = float("inf")
                ray.cancel(ref, force=True)  # its Engine dies with it (parent-death signal); see kill_orphan below
            started = (directory / PROCESS_FILE).exists()
            if started and rid not in self._began:
                self._began[rid] = time.monotonic()  # the worker started it: the span's start, not our submission
            if not started and time.monotonic() - submitted > self._pending_timeout_s:
                self._stop(rid, "unscheduled")
            stall = request.lease.stall_after_s
            if started and stall is not None:
                beat = read_beat(directory / HEARTBEAT, rid)
                if beat is not None and beat != last_beat:
                    last_beat, last_progress = beat, time.monotonic()
                elif time.monotonic() - max(last_progress, submitted) > stall:
                    self._stop(rid, "stalled")
        try:
            return future.result(), ("", "")
        except ray.exceptions.TaskCancelledError:
            return None, ("cancelled", "the task was cancelled")
        except ray.exceptions.WorkerCrashedError as exc:
            return None, ("killed", f"the Ray worker died: {exc}"[:2000])
        except (
            ray.exceptions.NodeDiedError,
            ray.exceptions.ObjectLostError,
            ray.exceptions.LocalRayletDiedError,
        ) as exc:
            return None, ("node_lost", f"the node running the task was lost: {exc}"[:2000])
        except ray.exceptions.RayTaskError as exc:
            return None, ("crashed", f"the Ray task failed: {exc}"[-2000:])
        except ray.exceptions.RayError as exc:
            return None, ("node_lost", f"Ray could not run the task: {exc}"[:2000])


def _wanted(need: Resources) -> dict[str, float]:
    """``need`` as Ray resource amounts (memory in bytes), the zero ones left out."""
    wanted = {"CPU": float(need.cpus or 0), "GPU": float(need.gpus or 0), **need.custom}
    if need.memory_gb is not None:
        wanted["memory"] = need.memory_gb * 2**30
    return {name: amount for name, amount in wanted.items() if amount}


def _sandbox_level() -> dict[str, Any]:
    """Run on one node: the sandbox level the node reaches, and where it is."""
    import ray

    from ade_sandbox import probe

    return {"node": ray.get_runtime_context().get_node_id(), "host": socket.gethostname(), "level": probe().best_level}


def probe_cluster(address: str, timeout_s: float = 120.0) -> dict[str, Any]:
    """The cluster at ``address``: its total resources and, per alive node, its resources and the sandbox level
    a task there reaches (one probe task pinned to each node). Raises ExecutorError when it cannot connect."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    if not ray.is_initialized():
        try:
            ray.init(address=address, log_to_driver=False, logging_level=logging.ERROR)
        except (ConnectionError, RuntimeError) as exc:
            raise ExecutorError(f"no Ray cluster at {address!r} ({exc})") from None
    alive = [node for node in ray.nodes() if node.get("Alive")]
    probe = ray.remote(_sandbox_level)
    refs = [
        probe.options(
            num_cpus=0, scheduling_strategy=NodeAffinitySchedulingStrategy(node["NodeID"], soft=False)
        ).remote()
        for node in alive
    ]
    ready, _ = ray.wait(refs, num_returns=len(refs), timeout=timeout_s)
    levels = {found["node"]: found for found in ray.get(ready)}
    nodes = [
        {
            "node": node["NodeID"],
            "address": node.get("NodeManagerAddress"),
            "resources": {k: v for k, v in node["Resources"].items() if not k.startswith("node:")},
            "sandbox_level": levels.get(node["NodeID"], {}).get("level"),
        }
        for node in alive
    ]
    totals = {k: float(v) for k, v in ray.cluster_resources().items() if not k.startswith("node:")}
    return {"address": address, "resources": totals, "nodes": nodes}


@contextmanager
def local_cluster(cpus: int = 2, second_node: dict[str, float] | None = None) -> Iterator[dict[str, Any]]:
    """A Ray cluster on this machine for the length of the block: a head on loopback (no dashboard, no usage
    stats) and, with ``second_node``, a second node process with one CPU and those custom resources. Yields
    ``{"address", "second_node_id", "cpus"}`` with this process connected; stops both nodes after.

    The tests and the benchmark start their cluster this way; docs/scale-out.md gives the same commands.
    """
    import ray

    ray_cli = str(Path(sys.executable).with_name("ray"))
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    temp = tempfile.mkdtemp(prefix="ray", dir="/tmp")  # Ray's socket paths must stay short
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
    address = f"127.0.0.1:{port}"
    store = f"--object-store-memory={80 * 2**20}"  # ADE passes file paths, not objects

    def start(*args: str) -> None:
        done = subprocess.run([ray_cli, "start", *args], env=env, capture_output=True, text=True, timeout=180)
        if done.returncode != 0:
            raise ExecutorError(f"ray start {' '.join(args)} failed:\n{done.stdout[-1500:]}\n{done.stderr[-1500:]}")

    try:
        start(
            "--head", "--node-ip-address=127.0.0.1", f"--port={port}", "--include-dashboard=false",
            "--disable-usage-stats", f"--num-cpus={cpus}", store, f"--temp-dir={temp}",
        )  # fmt: skip
        if second_node is not None:
            start(
                f"--address={address}", "--node-ip-address=127.0.0.1", "--num-cpus=1",
                f"--resources={json.dumps(second_node)}", store, "--disable-usage-stats",
            )  # fmt: skip
        ray.init(address=address, log_to_driver=False, logging_level=logging.ERROR)
        second = [
            node["NodeID"]
            for node in ray.nodes()
            if node["Alive"] and second_node and all(node["Resources"].get(k) for k in second_node)
        ]
        yield {
            "address": address,
            "second_node_id": second[0] if second else None,
            "cpus": ray.cluster_resources()["CPU"],
        }
    finally:
        ray.shutdown()
        subprocess.run([ray_cli, "stop", "--force"], env=env, capture_output=True, timeout=120, check=False)
        shutil.rmtree(temp, ignore_errors=True)
