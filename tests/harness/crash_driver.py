"""Kill a dry-run controller at random points, resume it each time, and compare with an uninterrupted run.

Usage: python crash_driver.py WORKDIR SEED MIN_KILLS. Prints one JSON line:
``{"kills": n, "runs": r, "reference": digest, "digests": [...], "problems": [...]}``.

The driver imports everything once and then forks each controller, so a kill-and-resume cycle
costs milliseconds. A child dies by SIGKILL either from the Harness's own crash hook at a
random commit (before or after it is durable) or from this process after a random delay;
every child that is not killed runs the run to completion.
"""

from __future__ import annotations

import json
import os
import random
import signal
import sys
import time
from pathlib import Path

from harness_world import config

from ade_core.harness.core import CRASH_ENV
from ade_core.harness.run import SimulationSettings, drive_run, init_run
from ade_core.plugins import load_plugins
from ade_core.schemas.trial import TERMINAL_STATUSES
from ade_core.store import RunStore, check_store, state_digest

LOADED = config(coordinators=3, plans=2)
# Retries and a missing evaluation make the recovery paths part of what is killed and replayed.
SIMULATION = SimulationSettings(failures={"C2/P1/T1": ("crashed",)}, missing_evaluation=("C3/P2/T1",))
REGISTRY = load_plugins()


def child(run_dir: Path, crash_at: str | None) -> None:
    """In the forked child: drive the run (maybe killed by the crash hook), exit 0 when it completes."""
    if crash_at:
        os.environ[CRASH_ENV] = crash_at
    try:
        phase = drive_run(run_dir, registry=REGISTRY)
        os._exit(0 if phase == "completed" else 3)
    except BaseException as exc:  # noqa: BLE001 - reported through the exit status
        print(f"child failed: {exc!r}", file=sys.stderr, flush=True)
        os._exit(4)


def run_once(run_dir: Path, crash_at: str | None, kill_after_s: float | None) -> int:
    """Fork a controller; return its wait status as (signal or -exit code)."""
    pid = os.fork()
    if pid == 0:
        child(run_dir, crash_at)
    if kill_after_s is not None:
        deadline = time.monotonic() + kill_after_s
        while time.monotonic() < deadline:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                return -os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else os.WTERMSIG(status)
            time.sleep(0.002)
        os.kill(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    return os.WTERMSIG(status) if os.WIFSIGNALED(status) else -os.waitstatus_to_exitcode(status)


def problems_of(run_dir: Path) -> list[str]:
    """Lost Trials, duplicate publications, store inconsistencies."""
    with RunStore.open(run_dir) as store:
        problems = check_store(store)
        trials = [d.model() for d in store.list("trial")]
        if len(trials) != 7 or any(t.status not in TERMINAL_STATUSES for t in trials):
            problems.append(f"trials: {[(t.trial_id, t.status) for t in trials]}")
        keys = [e.commit_key for e in store.queue()]
        if len(keys) != len(set(keys)) or len(keys) != len(trials):
            problems.append(f"queue: {keys}")
        if store.get_model("run", "run").phase != "completed":
            problems.append("run not completed")
    return problems


def main(workdir: str, seed: int, min_kills: int) -> None:
    rng = random.Random(seed)
    root = Path(workdir)
    reference = root / "reference"
    init_run(reference, LOADED, dry_run=True, simulation=SIMULATION, registry=REGISTRY)
    assert run_once(reference, None, None) == 0, "the uninterrupted run failed"
    with RunStore.open(reference) as store:
        expected = state_digest(store)
        commits = store.revision
    kills, runs, digests, problems = 0, 0, [], problems_of(reference)
    while kills < min_kills:
        runs += 1
        run_dir = root / f"crashed-{runs}"
        init_run(run_dir, LOADED, dry_run=True, simulation=SIMULATION, registry=REGISTRY)
        for _ in range(10 * commits):
            if rng.random() < 0.8:
                at = f"{rng.randint(1, max(2, commits // 12))}{rng.choice(['', ':before'])}"
                status = run_once(run_dir, at, None)
            else:
                status = run_once(run_dir, None, rng.uniform(0.0, 0.08))
            if status == signal.SIGKILL:
                kills += 1
                continue
            if status != 0:
                problems.append(f"{run_dir.name}: controller exited with {status}")
            break
        with RunStore.open(run_dir) as store:
            digests.append(state_digest(store))
        problems += [f"{run_dir.name}: {p}" for p in problems_of(run_dir)]
    print(json.dumps({"kills": kills, "runs": runs, "reference": expected, "digests": digests, "problems": problems}))


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
