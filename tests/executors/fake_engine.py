"""A stand-in for ``ade engine run`` in executor tests: it does what ``fake.json`` in the attempt dir says.

Called as ``python fake_engine.py engine run JOB --out DIR``, like ``ade``. It writes heartbeats in
the Engine's format and seals a real (empty) Experiment Package, so the executor under test
reads exactly what it reads from the Engine — in a fraction of a second. ``engine base-eval JOB``
(a request without a package) prints a result line instead, after what its directory's
``fake.json`` says.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from ade_core.engine.job import EngineJob
from ade_core.engine.package import write_package


def main() -> None:
    if sys.argv[1:3] == ["engine", "base-eval"]:
        return evaluation(Path(sys.argv[3]).parent)
    job_file, _, out = sys.argv[3:6]
    out_dir = Path(out)
    job = EngineJob.model_validate_json(Path(job_file).read_text())
    plan_file = out_dir / "fake.json"
    plan = json.loads(plan_file.read_text()) if plan_file.exists() else {}

    def beat(phase: str) -> None:
        tmp = out_dir / "heartbeat.tmp"
        tmp.write_text(
            json.dumps({"attempt_id": job.attempt_id, "pid": os.getpid(), "phase": phase, "time": time.time()})
        )
        tmp.replace(out_dir / "heartbeat.json")

    beat("starting")
    if plan.get("record"):
        seen = {
            "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
            "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
            "affinity": sorted(os.sched_getaffinity(0)),
        }
        (out_dir / "seen.json").write_text(json.dumps(seen))
    if plan.get("child"):
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
        (out_dir / "pids.json").write_text(json.dumps([os.getpid(), child.pid]))
    for _ in range(plan.get("beats", 1)):
        beat("train")
        time.sleep(plan.get("interval", 0.05))
    if plan.get("package", True):
        owner = plan.get("attempt_id", job.attempt_id)
        fields = {
            "trial_id": job.trial_id,
            "attempt_id": owner,
            "task": job.config.task,
            "status": "completed",
            "command_digest": job.command.digest(),
            "config_digest": job.command.config_digest,
            "strategy_digest": job.command.strategy_digest,
            "checkpoints": (),
            "selected_step": None,
            "selected_checkpoint": None,
            "in_loop_scores": {"pass_at_k": 0.5},
            "versions": {},
            "timings": {},
        }
        package = write_package(out_dir, fields, {}, [])
        print(json.dumps({"package": str(package), "status": "completed"}), flush=True)
    deadline = time.monotonic() + plan.get("linger", 0.0)
    while time.monotonic() < deadline:  # finished, but still alive and beating
        beat("package")
        time.sleep(0.05)
    if plan.get("hang"):
        time.sleep(600)  # wedged: no more heartbeats
    if plan.get("signal"):
        os.kill(os.getpid(), signal.SIGKILL)
    sys.stderr.write(plan.get("stderr", ""))
    sys.exit(plan.get("exit", 0))


def evaluation(out_dir: Path) -> None:
    plan_file = out_dir / "fake.json"
    plan = json.loads(plan_file.read_text()) if plan_file.exists() else {}
    if plan.get("record"):
        (out_dir / "seen.json").write_text(json.dumps({"omp_num_threads": os.environ.get("OMP_NUM_THREADS")}))
    time.sleep(plan.get("seconds", 0.0))
    if plan.get("result", True):
        print(json.dumps({"scores": {"pass_at_k": 0.25}, "missing_reason": None}), flush=True)


if __name__ == "__main__":
    main()
