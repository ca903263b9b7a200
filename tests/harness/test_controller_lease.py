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


def test_resume_set_changes_operational_settings_and_refuses_frozen_keys(tmp_path):
    import json

    from ade_core.store import RunStore

    run_dir = tmp_path / "run"
    init_run(run_dir, load_config(CONFIG, ["budget.coordinators=1", "budget.plans_per_coordinator=1"]), dry_run=True)
    before = (run_dir / "run.json").read_text()

    def resume(*sets: str) -> subprocess.CompletedProcess[str]:
        args = [ADE, "resume", str(run_dir), "--progress", "none", *(f"--set={s}" for s in sets)]
        return subprocess.run(args, capture_output=True, text=True)

    frozen = resume("budget.coordinators=3")
    assert frozen.returncode == 2 and "'budget.coordinators' belongs to 𝓑, which is frozen" in frozen.stderr
    invalid = resume("agents.max_retries=-1")
    assert invalid.returncode == 2 and "agents.max_retries" in invalid.stderr
    unreachable = resume("agents.backend='openai'")  # no key and no local server: refused before anything changes
    assert unreachable.returncode == 2 and "agents.base_url" in unreachable.stderr
    assert (run_dir / "run.json").read_text() == before
    changed = resume("agents.max_retries=5", "operational.recovery.on_exhausted='suspend_run'")
    assert changed.returncode == 0, changed.stderr
    assert "[resume] agents.max_retries: 4 -> 5" in changed.stderr
    settings = json.loads((run_dir / "run.json").read_text())["operational"]
    assert settings["agents"]["max_retries"] == 5 and settings["recovery"]["on_exhausted"] == "suspend_run"
    with RunStore.open(run_dir) as store:
        (entry,) = [op for op in store.operations() if op.action == "settings_changed"]
    assert {c["key"] for c in entry.details["changes"]} == {"agents.max_retries", "recovery.on_exhausted"}
