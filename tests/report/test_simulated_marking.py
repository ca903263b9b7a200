"""A dry run's numbers are marked simulated wherever they are shown; the report's held-out table and lineage note.

One dry run of the tiny Data Selection config through the CLI (one Coordinator, two Plans: every
Plan is new), with the end-of-run held-out evaluations of the final selection and each Trial.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from report_world import CONFIG, ROOT, HeldOutTable

from ade_core.harness.heldout import HeldOutStore
from ade_core.progress import progress
from ade_core.report import render_report, report_data
from ade_core.run_summary import finish
from ade_core.store import RunStore


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([sys.executable, "-m", "ade_core.cli", *args], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    return done


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    run_dir = tmp_path_factory.mktemp("simulated") / "run"
    done = _cli(
        "run", str(CONFIG), "--dry-run", "--run-dir", str(run_dir), "--progress", "plain",
        "--set", "budget.coordinators=1", "--set", "budget.plans_per_coordinator=2",
    )  # fmt: skip
    return run_dir, done


def test_ade_run_marks_the_summary_table_and_heldout_lines_simulated(run):
    _, done = run
    lines = done.stdout.splitlines()
    assert "SIMULATED" in lines[0]  # the table's title
    assert "Pass@K (simulated)" in done.stdout and "Average@K (simulated)" in done.stdout
    heldout = [line for line in lines if line.startswith("held-out (")]
    assert len(heldout) == 3 and all(line.endswith("(simulated)") for line in heldout)
    (selected,) = [line for line in lines if line.startswith("selected ")]
    assert selected.endswith("(simulated)")
    scored = [line for line in done.stderr.splitlines() if "Pass@K" in line]  # the progress lines
    assert scored and all("simulated" in line for line in scored)


def test_ade_status_marks_simulated_scores_in_text_and_json(run):
    run_dir, _ = run
    text = _cli("status", str(run_dir)).stdout.splitlines()
    scored = [line for line in text if "pass_at_k" in line]
    assert len(scored) == 1 + 3  # the selection and three Trials
    assert all(line.endswith("(simulated)") for line in scored)
    heldout = [line for line in text if line.startswith("held-out #")]
    assert len(heldout) == 3 and all("(simulated: dry run)" in line for line in heldout)
    assert json.loads(_cli("status", str(run_dir), "--json").stdout)["simulated"] is True


def test_json_outputs_say_simulated(run, capsys):
    run_dir, _ = run
    finish(run_dir, "completed", "json", None)  # `ade run --progress json`'s closing object
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["simulated"] is True and summary["heldout"] == []  # held-out evaluations were already made
    stream = io.StringIO()
    with progress(run_dir, "json", stream=stream, interval_s=0.01):
        pass
    events = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert events and all(event["simulated"] is True for event in events)


def test_the_report_carries_a_simulated_banner_and_marks(run):
    run_dir, _ = run
    text = (run_dir / "report.html").read_text(encoding="utf-8")
    assert 'id="simulated-banner"' in text and "These are not results." in text
    assert '<table id="summary" data-simulated="true">' in text and "Pass@K (simulated)</th>" in text
    assert "Simulated scores (dry run)." in text  # the score figure's caption
    assert HeldOutTable(text).simulated == "true"


def test_a_report_of_measured_scores_says_nothing_of_simulation(run):
    run_dir, _ = run
    data = replace(report_data(run_dir), dry_run=False, heldout_columns=())  # as a real run without held-out
    text = render_report(data, {"score_over_time": b"", "stage_times": b""})
    assert 'id="simulated-banner"' not in text and "(simulated)" not in text and "Simulated scores" not in text
    assert '<table id="summary" data-simulated="false">' in text


def test_the_heldout_table_has_a_row_per_benchmark_and_base_reference_and_each_strategy_side_by_side(run):
    run_dir, _ = run
    table = HeldOutTable((run_dir / "report.html").read_text(encoding="utf-8"))
    with RunStore.open(run_dir) as store:
        record = store.get_model("run", "run")
        plans = [d.model().plan_id for d in store.list("plan")]
    assert list(table.groups) == ["base", *plans] == ["base", "P000", "C1/P1", "C1/P2"]
    assert table.groups["P000"].startswith("generic reference (P000)")  # starred when it is the selection
    assert table.groups[record.selection.plan_id].endswith("★ selected")
    assert table.missing == ["base"]  # the Base model has no held-out evaluation
    evaluations = HeldOutStore(run_dir).evaluations()
    benchmarks = [b.name for b in evaluations[0].benchmarks]
    assert table.rows == [*benchmarks, "macro"] and len(benchmarks) == 4
    for evaluation in evaluations:
        column = evaluation.plan_id
        for bench in evaluation.benchmarks:
            for metric, value in bench.scores.items():
                assert float(table.cells[(bench.name, column, metric)]) == value
        for metric, value in evaluation.macro_avg.items():
            assert float(table.cells[("macro", column, metric)]) == value


def test_a_run_where_no_plan_builds_on_another_says_every_plan_is_new(run):
    run_dir, _ = run
    with RunStore.open(run_dir) as store:
        plans = [d.model() for d in store.list("plan")]
    assert all(p.relation == "new" and not p.sources and not p.cited_findings for p in plans)
    text = (run_dir / "report.html").read_text(encoding="utf-8")
    assert 'id="lineage-none"' in text and "Every Plan is new" in text
    assert 'id="fig-lineage"' not in text  # no graph of unconnected boxes


def test_configured_pass_at_k_is_shown_next_to_the_ranking_metrics(tmp_path):
    run_dir = tmp_path / "run"
    done = _cli(
        "run", str(CONFIG), "--dry-run", "--run-dir", str(run_dir), "--progress", "plain",
        "--set", "budget.coordinators=1", "--set", "budget.plans_per_coordinator=2",
        "--set", "evaluation.pass_k=[1, 2]",
    )  # fmt: skip
    header = next(line for line in done.stdout.splitlines() if "Pass@K" in line and "┃" in line)
    assert header.index("Pass@K") < header.index("Average@K") < header.index("pass@1") < header.index("pass@2")
    data = report_data(run_dir)
    assert data.metric_order == ("pass_at_k", "average_at_k")  # ranking is the task's, unchanged
    assert data.shown_metrics == ("pass_at_k", "average_at_k", "pass@1", "pass@2")
    assert all({"pass@1", "pass@2"} <= set(row.scores) for row in data.rows if row.scores)
    assert data.base_scores is not None and data.base_scores["pass@1"] == data.base_scores["average_at_k"]
    html = (run_dir / "report.html").read_text(encoding="utf-8")
    assert "pass@2 (simulated)</th>" in html
    scored = [column.result for column in data.heldout_columns if column.result is not None]
    assert scored and all({"pass@1", "pass@2"} <= set(result.macro_avg) for result in scored)
