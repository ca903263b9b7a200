"""Overhead of ade-sandbox, as ratios to baselines measured in the same run.

Three costs a user pays for running strategies out of process:
  1. spawn-to-result latency of ``run_strategy`` at each isolation level this machine reaches,
     against a bare ``python -I -c`` child that returns a JSON result on stdout;
  2. per-call overhead of a long-lived ``open_worker``, against an in-process call with a JSON
     round trip of its arguments;
  3. delivery of a large JSON input (a candidate inventory) to a strategy, against ``json.load``
     of the same file in-process.

Nothing fails: each ratio is printed next to its target. ``--quick`` runs every section at tiny
sizes in seconds (CI runs it to keep the script working; its figures are not measurements).
Run: .venv/bin/python benchmarks/sandbox_overhead.py [--quick] [--repeat N] [--calls N] [--input-mb MB]
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ade_sandbox import LEVELS, Limits, SandboxResult, open_worker, probe, run_strategy
from ade_sandbox.limits import level_rank

SOURCE = """
def entry(x):
    return {"x": x, "ok": True, "name": "trivial"}
"""

COUNT_SOURCE = """
def count(candidate_inventory):
    return len(candidate_inventory)
"""

BASELINE_CHILD = """
import json

def entry(x):
    return {"x": x, "ok": True, "name": "trivial"}

print(json.dumps(entry(1)))
"""

WARMUP = 2
INPUT_RUNS = 3
NAMESPACES_TARGET_MS = 15.0
CALL_TARGET_MS = 1.0
DELIVERY_TARGET = 1.3

DOMAINS = ("math", "code", "science", "dialogue", "legal", "medical", "web", "fiction")
WORDS = (
    "the model selects candidates whose token budget fits the curriculum while keeping domain balance "
    "across math code science dialogue and web text with deduplication near duplicates removed and quality "
    "scores from a small classifier used as tie breakers for the final inventory of training examples"
).split()


def entry(x: int) -> dict[str, Any]:
    """The in-process twin of SOURCE's entry point."""
    return {"x": x, "ok": True, "name": "trivial"}


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f}"


def verdict(ok: bool) -> str:
    return "met" if ok else "NOT met"


def timed(fn: Callable[[], Any], runs: int, warmup: int = 0) -> tuple[list[float], list[Any]]:
    """Wall time of ``runs`` calls of ``fn`` (after ``warmup`` uncounted ones) and their results."""
    for _ in range(warmup):
        fn()
    times, results = [], []
    for _ in range(runs):
        start = time.perf_counter()
        results.append(fn())
        times.append(time.perf_counter() - start)
    return times, results


def failure(results: list[SandboxResult], expected: Any) -> str | None:
    """Why a batch of sandbox runs does not count, or None when every run returned ``expected``."""
    for result in results:
        if result.status != "ok" or result.value != expected:
            return f"{result.status}: {result.error or result.value!r} {result.stderr.strip()[-200:]}".strip()
    return None


def baseline_child() -> Any:
    completed = subprocess.run([sys.executable, "-I", "-c", BASELINE_CHILD], capture_output=True, text=True, check=True)
    return json.loads(completed.stdout)


# --- 1. spawn-to-result latency ---------------------------------------------------------------
def spawn_latency(levels: list[str], skipped: dict[str, str], repeat: int) -> None:
    print(f"\n1. Spawn-to-result latency (median of {repeat}, {WARMUP} warm-up runs not counted)")
    base_times, _ = timed(baseline_child, repeat, WARMUP)
    base = statistics.median(base_times)
    expected = entry(1)
    print(f"{'case':34} {'median ms':>10} {'+ms':>8} {'x baseline':>11}  target")
    print(f"{'baseline: python -I -c + json':34} {ms(base):>10} {'':>8} {1.0:11.2f}")
    for level in LEVELS:
        if level in skipped:
            print(f"{'run_strategy level=' + level:34} {'skipped':>10}  ({skipped[level]})")
            continue
        if level not in levels:
            continue
        times, results = timed(lambda lv=level: run_strategy(SOURCE, "entry", {"x": 1}, level=lv), repeat, WARMUP)
        problem = failure(results, expected)
        name = f"run_strategy level={level}"
        if problem:
            print(f"{name:34} {'failed':>10}  ({problem})")
            continue
        median = statistics.median(times)
        added = median - base
        target = ""
        if level == "namespaces":
            target = f"<= +{NAMESPACES_TARGET_MS:g} ms ({verdict(added * 1000 <= NAMESPACES_TARGET_MS)})"
        print(f"{name:34} {ms(median):>10} {ms(added):>8} {median / base:11.2f}  {target}")
    print(f"target: namespaces adds <= {NAMESPACES_TARGET_MS:g} ms over the baseline")


# --- 2. worker per-call overhead --------------------------------------------------------------
def per_call(level: str, calls: int) -> None:
    print(f"\n2. Worker per-call overhead at level {level} ({calls} calls, 50 warm-up calls not counted)")
    for i in range(50):
        entry(**json.loads(json.dumps({"x": i})))
    local = []
    for i in range(calls):
        start = time.perf_counter()
        entry(**json.loads(json.dumps({"x": i})))
        local.append(time.perf_counter() - start)

    with open_worker(SOURCE, level=level) as worker:
        if worker.load_error is not None:
            print(f"worker failed to load: {worker.load_error.status}: {worker.load_error.error}")
            return
        for i in range(50):
            worker.call("entry", {"x": i})
        remote, bad = [], None
        for i in range(calls):
            start = time.perf_counter()
            result = worker.call("entry", {"x": i})
            remote.append(time.perf_counter() - start)
            if bad is None and (result.status != "ok" or result.value != entry(i)):
                bad = f"call {i}: {result.status}: {result.error or result.value!r}"
    if bad:
        print(f"worker calls failed ({bad})")
        return

    def p90(values: list[float]) -> float:
        return statistics.quantiles(values, n=10)[-1]

    local_median, remote_median = statistics.median(local), statistics.median(remote)
    met = verdict(remote_median * 1000 <= CALL_TARGET_MS)
    print(f"{'case':34} {'median ms':>10} {'p90 ms':>8} {'x baseline':>11}  target")
    print(f"{'baseline: in-process + json trip':34} {local_median * 1000:10.4f} {p90(local) * 1000:8.4f} {1.0:11.2f}")
    print(
        f"{'worker.call':34} {remote_median * 1000:10.4f} {p90(remote) * 1000:8.4f} "
        f"{remote_median / local_median:11.1f}  <= {CALL_TARGET_MS:g} ms ({met})"
    )
    print(f"target: <= {CALL_TARGET_MS:g} ms per call")


# --- 3. large input delivery ------------------------------------------------------------------
def write_inventory(path: Path, megabytes: float) -> int:
    """A deterministic candidate inventory of about ``megabytes`` MB; returns the record count."""
    text_len = 320
    corpus = " ".join(WORDS * 4)
    span = len(corpus) - text_len

    def record(i: int) -> dict[str, Any]:
        offset = (i * 37) % span
        return {
            "candidate_id": f"c{i:06d}",
            "domain": DOMAINS[i % len(DOMAINS)],
            "token_count": i % 4096,
            "quality": round((i * 7919 % 1000) / 1000, 3),
            "text": corpus[offset : offset + text_len],
        }

    per_record = statistics.mean(len(json.dumps(record(i))) + 2 for i in range(200))
    count = max(1, int(megabytes * 1_000_000 / per_record))
    records = [record(i) for i in range(count)]
    with path.open("w") as handle:
        json.dump(records, handle)
    return count


def input_delivery(level: str, megabytes: float) -> None:
    limits = Limits(memory_mb=4096, wall_s=120, cpu_s=120)
    with tempfile.TemporaryDirectory(prefix="ade-bench-") as tmp:
        path = Path(tmp) / "candidate_inventory.json"
        count = write_inventory(path, megabytes)
        size_mb = path.stat().st_size / 1_000_000
        print(
            f"\n3. Large input delivery at level {level}: {size_mb:.1f} MB, {count} candidates (median of {INPUT_RUNS})"
        )

        def load() -> tuple[float, int]:
            with path.open("rb") as handle:
                start = time.perf_counter()
                data = json.load(handle)
                elapsed = time.perf_counter() - start
            n = len(data)
            del data
            gc.collect()
            return elapsed, n

        loads = [load() for _ in range(INPUT_RUNS)]
        base = statistics.median(t for t, _ in loads)
        assert all(n == count for _, n in loads)

        def deliver() -> SandboxResult:
            return run_strategy(COUNT_SOURCE, "count", inputs={"candidate_inventory": path}, level=level, limits=limits)

        def trivial() -> SandboxResult:
            return run_strategy(SOURCE, "entry", {"x": 1}, level=level, limits=limits)

        trivial_times, trivial_results = timed(trivial, INPUT_RUNS, warmup=1)
        total_times, total_results = timed(deliver, INPUT_RUNS)
        for results, expected in ((trivial_results, entry(1)), (total_results, count)):
            problem = failure(results, expected)
            if problem:
                print(f"sandbox run failed ({problem})")
                return
        total, empty = statistics.median(total_times), statistics.median(trivial_times)
        delivery = total - empty
        print(f"{'case':34} {'median ms':>10} {'x json.load':>12}  target")
        print(f"{'baseline: json.load in-process':34} {ms(base):>10} {1.0:12.2f}")
        print(f"{'run_strategy, trivial, no input':34} {ms(empty):>10} {empty / base:12.2f}")
        print(f"{'(a) run_strategy with the input':34} {ms(total):>10} {total / base:12.2f}")
        print(
            f"{'(b) (a) minus the trivial run':34} {ms(delivery):>10} {delivery / base:12.2f}  "
            f"<= {DELIVERY_TARGET:g}x ({verdict(delivery / base <= DELIVERY_TARGET)})"
        )
        print(f"target: input delivery <= {DELIVERY_TARGET:g}x json.load")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=15, help="runs per case in section 1 (default 15)")
    parser.add_argument("--calls", type=int, default=2000, help="worker calls in section 2 (default 2000)")
    parser.add_argument("--input-mb", type=float, default=50, help="size of the input in section 3 (default 50)")
    parser.add_argument("--quick", action="store_true", help="every section at tiny sizes (seconds; CI)")
    args = parser.parse_args()
    if args.quick:
        args.repeat, args.calls, args.input_mb = 2, 20, 0.5

    started = time.perf_counter()
    report = probe()
    best = report.best_level
    levels, skipped = [], {}
    for level in LEVELS:
        if level_rank(level) > level_rank(best):
            continue
        missing = report.missing_for(level)
        if missing.startswith("missing"):  # below the best level but its own layers are absent
            skipped[level] = missing
        else:
            levels.append(level)
    print(f"machine isolation level (probe().best_level): {best}")
    print(f"python {sys.version.split()[0]}, levels measured: {', '.join(levels)}")

    spawn_latency(levels, skipped, args.repeat)
    per_call(best, args.calls)
    input_delivery(best, args.input_mb)
    print(f"\ntotal benchmark time: {time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    main()
