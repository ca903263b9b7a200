"""Smoke test of benchmarks/harness_overhead.py at a tiny setting (the targets live in the benchmark)."""

from __future__ import annotations

import subprocess
import sys

from harness_world import ROOT


def test_the_harness_overhead_benchmark_runs_and_reports_ratios():
    args = ["--plans", "1", "--coordinators", "2", "--plans-per-coordinator", "1", "--slots", "1"]
    args += ["--transitions", "10", "--target-ms", "60000"]  # timing targets are not asserted in tests
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "harness_overhead.py"), *args],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "baseline: bare store transition" in proc.stdout and "x a bare transition" in proc.stdout
    assert "idle while queued" in proc.stdout and "targets met" in proc.stdout
