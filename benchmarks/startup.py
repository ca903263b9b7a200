"""Start-up cost of the plugin registry and config loading, as ratios to a bare interpreter.

Every CLI call builds a fresh registry, so this is latency a user feels on each command.
``--quick`` times each case once (CI runs it to keep the script working; one run is not a measurement).
Run: .venv/bin/python benchmarks/startup.py [--quick] [--repeat N]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "tiny-data-selection.toml"

CASES = {
    "baseline: python -c pass": "pass",
    "import ade_core": "import ade_core",
    "load_plugins()": "from ade_core.plugins import load_plugins; load_plugins()",
    "load_plugins() + load_config()": (
        "from ade_core.plugins import load_plugins; from ade_core.config import load_config, check_against_plugins; "
        f"check_against_plugins(load_config({str(EXAMPLE)!r}), load_plugins())"
    ),
}


def median_seconds(code: str, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--quick", action="store_true", help="each case once (seconds; CI)")
    args = parser.parse_args()
    if args.quick:
        args.repeat = 1
    results = {name: median_seconds(code, args.repeat) for name, code in CASES.items()}
    baseline = results["baseline: python -c pass"]
    print(f"{'case':34} {'median ms':>10} {'x baseline':>11}")
    for name, seconds in results.items():
        print(f"{name:34} {seconds * 1000:10.1f} {seconds / baseline:11.2f}")


if __name__ == "__main__":
    main()
