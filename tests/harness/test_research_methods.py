"""Every research method (paper Sec 4.3) completes a dry run with the offline policy, and each
role sees what its method allows and no more."""

from __future__ import annotations

import json
import sys
from collections import Counter

import pytest
from harness_world import ROOT, RecordingBackend, config, dry_run, models

from ade_core.agents.backends import role_endpoints
from ade_core.agents.offline_evidence import check_record, repetition_fraction
from ade_core.config import load_config
from ade_core.harness.methods import POLICIES
from ade_core.schemas.deliveries import PlanProposal
from ade_core.schemas.trial import Unavailable
from ade_core.schemas.views import CoordinatorView
from ade_core.store import RunStore, check_store
from ade_core.testing import run_command

METHODS = tuple(POLICIES)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """One C=2, B_P=2 dry run per method, with the views each role was shown."""
    found = {}
    for method in METHODS:
        run_dir = tmp_path_factory.mktemp(method) / "run"
        backend = RecordingBackend()
        phase = dry_run(run_dir, config(2, 2, extra=[f"research.method='{method}'"]), backend=backend)
        found[method] = (run_dir, backend, phase)
    return found


def coordinator_views(backend: RecordingBackend) -> list[CoordinatorView]:
    return [CoordinatorView.model_validate_json(v) for v in backend.views["coordinator"]]


@pytest.mark.parametrize("method", METHODS)
def test_each_method_completes_with_one_memory_update_of_each_kind_per_trial(runs, method):
    run_dir, backend, phase = runs[method]
    assert phase == "completed"
    trials = models(run_dir, "trial")
    assert len(trials) == 5 and all(t.status == "completed" for t in trials)
    with RunStore.open(run_dir) as store:
        assert check_store(store) == []
        published = [e.commit_key for e in store.queue(status="published")]
        memories = [d.model() for d in store.list("plan_memory")]
    assert Counter(published) == Counter(f"{t.trial_id}#run-memory" for t in trials)
    updates = Counter(m.source_trials[-1] for m in memories if m.version)
    assert updates == Counter(t.trial_id for t in trials)
    assert set(backend.views) == set(POLICIES[method].roles)


@pytest.mark.parametrize("method", METHODS)
def test_dev_check_diagnostics_reach_only_the_builder(runs, method):
    """Sec 3.2: development checks enter no other role's view, no memory record, no ranking."""
    run_dir, backend, _ = runs[method]
    checks = [r.dev_check for t in models(run_dir, "trial") for r in t.build_rounds if r.dev_check]
    assert checks and any("source_lines" in v for v in backend.views["builder"])
    markers = ("source_lines", "dev_check", *checks)
    for role, views in backend.views.items():
        if role != "builder":
            assert not [m for v in views for m in markers if m in v], role
    for kind in ("plan_memory", "run_memory"):
        assert not [m for doc in models(run_dir, kind) for m in markers if m in doc.model_dump_json()]


def test_full_calls_every_role_and_shares_memory(runs):
    _, backend, _ = runs["full"]
    assert set(backend.views) == {
        "coordinator",
        "builder",
        "analyzer",
        "review_worker",
        "plan_summarizer",
        "run_summarizer",
    }
    last = coordinator_views(backend)[-1]
    assert last.run_memory.findings and last.catalog and last.ranking and not last.packages and not last.notes


def test_independent_coordinators_see_no_other_plans_or_findings(runs):
    run_dir, backend, _ = runs["independent"]
    for view in coordinator_views(backend):
        assert view.run_memory.findings == () and view.catalog == () and view.ranking == ()
        assert view.relations == ("new",)
    plans = [p for p in models(run_dir, "plan") if p.plan_id != "P000"]
    assert {p.relation for p in plans} == {"new"} and all(not p.sources for p in plans)
    assert len({p.direction for p in plans}) == len(plans)  # slot n takes the n-th catalog candidate
    assert any(m.findings for m in models(run_dir, "run_memory"))  # the record is still kept


@pytest.mark.parametrize("method", ["outcome_only", "raw_evidence"])
def test_reduced_methods_keep_deterministic_outcome_records(runs, method):
    run_dir, backend, _ = runs[method]
    assert not {"analyzer", "review_worker", "plan_summarizer", "run_summarizer"} & set(backend.views)
    for trial in models(run_dir, "trial"):
        assert isinstance(trial.conclusions.hypothesis, Unavailable)
        assert isinstance(trial.records.analysis, Unavailable) and isinstance(trial.records.review, Unavailable)
    latest = max(models(run_dir, "run_memory"), key=lambda m: m.version)
    assert latest.findings and all(f.statement.startswith("Outcome of ") for f in latest.findings)
    assert all("scores" in f.statement for f in latest.findings)
    last = coordinator_views(backend)[-1]
    assert last.run_memory.findings and last.catalog and last.ranking


def test_only_raw_evidence_shows_the_coordinator_packages(runs):
    _, raw, _ = runs["raw_evidence"]
    last = coordinator_views(raw)[-1]
    assert "P000" in {p.plan_id for p in last.packages}  # the bootstrap baseline included
    assert all(p.in_loop_scores for p in last.packages)
    assert any(f.records for p in last.packages for f in p.records)
    for method in ("full", "outcome_only", "independent", "unified"):
        assert all(not v.packages for v in coordinator_views(runs[method][1]))


def test_unified_session_keeps_its_own_notes_not_structured_memory(runs):
    run_dir, backend, _ = runs["unified"]
    views = coordinator_views(backend)
    assert all(v.run_memory.findings == () for v in views)
    later = [v for v in views if v.subject.endswith("/P2")]
    assert later and all({n.kind for n in v.notes} == {"plan", "analysis"} for v in later)
    assert all(n.plan_id.startswith(f"C{v.coordinator}/") for v in views for n in v.notes)
    stages = {json.loads(v)["stage"] for v in backend.views["analyzer"]}
    assert stages == {"interpret"}  # no review design, no Review Worker
    assert all(isinstance(t.records.analysis, str) for t in models(run_dir, "trial"))


def test_unified_builder_and_analyzer_use_the_coordinators_endpoint():
    loaded = load_config(
        ROOT / "examples" / "tiny-data-selection.toml",
        ["agents.roles.builder.model='coder'", "agents.roles.coordinator.model='planner'"],
    )
    split = role_endpoints(loaded.operational)
    assert split["builder"].model == "coder"
    one = role_endpoints(loaded.operational, one_session=True)
    assert one["builder"].model == one["analyzer"].model == "planner"


def test_independent_refuses_a_plan_built_on_another(tmp_path):
    class Revisiting(RecordingBackend):
        def coordinator(self, view: CoordinatorView) -> PlanProposal:
            return super().coordinator(view).model_copy(update={"relation": "revisit", "sources": ("P000",)})

    run_dir = tmp_path / "run"
    assert dry_run(run_dir, config(1, 1, extra=["research.method='independent'"]), backend=Revisiting()) == "completed"
    assert [p.plan_id for p in models(run_dir, "plan")] == ["P000"]
    with RunStore.open(run_dir) as store:
        feedback = [e.payload.get("feedback", []) for e in store.events() if e.kind.startswith("coordinator_")]
    assert any("not available under research method 'independent'" in line for lines in feedback for line in lines)


@pytest.mark.parametrize("method", ["raw_evidence"])
def test_ade_run_dry_run_accepts_the_method(tmp_path, method):
    result = run_command(
        [sys.executable, "-m", "ade_core.cli", "run", str(ROOT / "examples" / "tiny-data-selection.toml")]
        + ["--dry-run", "--set", f"research.method={method}", "--set", f"operational.run_dir={tmp_path}"],
        idle_s=10,
    )
    assert result.returncode == 0, result.stderr
    assert "phase completed" in result.stdout


def test_review_rules_label_defects_before_correctness():
    assert check_record({"response": "x " * 40, "correct": True})[0] == "repetitive"
    assert repetition_fraction("one two three four five six seven eight nine") == 0.0
    assert check_record({"response": "答案是四十二答案是四十二", "correct": True})[0] == "wrong_language"
    assert check_record({"response": "so \\boxed{4}", "truncated": True})[0] == "truncated"
    assert check_record({"response": "so \\boxed{4}", "correct": False})[0] == "incorrect"
    assert check_record({"response": "the answer is 4"})[0] == "no_boxed_answer"
    # a selected training example is judged by its assistant target
    example = {"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "<think>t</think>4"}]}
    assert check_record(example)[0] == "no_boxed_answer"
    assert check_record({**example, "over_cap": True, "truncated": True})[0] == "truncated"
    assert check_record({"response": "the answer is \\boxed{4}"}) == (
        "no_defect_found",
        "repetition 0.00, non-ASCII letters 0.00, boxed answer True",
    )
