"""`ade heldout`: held-out data and results stay in the operator-only store (paper Sec 3.4, invariant 5).

A canary string is planted in every held-out problem; after a dry run and a held-out
evaluation it must appear under ``<run>/heldout/`` (the positive control) and nowhere else in
the run directory — SQLite bytes, WAL, object store and attempt directories included.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest
from harness_world import CONFIG, ROOT, RecordingBackend, dry_run

from ade_core.config import load_config
from ade_core.engine.job import EngineJob
from ade_core.engine.model import EngineError
from ade_core.executors.simulated import SimulatedExecutor
from ade_core.harness.fork import fork_run
from ade_core.harness.heldout import HeldOutError, HeldOutStore, run_heldout
from ade_core.harness.run import drive_run, init_run
from ade_core.harness.status import format_status, run_status
from ade_core.store import RunStore

SEARCH_MODULES = (
    "admission",
    "analysis",
    "core",
    "gate",
    "memory",
    "plans",
    "ranking",
    "roles",
    "scripted",
    "snapshot",
    "trials",
    "views",
)


def canary_world(root: Path, canary: str, bench: str) -> Path:
    """A config derived from the tiny example whose only held-out benchmark carries ``canary`` in every problem."""
    root.mkdir(parents=True)
    rows = [{"id": f"h{i}", "problem": f"{canary} What is {i}+2?", "answer": str(i + 2)} for i in range(7)]
    (root / "heldout.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (root / "config.toml").write_text(
        f'extends = "{CONFIG}"\n'
        "[budget]\ncoordinators = 2\nplans_per_coordinator = 2\n"
        f'[[evaluation.held_out]]\nname = "{bench}"\nsource = "heldout.jsonl"\nk = 3\n'
    )
    return root / "config.toml"


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory):
    """A dry run of the canary world, its recorded views and Engine jobs, and one `ade heldout`."""
    root = tmp_path_factory.mktemp("canary")
    # Fixed needles keep the simulated held-out scores (and so the score scan below) deterministic.
    canary, bench = "CANARY-5f0c9a7e2d4b4e1f8a6c3b9d0e7f1a24", "heldbench_8c1d5e9b7a"
    loaded = load_config(canary_world(root / "world", canary, bench))
    jobs: list[str] = []
    original = SimulatedExecutor.submit

    def recording_submit(self, request):  # type: ignore[no-untyped-def]
        if request.kind in ("attempt", "reference"):  # the base evaluation's job is checked in its own test
            jobs.append(request.job.model_dump_json())
        return original(self, request)

    backend = RecordingBackend()
    run_dir = root / "run"
    mp = pytest.MonkeyPatch()
    mp.setattr(SimulatedExecutor, "submit", recording_submit)
    try:
        assert dry_run(run_dir, loaded, backend=backend) == "completed"
    finally:
        mp.undo()
    evaluation, path = run_heldout(run_dir, operator="tester")
    return run_dir, canary, bench, backend, jobs, evaluation, path


def test_heldout_results_are_recorded_only_in_the_operator_store(evaluated):
    run_dir, canary, bench, _, _, evaluation, path = evaluated
    assert path.is_relative_to(run_dir / "heldout") and evaluation.fresh and evaluation.engine == "simulated"
    assert [b.name for b in evaluation.benchmarks] == [bench] and evaluation.benchmarks[0].problems == 7
    assert evaluation.benchmarks[0].scores is not None and set(evaluation.macro_avg) == {"pass_at_k", "average_at_k"}
    assert HeldOutStore(run_dir).evaluations() == [evaluation]
    assert not list((run_dir / "heldout" / "work").rglob("*.json")), "the pass's scratch is gone once recorded"
    with RunStore.open(run_dir) as store:
        entries = [d.model() for d in store.list("ledger")]
    assert [e.action for e in entries] == ["held_out_evaluation"]
    assert entries[0].details["record"] == "heldout/evaluations/0001.json" and entries[0].details["fresh"] is True
    assert bench not in json.dumps(entries[0].details)


def test_the_canary_appears_nowhere_in_the_run_directory_but_heldout(evaluated):
    run_dir, canary, _, _, _, _, _ = evaluated
    needle = canary.encode()
    files = [p for p in run_dir.rglob("*") if p.is_file()]
    assert any(p.name.startswith("state.sqlite") for p in files) and any("objects" in p.parts for p in files)
    found = {p.relative_to(run_dir).parts[0] for p in files if needle in p.read_bytes()}
    assert found == {"heldout"}  # present there (the scan works), absent from store, objects and attempts


def test_no_view_delivery_or_engine_job_names_a_heldout_benchmark_or_score(evaluated):
    run_dir, canary, bench, backend, jobs, evaluation, _ = evaluated
    values = {v for b in evaluation.benchmarks for v in (b.scores or {}).values()}
    values |= {v for v in evaluation.macro_avg.values() if v is not None}
    # Seven problems make every score but 0 and 100 a long fraction that no in-loop number shares by chance.
    scores = [re.compile(rf"(?<![0-9.]){re.escape(repr(v))}(?![0-9])") for v in values if v not in (0.0, 100.0)]
    views = [text for texts in backend.views.values() for text in texts]
    assert views and jobs and scores
    for text in views + jobs:
        assert bench not in text and canary not in text and "heldout.jsonl" not in text
        assert not any(score.search(text) for score in scores)
    for text in jobs:
        job = EngineJob.model_validate_json(text)
        assert job.config.evaluation.held_out == () and job.held_out_digest is not None
        job.check()  # the search-side copy still proves the whole frozen 𝓑
    # The SQLite store (deliveries, events, documents, ledger) never holds a held-out name or score.
    raw = b"".join(p.read_bytes() for p in run_dir.glob("state.sqlite*"))
    assert bench.encode() not in raw
    with RunStore.open(run_dir) as store:
        payloads = json.dumps([d.payload for d in store.accepted_deliveries()])
    assert not any(score.search(payloads) for score in scores) and bench not in payloads


def test_search_side_modules_never_touch_the_heldout_suite():
    for name in SEARCH_MODULES:
        path = ROOT / "ade_core" / "harness" / f"{name}.py"
        tree = ast.parse(path.read_text())
        imports = [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
        imports += [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
        assert not [m for m in imports if "heldout" in m], f"{name}.py imports the held-out tier"
        attributes = [n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)]
        assert "held_out" not in attributes, f"{name}.py reads [[evaluation.held_out]]"


def test_an_engine_job_with_a_heldout_digest_must_not_carry_heldout_benchmarks(evaluated):
    _, _, _, _, jobs, _, _ = evaluated
    job = EngineJob.model_validate_json(jobs[0])
    full = load_config(CONFIG).experiment
    assert full.evaluation.held_out and full.for_search().digest(full.held_out_digest()) == full.digest()
    with pytest.raises(EngineError, match="search-side config"):
        job.model_copy(update={"config": full}).check()


def test_a_fork_made_after_heldout_evaluation_is_marked_and_its_results_are_not_fresh(evaluated, tmp_path):
    run_dir = evaluated[0]
    with RunStore.open(run_dir) as store:
        revision = store.revision - 2
    fork = fork_run(run_dir, revision, tmp_path / "fork")
    assert not (fork / "heldout").exists()  # the held-out store is never copied
    assert drive_run(fork) == "completed"
    with RunStore.open(fork) as store:
        assert store.get_model("run", "run").held_out_seen == ("run#1",)
    evaluation, _ = run_heldout(fork, operator="tester")
    assert not evaluation.fresh and evaluation.seen_before == ("run#1",)
    with RunStore.open(fork) as store:
        status = run_status(store)
    assert status["held_out"]["evaluations"][0]["fresh"] is False
    assert status["held_out"]["seen_before_fork"] == ["run#1"]
    text = format_status(status)
    assert "NOT FRESH" in text and "forked after held-out evaluation (run#1)" in text
    # a fork of the fork inherits the lineage's exposure
    again = fork_run(fork, 5, tmp_path / "fork2")
    with RunStore.open(again) as store:
        assert store.get_model("run", "run").held_out_seen == ("run#1", "fork#1")


def test_a_fork_made_before_any_heldout_evaluation_stays_fresh(tmp_path):
    from harness_world import config

    run_dir = tmp_path / "run"
    assert dry_run(run_dir, config(coordinators=1, plans=1)) == "completed"
    fork = fork_run(run_dir, 10, tmp_path / "fork")
    assert drive_run(fork) == "completed"
    evaluation, _ = run_heldout(fork, operator="tester")
    assert evaluation.fresh and evaluation.seen_before == ()
    assert len(evaluation.benchmarks) == 4  # the tiny world's held-out suite


def test_heldout_refuses_a_run_without_a_final_selection(tmp_path):
    from harness_world import config

    init_run(tmp_path / "run", config(coordinators=1, plans=1), dry_run=True)
    with pytest.raises(HeldOutError, match=r"no frozen final selection \(phase initialized\).*ade resume"):
        run_heldout(tmp_path / "run")
    assert not (tmp_path / "run" / "heldout").exists()
