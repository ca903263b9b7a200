"""One controller drives a Run: a second `ade resume` is refused naming the holder; a dead holder's lease is
taken over (the kernel releases its lock however it died)."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

from ade_core.config import load_config
from ade_core.harness.run import init_run

CONFIG = Path(__file__).resolve().parents[2] / "examples" / "tiny-data-selection.toml"
ADE = str(Path(sys.executable).with_name("ade"))
HOLD = "import sys, time\nfrom ade_core.harness.liveness import controlling\nwith controlling(sys.argv[1]):\n" \
    "    print('held', flush=True)\n    time.sleep(120)\n"  # fmt: skip


def test_a_second_driver_is_refused_and_a_dead_holders_lease_is_taken_over(tmp_path):
    run_dir = tmp_path / "run"
    init_run(run_dir, load_config(CONFIG, ["budget.coordinators=1", "budget.plans_per_coordinator=1"]), dry_run=True)
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(run_dir)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        refused = subprocess.run([ADE, "resume", str(run_dir), "--progress", "none"], capture_output=True, text=True)
        assert refused.returncode != 0
        assert f"another process (pid {holder.pid}) is driving the run" in refused.stderr
        status = subprocess.run([ADE, "status", str(run_dir)], capture_output=True, text=True, check=True).stdout
        assert "interrupted" not in status  # a live controller holds it
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    resumed = subprocess.run([ADE, "resume", str(run_dir), "--progress", "none"], capture_output=True, text=True)
    assert resumed.returncode == 0, resumed.stderr
    assert "phase completed" in resumed.stdout
