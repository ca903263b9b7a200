"""The cached Base evaluation and reference Trial are computed once per 𝓑, also when two commands (two
`ade trial` runs started together, two test workers) ask for them at the same time: the second waits on the
first's lock and reads its result, instead of training into the same directory."""

from __future__ import annotations

import subprocess
import sys
import threading
import time

import pytest
from harness_world import CONFIG

from ade_core.config import load_config
from ade_core.harness.standalone import base_evaluation, comparison_dir, computing

SMALL = ["evaluation.in_loop.limit=4", "evaluation.in_loop.k_offline=1", "evaluation.decoding.max_new_tokens=16"]

HOLD = """
import sys, time
from pathlib import Path
from ade_core.harness.standalone import computing

with computing(Path(sys.argv[1])):
    print("held", flush=True)
    time.sleep(float(sys.argv[2]))
"""


def test_a_second_process_waits_for_the_lock_and_says_so(tmp_path):
    directory = tmp_path / "comparisons" / "key" / "base"
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(directory), "1.5"], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        said: list[str] = []
        started = time.monotonic()
        with computing(directory, said.append):
            waited = time.monotonic() - started
        assert waited > 0.5, "the lock was taken while another process held it"
        assert said == [f"waiting for another process that is computing {directory}"]
    finally:
        holder.wait(timeout=60)
    assert holder.returncode == 0
    said.clear()
    with computing(directory, said.append):  # free again: taken at once, nothing said
        pass
    assert said == []


def test_a_held_lock_dies_with_its_holder(tmp_path):
    directory = tmp_path / "reference"
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(directory), "600"], stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    holder.kill()
    holder.wait(timeout=60)
    with computing(directory):  # a killed holder leaves no stale lock behind
        pass


@pytest.mark.trial
def test_two_concurrent_requests_evaluate_base_once(tmp_path, monkeypatch):
    monkeypatch.setenv("ADE_CACHE_DIR", str(tmp_path / "cache"))
    loaded = load_config(CONFIG, SMALL)
    said: list[str] = []
    results: list[dict] = []

    def ask() -> None:
        results.append(base_evaluation(loaded, log=said.append))

    threads = [threading.Thread(target=ask) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=600)
    assert len(results) == 2 and results[0] == results[1] and results[0]["in_loop_scores"]
    evaluated = [line for line in said if line.startswith("Base: evaluating")]
    assert len(evaluated) == 1, said  # one Engine evaluation; the other request waited and read it
    assert any(line.startswith("waiting for another process") for line in said), said
    assert len(list((comparison_dir(loaded) / "base" / "attempts").iterdir())) == 1
