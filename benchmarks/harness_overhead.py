"""Harness overhead with the simulated Engine, as ratios to a bare store-transition loop (issue 7).

On the dry run's virtual clock, strategy building, training and evaluation take no real time, so
the real wall time a Trial takes is Harness overhead: views, admission's static check, commits,
memory publication, ranking. Two measurements:

1. Overhead per Trial (target <= 200 ms, median): a one-Coordinator dry run, where Trials run one
   after another; a Trial's overhead is the wall time between consecutive Run-Memory publications
   (its proposal, build, bind, attempt, analysis and both memory updates).
2. Slot idle time while work is queued (target <= 5% of the run, virtual time): 3 Coordinators x
   5 Plans on N simulated executor slots; at every instant, min(idle slots, queued attempts) is
   slot time wasted while an attempt waited.

Both run through the one executor path (``executors.factory`` -> the simulated Engine's executor),
as ``ade run --dry-run`` does.

3. With ``--heldout-run RUN``: the wall time of the report's held-out pass (every scored Trial's
   checkpoint of a completed real Run, as ``ade run`` evaluates them after final selection) on a
   copy of RUN without its held-out store; with ``--baseline-tree DIR`` the same pass first runs
   with the code checked out in DIR (e.g. ``git worktree add --detach DIR <commit>``), so the two
   wall times and their ratio come from the same machine in one run. ``--baseline-run RUN0`` gives
   the baseline its own Run of the same config (one made by its code, whose packages and stored
   settings it reads).

4. With ``--executors``: the executor's own overhead per request, ``local`` against ``ray`` on a Ray
   cluster the script starts on loopback (``executors.ray.local_cluster``): the wall time of a
   request whose command does nothing, less the same command run directly (target: Ray <= 1.5x local
   and <= 300 ms); and slot idle while work is queued with 3 Coordinators submitting requests of a
   0.3 s command to 2 slots on each (target <= 5%), after one warm-up request per slot: a fresh Ray
   driver starts its worker processes on its first requests, once per Run, and that wait is printed
   on its own. A real Trial adds the per-request overhead once per attempt.

Baseline, measured in the same process: one bare store transition (an event plus one document).
Exits 1 when a target fails. ``--quick`` runs both measurements at tiny sizes in seconds and checks no
target (CI runs it to keep the script working; its figures are not measurements).
Run: .venv/bin/python benchmarks/harness_overhead.py [--quick] [--help]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "examples" / "tiny-data-selection.toml"


def baseline_transition_ms(count: int, directory: Path) -> float:
    """Median wall time of one bare store transition writing one small document."""
    from ade_core.schemas.memory import RunMemory
    from ade_core.store import RunStore

    times = []
    with RunStore.open(directory) as store:
        for i in range(count):
            memory = RunMemory(version=i, parent=None, revision=0, source_trials=(), source_digests=(), findings=())
            start = time.perf_counter()
            with store.transition("bench", actor="harness", subject="bench", payload={"i": i}) as tx:
                tx.put("run_memory", f"v{i}", memory)
            times.append(time.perf_counter() - start)
    return 1000 * statistics.median(times)


def overhead_per_trial_ms(plans: int, directory: Path) -> tuple[list[float], float]:
    """Per-Trial wall times (ms) of a sequential dry run, and the run's total wall time (s)."""
    from ade_core.config import load_config
    from ade_core.harness.run import drive_run, init_run
    from ade_core.store import RunStore

    loaded = load_config(CONFIG, ["budget.coordinators=1", f"budget.plans_per_coordinator={plans}"])
    init_run(directory, loaded, dry_run=True)
    start = time.perf_counter()
    assert drive_run(directory) == "completed"
    total = time.perf_counter() - start
    with RunStore.open(directory) as store:
        events = store.events()
    marks = [datetime.fromisoformat(events[0].at)]
    marks += [datetime.fromisoformat(e.at) for e in events if e.kind == "run_memory_published"]
    return [1000 * (b - a).total_seconds() for a, b in zip(marks, marks[1:], strict=False)], total


def idle_while_queued(coordinators: int, plans: int, slots: int, directory: Path) -> tuple[float, float, float, int]:
    """(idle slot-seconds while an attempt was queued, run virtual seconds, busy share, attempts)."""
    from ade_core.config import load_config
    from ade_core.harness.run import RunController, SimulationSettings, init_run, last_clock_reading, open_harness
    from ade_core.harness.simulated import VirtualClock, run_virtual
    from ade_core.store import RunStore

    loaded = load_config(CONFIG, [f"budget.coordinators={coordinators}", f"budget.plans_per_coordinator={plans}"])
    init_run(directory, loaded, dry_run=True, simulation=SimulationSettings(engine_slots=slots))
    with RunStore.open(directory) as store:
        clock = VirtualClock(last_clock_reading(store))

        async def main():  # type: ignore[no-untyped-def]
            h = open_harness(store, clock=clock)
            assert await RunController(h).drive() == "completed"
            return h.executor.timeline()

        spans = run_virtual(main(), clock)
        duration = clock.now()
    spans = [(s.request_id, s.queued, s.started, s.ended) for s in spans if s.kind in ("attempt", "reference")]
    points = sorted({t for _, q, b, e in spans for t in (q, b, e)} | {0.0, duration})
    idle = busy = 0.0
    for left, right in zip(points, points[1:], strict=False):
        middle = (left + right) / 2
        running = sum(1 for _, _, b, e in spans if b <= middle < e)
        queued = sum(1 for _, q, b, _ in spans if q <= middle < b)
        idle += (right - left) * min(slots - running, queued)
        busy += (right - left) * running
    return idle, duration, busy / (slots * duration), len(spans)


HELDOUT_PASS = """
import json, sys, time
from pathlib import Path
from ade_core.harness.heldout import heldout_per_trial
start = time.perf_counter()
done = heldout_per_trial(Path(sys.argv[1]), final=True, per_trial=True)
print(json.dumps({"seconds": time.perf_counter() - start, "evaluations": len(done)}))
"""


def heldout_pass(run_dir: Path, work: Path, tree: Path | None) -> tuple[float, int]:
    """(wall seconds, evaluations) of the held-out pass over a copy of ``run_dir`` (code from ``tree`` if given)."""
    import json
    import os
    import shutil
    import subprocess

    copy = work / ("baseline" if tree else "current")
    shutil.copytree(run_dir, copy, ignore=shutil.ignore_patterns("heldout"))
    env = dict(os.environ)
    if tree is not None:
        paths = [tree, tree / "sandbox", *sorted((tree / "plugins").glob("*"))]
        env["PYTHONPATH"] = os.pathsep.join(str(path) for path in paths)
    done = subprocess.run(
        [sys.executable, "-P", "-c", HELDOUT_PASS, str(copy)], env=env, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise SystemExit(f"the held-out pass failed:\n{done.stderr[-3000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    return float(result["seconds"]), int(result["evaluations"])


NOOP = 'import json; print(json.dumps({"scores": {}, "missing_reason": None}))'
SLEEP = 'import json, time; time.sleep(0.3); print(json.dumps({"scores": {}, "missing_reason": None}))'


def _executors(address: str, program: list[str]):  # type: ignore[no-untyped-def]
    from ade_core.executors.base import Resources
    from ade_core.executors.local import LocalExecutor
    from ade_core.executors.ray import RayExecutor

    one = Resources(cpus=1, threads=1)
    return {
        "local": LocalExecutor(share=one, poll_s=0.05, program=program),
        "ray": RayExecutor(address, share=one, poll_s=0.05, program=program),
    }


def _request(name: str, directory: Path):  # type: ignore[no-untyped-def]
    from ade_core.executors.base import JOB_PLACEHOLDER, EngineRequest, Lease
    from ade_core.schemas.common import Model

    command = ("engine", "base-eval", JOB_PLACEHOLDER)
    return EngineRequest("base_eval", name, command, directory / name, Model(), lease=Lease(None))


def executor_overhead(address: str, count: int, directory: Path) -> dict[str, float]:
    """Median ms per request of a do-nothing command through each executor, less the command run directly."""
    import asyncio
    import subprocess

    from ade_core.executors.base import run

    program = [sys.executable, "-S", "-c", NOOP]
    direct = []
    for _ in range(count):
        start = time.perf_counter()
        subprocess.run([*program, "engine", "base-eval", "job.json"], capture_output=True, check=True)
        direct.append(time.perf_counter() - start)
    found = {"direct": 1000 * statistics.median(direct)}
    for kind, executor in _executors(address, program).items():
        walls = []
        for i in range(count):
            request = _request(f"{kind}-{i}", directory)
            start = time.perf_counter()
            outcome = asyncio.run(run(executor, request))
            walls.append(time.perf_counter() - start)
            assert outcome.status == "succeeded", outcome.detail
        found[kind] = 1000 * statistics.median(walls) - found["direct"]
    return found


def executor_idle(address: str, coordinators: int, per: int, directory: Path) -> dict[str, tuple[float, float]]:
    """Per executor: (share of slot time idle while a request was queued, 3 Coordinators x ``per`` 0.3 s requests
    on 2 slots; ms the first requests of the fresh executor waited to start).

    Each executor first runs one request per slot at once: a fresh Ray driver starts its worker processes and
    ships the task function then, once per Run. That wait is reported on its own and left out of the idle share,
    which measures the steady state a Run spends its time in."""
    import asyncio

    from ade_core.executors.base import run

    found = {}
    for kind, executor in _executors(address, [sys.executable, "-S", "-c", SLEEP]).items():

        async def coordinator(c: int, executor=executor, kind=kind) -> None:  # type: ignore[no-untyped-def]
            for i in range(per):
                outcome = await run(executor, _request(f"{kind}-c{c}-{i}", directory))
                assert outcome.status == "succeeded", outcome.detail

        async def everything(executor=executor, kind=kind) -> None:  # type: ignore[no-untyped-def]
            await asyncio.gather(*(run(executor, _request(f"{kind}-warm-{s}", directory)) for s in range(2)))
            await asyncio.gather(*(coordinator(c) for c in range(coordinators)))

        asyncio.run(everything())
        spans = [(s.request_id, s.queued, s.started, s.ended) for s in executor.timeline()]
        cold = max(started - queued for rid, queued, started, _ in spans if "-warm-" in rid)
        found[kind] = (idle_share([span for span in spans if "-warm-" not in span[0]], 2), 1000 * cold)
    return found


def idle_share(spans: list[tuple[str, float, float, float]], slots: int) -> float:
    """Slot time idle while a request was queued, as a share of all slot time from the first queueing to the end."""
    origin = min(q for _, q, _, _ in spans)
    end = max(e for _, _, _, e in spans)
    points = sorted({t for _, q, b, e in spans for t in (q, b, e)})
    idle = 0.0
    for left, right in zip(points, points[1:], strict=False):
        middle = (left + right) / 2
        running = sum(1 for _, _, b, e in spans if b <= middle < e)
        queued = sum(1 for _, q, b, _ in spans if q <= middle < b)
        idle += (right - left) * max(0, min(slots - running, queued))
    return idle / (slots * (end - origin))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--plans", type=int, default=10, help="Plans of the sequential overhead run.")
    parser.add_argument("--coordinators", type=int, default=3, help="Coordinators of the slot run.")
    parser.add_argument("--plans-per-coordinator", type=int, default=5, help="Plans per Coordinator (slot run).")
    parser.add_argument("--slots", type=int, default=2, help="Simulated executor slots (N).")
    parser.add_argument("--transitions", type=int, default=300, help="Bare transitions for the baseline.")
    parser.add_argument("--target-ms", type=float, default=200.0, help="Median overhead per Trial target.")
    parser.add_argument("--idle-target", type=float, default=0.05, help="Idle-while-queued share target.")
    parser.add_argument("--quick", action="store_true", help="tiny sizes, no target checked (seconds; CI)")
    parser.add_argument("--heldout-run", type=Path, help="A completed real Run: time its held-out pass.")
    parser.add_argument("--baseline-tree", type=Path, help="A checkout whose held-out pass is the baseline.")
    parser.add_argument("--baseline-run", type=Path, help="The baseline's own Run (default: --heldout-run).")
    parser.add_argument("--executors", action="store_true", help="local vs ray overhead (starts a local Ray cluster)")
    args = parser.parse_args()
    if args.executors:
        from ade_core.executors.ray import local_cluster

        count = 3 if args.quick else 20
        with tempfile.TemporaryDirectory() as tmp, local_cluster(cpus=2) as cluster:
            overhead = executor_overhead(cluster["address"], count, Path(tmp))
            idle = executor_idle(cluster["address"], 3, 2 if args.quick else 5, Path(tmp))
        ratio = overhead["ray"] / max(overhead["local"], 1e-9)
        print(f"baseline: the do-nothing command run directly  {overhead['direct']:8.1f} ms (median of {count})")
        for kind in ("local", "ray"):
            share, cold = idle[kind]
            print(f"executor overhead per request ({kind:5})        {overhead[kind]:8.1f} ms; idle while queued "
                  f"{100 * share:.2f}% (C=3, 2 slots); first requests waited {cold:.0f} ms to start")  # fmt: skip
        print(f"ray / local overhead: {ratio:.2f}")
        if args.quick:
            print("quick: tiny sizes; targets not checked")
            return 0
        failed = [
            f"{name} failed"
            for name, ok in (
                ("ray <= 1.5x local", ratio <= 1.5),
                ("ray <= 300 ms", overhead["ray"] <= 300),
                ("local idle <= 5%", idle["local"][0] <= 0.05),
                ("ray idle <= 5%", idle["ray"][0] <= 0.05),
            )
            if not ok
        ]
        print("FAILED: " + "; ".join(failed) if failed else "targets met")
        return 1 if failed else 0
    if args.heldout_run is not None:
        with tempfile.TemporaryDirectory() as tmp:
            passes = [("current", None)] + ([("baseline", args.baseline_tree)] if args.baseline_tree else [])
            runs = {"current": args.heldout_run, "baseline": args.baseline_run or args.heldout_run}
            timed = {name: heldout_pass(runs[name], Path(tmp), tree) for name, tree in reversed(passes)}
        for name, (seconds, count) in timed.items():
            print(f"held-out pass ({name}): {count} evaluations in {seconds:.1f} s")
        if "baseline" in timed:
            print(f"current / baseline wall time: {timed['current'][0] / timed['baseline'][0]:.2f}")
        return 0
    if args.quick:
        args.plans, args.coordinators, args.plans_per_coordinator, args.slots, args.transitions = 2, 2, 1, 1, 10

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        base_ms = baseline_transition_ms(args.transitions, root / "baseline")
        per_trial, total = overhead_per_trial_ms(args.plans, root / "sequential")
        idle, duration, busy_share, attempts = idle_while_queued(
            args.coordinators, args.plans_per_coordinator, args.slots, root / "slots"
        )
    median = statistics.median(per_trial)
    idle_share = idle / (args.slots * duration)
    print(f"baseline: bare store transition             {base_ms:8.2f} ms (median of {args.transitions})")
    print(
        f"overhead per Trial (C=1, {len(per_trial)} Trials)        {median:8.1f} ms median, "
        f"max {max(per_trial):.1f} ms = {median / base_ms:.0f}x a bare transition; run {total:.2f} s wall"
    )
    print(
        f"slots (C={args.coordinators} x B_P={args.plans_per_coordinator}, N={args.slots}, {attempts} attempts): "
        f"idle while queued {idle:.0f} slot-s of {args.slots * duration:.0f} = {100 * idle_share:.2f}%; "
        f"busy {100 * busy_share:.1f}% of slot time"
    )
    if args.quick:
        print("quick: tiny sizes; targets not checked (run without --quick to measure)")
        return 0
    failed = []
    if median > args.target_ms:
        failed.append(f"overhead per Trial {median:.1f} ms > {args.target_ms:g} ms")
    if idle_share > args.idle_target:
        failed.append(f"idle while queued {100 * idle_share:.2f}% > {100 * args.idle_target:g}%")
    print("FAILED: " + "; ".join(failed) if failed else "targets met")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
