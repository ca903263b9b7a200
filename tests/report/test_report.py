"""The run report (paper Figs. 3, 4, 6; tokens; Trials): its structure and its numbers against the run store."""

from __future__ import annotations

import base64
import re
import subprocess
import sys

import pytest
from report_world import ROOT, HeldOutTable, Page, build_report_run

from ade_core.harness.heldout import HeldOutStore
from ade_core.harness.status import run_status
from ade_core.report import report_data, summary_rows, write_report
from ade_core.store import RunStore

FIGURES = {"fig-score_over_time", "fig-lineage", "fig-stage_times"}


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    return build_report_run(tmp_path_factory.mktemp("report"))


@pytest.fixture(scope="module")
def page(world):
    return Page(world.report.read_text(encoding="utf-8"))


def _store(run_dir):
    with RunStore.open(run_dir) as store:
        record = store.get_model("run", "run")
        plans = [d.model() for d in store.list("plan")]
        trials = [d.model() for d in store.list("trial")]
        status = run_status(store)
    return record, plans, trials, status


def test_every_figure_is_an_embedded_png(page):
    assert set(page.images) == FIGURES
    for src in page.images.values():
        assert src.startswith("data:image/png;base64,")
        png = base64.b64decode(src.split(",", 1)[1], validate=True)
        assert png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 5000


def test_the_report_refers_to_nothing_outside_itself(world, page):
    text = world.report.read_text(encoding="utf-8")
    assert all(url.startswith(("data:", "#")) for url in page.urls), page.urls
    assert not page.tags & {"script", "link", "iframe", "object", "embed"}
    assert "url(" not in text and "@import" not in text
    assert not re.search(r"https?://", text)


def test_the_summary_table_has_the_stores_scores(world, page):
    record, plans, trials, _ = _store(world.run_dir)
    assert list(page.rows) == ["base", *(p.plan_id for p in plans)]
    assert {m: float(v) for m, v in page.rows["base"].items()} == record.base_model
    for plan in plans:
        scored = [t for t in trials if t.plan_id == plan.plan_id and t.status == "completed"]
        best = max(scored, key=lambda t: (t.scores["pass_at_k"], t.scores["average_at_k"]))
        assert {m: float(v) for m, v in page.rows[plan.plan_id].items()} == best.scores, plan.plan_id
    assert page.best == [record.selection.plan_id]


def test_summary_rows_are_the_tables_rows(world):
    record, plans, _, _ = _store(world.run_dir)
    rows = summary_rows(world.run_dir)
    assert [r.plan_id for r in rows] == [p.plan_id for p in plans]
    (best,) = [r for r in rows if r.best]
    assert (best.plan_id, best.trial_id, best.scores) == (
        record.selection.plan_id,
        record.selection.trial_id,
        record.selection.scores,
    )
    assert all(set(r.conclusions) == {"realization", "hypothesis", "portfolio"} for r in rows)
    revisits = [r for r in rows if r.relation == "revisit"]
    assert revisits and all(len(r.sources) == 1 for r in revisits)


def test_every_trial_has_its_section_with_code_scores_and_findings(world, page):
    _, _, trials, _ = _store(world.run_dir)
    assert page.trials == [t.trial_id for t in trials]
    data = report_data(world.run_dir)
    for detail in data.trials:
        assert detail.strategy_source and detail.findings and detail.conclusions["hypothesis"] != "-"
    text = world.report.read_text(encoding="utf-8")
    assert "<pre>&quot;&quot;&quot;" in text  # strategy sources, escaped
    assert text.count("<h4>memory findings</h4>") == len(trials)


def test_the_score_timeline_starts_at_base_and_only_improves(world):
    record, _, _, _ = _store(world.run_dir)
    timeline = report_data(world.run_dir).timeline
    assert timeline[0].trial_id is None and timeline[0].in_loop == record.base_model
    keys = [(p.in_loop["pass_at_k"], p.in_loop["average_at_k"]) for p in timeline]
    assert keys == sorted(keys) and len(set(keys)) == len(keys)
    assert [p.seconds for p in timeline] == sorted(p.seconds for p in timeline)
    assert timeline[-1].trial_id == record.selection.trial_id
    assert timeline[-1].in_loop == record.selection.scores


def test_the_score_timeline_runs_to_the_end_of_search(world):
    from ade_core.report import history
    from ade_core.schemas.trial import Trial

    data = report_data(world.run_dir)
    with RunStore.open(world.run_dir) as store:
        events = store.events()
        trials = [Trial.model_validate(d.document) for d in store.list("trial")]
        origin, _ = history.origin(events, True)
        finished = history.eligible_times(store, trials, events, True, origin)
    # the last Trial to finish need not improve the best, but the line still covers it
    assert len(finished) == len(trials) and data.search_seconds >= max(finished.values())
    assert data.search_seconds < history.clock_of(events[-1], True) - origin or events[-1].kind == "final_selection"


def test_the_heldout_line_appears_only_where_records_exist(world):
    data = report_data(world.run_dir)
    held = [p for p in data.timeline if p.heldout is not None]
    assert [p.trial_id for p in held] == [data.timeline[-1].trial_id]  # `ade heldout` evaluated the selection
    assert data.heldout_records == 1 and not data.notes
    before = world.before_heldout.read_text(encoding="utf-8")
    assert "No held-out evaluations are recorded for this run" in before


def test_the_heldout_table_shows_the_evaluated_selection_beside_base_and_reference(world):
    record, _, _, _ = _store(world.run_dir)
    (evaluation,) = HeldOutStore(world.run_dir).evaluations()  # `ade heldout`: the final selection only
    table = HeldOutTable(world.report.read_text(encoding="utf-8"))
    assert list(table.groups) == ["base", "P000", record.selection.plan_id]
    assert table.missing == ["base", "P000"]  # shown, though not evaluated on the held-out suite
    assert table.rows == [*(b.name for b in evaluation.benchmarks), "macro"]
    for bench in evaluation.benchmarks:
        for metric, value in bench.scores.items():
            assert float(table.cells[(bench.name, record.selection.plan_id, metric)]) == value
    before = HeldOutTable(world.before_heldout.read_text(encoding="utf-8"))
    assert not before.groups and "No held-out evaluations are recorded" in world.before_heldout.read_text()


def test_the_lineage_has_artifact_and_citation_edges(world):
    _, plans, _, _ = _store(world.run_dir)
    lineage = report_data(world.run_dir).lineage
    assert lineage.nodes == tuple(p.plan_id for p in plans)
    expected = {(s, p.plan_id, p.relation) for p in plans for s in p.sources}
    assert expected and set(lineage.artifact_edges) == expected
    cited = {(p.plan_id, c.finding_id) for p in plans for c in p.cited_findings}
    assert cited and {(target, finding) for _, target, finding in lineage.citation_edges} == cited


def test_stage_times_and_tokens_add_up_to_ade_status(world):
    _, _, _, status = _store(world.run_dir)
    data = report_data(world.run_dir)
    for stage, seconds in status["seconds_per_stage"].items():
        assert sum(s.get(stage, 0.0) for s in data.stage_seconds.values()) == pytest.approx(seconds, abs=0.01)
    assert sum(sum(r.values()) for r in data.tokens.values()) == status["agents"]["tokens_total"] > 0
    assert {role for r in data.tokens.values() for role in r} == set(status["agents"]["tokens"])


def test_write_report_regenerates_in_place(world):
    path = write_report(world.run_dir)
    assert path == world.report and Page(path.read_text(encoding="utf-8")).images.keys() == FIGURES


def test_ade_report_refuses_a_directory_without_a_run(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "ade_core.cli", "report", str(tmp_path)], capture_output=True, text=True, cwd=ROOT
    )
    assert done.returncode != 0 and "holds no run store" in done.stderr
    assert list(tmp_path.iterdir()) == []  # no empty store was created


def test_the_cli_loads_neither_matplotlib_nor_the_report_until_asked():
    code = (
        "import sys, ade_core.cli, ade_core.report\n"
        "loaded = {'matplotlib', 'ade_core.report.data', 'ade_core.harness.status'} & set(sys.modules)\n"
        "assert not loaded, loaded"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


def test_trials_below_base_still_form_the_best_so_far_line():
    """Base is the plot's starting level, not a contender: final selection ranks Trials only."""
    from ade_core.harness.ranking import MetricOrder
    from ade_core.report.history import timeline
    from ade_core.schemas.trial import Trial

    def trial(trial_id: str, avg: float) -> Trial:
        # only the id and the scores matter to the timeline
        return Trial.model_construct(trial_id=trial_id, plan_id=trial_id.rsplit("/", 1)[0], scores={"avg": avg})

    trials = [trial("P000/T1", 43.0), trial("C1/P1/T1", 45.0), trial("C1/P2/T1", 44.0)]
    times = {"P000/T1": 10.0, "C1/P1/T1": 20.0, "C1/P2/T1": 30.0}
    points = timeline({"avg": 54.0}, 1.0, trials, times, MetricOrder(["avg"]), {"C1/P1/T1": [{"avg": 17.0}]})
    assert [(p.trial_id, p.in_loop["avg"]) for p in points] == [(None, 54.0), ("P000/T1", 43.0), ("C1/P1/T1", 45.0)]
    assert points[-1].heldout == {"avg": 17.0} and points[1].heldout is None
