"""Builder development checks: requested within the J reflections, diagnostics back to the Builder only.

Paper Sec 3.2: development checks do not train the target model, and drafts and probes enter
neither rankings nor memory.
"""

from __future__ import annotations

import json

import pytest
from harness_world import RecordingBackend, config, dry_run, models

from ade_core.agents.offline import OfflinePolicy, format_direction
from ade_core.harness.admission import admit
from ade_core.harness.dev_check import diagnose
from ade_core.harness.status import format_status, run_status
from ade_core.harness.views import render_template
from ade_core.plugins import load_plugins
from ade_core.schemas.deliveries import BuilderDelivery
from ade_core.schemas.views import BuilderView, CheckOutcome, DevCallDiagnostics, DevCheck
from ade_core.store import RunStore

NON_BUILDER = ("coordinator", "analyzer", "review_worker", "plan_summarizer", "run_summarizer")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A full-method dry run, C=1, B_P=2, B_T=2, recording every view."""
    run_dir = tmp_path_factory.mktemp("dev") / "run"
    backend = RecordingBackend()
    assert dry_run(run_dir, config(1, 2, 2), backend=backend) == "completed"
    return run_dir, backend


def builder_views(backend: RecordingBackend) -> list[BuilderView]:
    return [BuilderView.model_validate_json(v) for v in backend.views["builder"]]


def test_the_offline_builder_checks_its_first_draft_and_sees_the_diagnostics(run):
    run_dir, backend = run
    trials = [t for t in models(run_dir, "trial") if t.plan_id != "P000"]
    assert len(trials) == 4
    for trial in trials:
        first, second = trial.build_rounds
        assert (first.action, second.action) == ("revise", "finalize") and first.dev_check and not second.dev_check
        assert trial.status == "completed" and trial.strategy_digest == second.strategy_digest
    later = [v for v in builder_views(backend) if v.round == 1]
    assert len(later) == 4
    for view in later:
        check = view.previous[0].dev_check
        assert check is not None and check.admitted and check.claims == "verified"
        assert check.inputs == view.build_inputs.development_inputs
        assert check.calls[0].statistics["source_lines"] == len(view.previous[0].source.splitlines())
        assert [c.name for c in check.checks][0] == "static_check"
    with RunStore.open(run_dir) as store:
        recorded = [
            e.payload["details"]["dev_check"]
            for e in store.events()
            if e.kind == "delivery_accepted" and "dev_check" in e.payload["details"]
        ]
        status = run_status(store)
    assert sorted(r["digest"] for r in recorded) == sorted(t.build_rounds[0].dev_check for t in trials)
    listed = {t["trial_id"]: t["dev_checks"] for p in status["plans"] for t in p["trials"]}
    assert all(listed[t.trial_id][0]["diagnostics"] == t.build_rounds[0].dev_check for t in trials)
    assert "dev check in build round 0: passed" in format_status(status)


def test_dev_check_output_never_reaches_other_roles_memory_or_ranking(run):
    run_dir, backend = run
    digests = [r.dev_check for t in models(run_dir, "trial") for r in t.build_rounds if r.dev_check]
    markers = ["source_lines", "dev_check", "simulated_output", *digests]
    for role in NON_BUILDER:
        for text in backend.views[role]:
            assert not [m for m in markers if m in text], role
    with RunStore.open(run_dir) as store:
        memories = [d.model().model_dump_json() for kind in ("plan_memory", "run_memory") for d in store.list(kind)]
        status = run_status(store)
    for text in memories:
        assert not [m for m in markers if m in text]
    ranking_part = json.dumps({"selection": status["selection"], "scores": [p["trials"] for p in status["plans"]]})
    assert "source_lines" not in ranking_part and "simulated_output" not in ranking_part


def test_a_run_without_dev_checks_ranks_and_remembers_the_same(run, tmp_path):
    """The checks change nothing downstream: same strategies, scores, ranking and memory findings."""

    class NoChecks(RecordingBackend):
        def builder(self, view: BuilderView) -> BuilderDelivery:
            return super().builder(view).model_copy(update={"action": "finalize", "dev_check": False})

    run_dir, _ = run
    other = tmp_path / "run"
    assert dry_run(other, config(1, 2, 2), backend=NoChecks()) == "completed"

    def outcome(directory):  # type: ignore[no-untyped-def]
        memory = max(models(directory, "run_memory"), key=lambda m: m.version)
        with RunStore.open(directory) as store:
            sources = {
                t.trial_id: (store.objects.read_json(t.strategy_digest)["source"], t.scores)
                for t in models(directory, "trial")
            }
            selected = run_status(store)["selection"]
        selection = (selected["plan_id"], selected["trial_id"], selected["scores"])
        return sources, [f.statement for f in memory.findings], selection

    assert outcome(run_dir) == outcome(other)
    assert all(len(t.build_rounds) == 1 for t in models(other, "trial") if t.plan_id != "P000")


def test_a_dev_check_in_the_last_round_is_refused_with_feedback(tmp_path):
    class AlwaysChecks(RecordingBackend):
        def builder(self, view: BuilderView) -> BuilderDelivery:
            return super().builder(view).model_copy(update={"action": "revise", "dev_check": True})

    run_dir = tmp_path / "run"
    assert dry_run(run_dir, config(1, 1, extra=["budget.builder_reflections=1"]), backend=AlwaysChecks()) == "completed"
    (trial,) = [t for t in models(run_dir, "trial") if t.plan_id != "P000"]
    assert trial.status == "build_failed" and len(trial.build_rounds) == 1 and trial.build_rounds[0].dev_check
    with RunStore.open(run_dir) as store:
        feedback = [line for e in store.events() for line in e.payload.get("feedback", [])]
    assert any("dev_check: round 1 is the last of J=1 reflections" in line for line in feedback)


def test_a_dev_check_needs_a_revision():
    with pytest.raises(ValueError, match="dev_check needs action 'revise'"):
        BuilderDelivery.model_validate(
            {"source": "x = 1", "account": {"implementation": "x"}, "action": "finalize", "dev_check": True}
        )


def test_the_offline_builder_repairs_the_parameters_the_diagnostics_name(run):
    _, backend = run
    view = next(v for v in builder_views(backend) if v.round == 1)
    family = next(
        f
        for f in view.build_inputs.families
        if len(f.parameters) >= 2 and all(len(values) >= 2 for values in f.parameters.values())
    )
    first, second = list(family.parameters)[:2]
    chosen = {k: v[1] for k, v in family.parameters.items()}
    plan = view.plan.model_copy(update={"direction": format_direction(family.name, chosen, family.description)})
    check = DevCheck(
        inputs=view.build_inputs.development_inputs,
        admitted=False,
        checks=(CheckOutcome(name="probe:shape", status="failed", reason=f"{first} leaves the output empty"),),
        calls=(DevCallDiagnostics(entry_point="select", status="ok", statistics={"selected": 0}),),
        claims="verified",
    )
    previous = (view.previous[0].model_copy(update={"admitted": False, "failed_checks": (), "dev_check": check}),)
    repaired = OfflinePolicy().builder(view.model_copy(update={"plan": plan, "previous": previous}))
    assert repaired.action == "finalize" and not repaired.dev_check
    expected = {**chosen, first: family.parameters[first][0]}
    assert expected[second] == family.parameters[second][1]  # what the diagnostics did not name is kept
    assert repaired.source == render_template(family.template, expected)
    fresh = view.model_copy(update={"round": 0, "previous": (), "reflections_left": 0})
    assert not OfflinePolicy().builder(fresh).dev_check  # no reflection left: no check


def test_a_real_dev_check_reports_the_tasks_output_statistics():
    task = load_plugins().task("data_selection")
    reference = task.reference_strategy()
    admission = admit(reference.source, task, probes=False)
    check = diagnose(admission, task, task.builder_dev_inputs(None).description, [])
    assert check.admitted and [c.name for c in check.checks][:3] == ["static_check", "sandbox_run", "output_validation"]
    statistics = check.calls[0].statistics
    assert statistics["selected"] > 0 and "groups" in statistics and "pool_trajectories" in statistics
    assert check.calls[0].output_preview.startswith("[") and check.claims in ("verified", "unverified")
    deviated = diagnose(admission, task, "dev", [{"statistic": "selected", "comparator": "<", "value": 0}])
    assert deviated.claims == "deviated" and "selected" in deviated.claim_reasons[0]


class ReferenceCopyBuilder(RecordingBackend):
    """Delivers the generic reference's own source as C1/P1's first strategy, then builds as the offline policy."""

    def builder(self, view: BuilderView) -> BuilderDelivery:
        if view.trial_id == "C1/P1/T1" and view.round == 0:
            source = load_plugins().task("data_selection").reference_strategy().source
            offline = super().builder(view)
            return offline.model_copy(update={"source": source, "action": "finalize", "dev_check": False})
        return super().builder(view)


def test_a_strategy_that_realizes_the_reference_goes_back_to_the_builder_with_a_note(tmp_path):
    run_dir = tmp_path / "run"
    backend = ReferenceCopyBuilder()
    assert dry_run(run_dir, config(1, 1, 1), backend=backend) == "completed"
    (trial,) = [t for t in models(run_dir, "trial") if t.plan_id != "P000"]
    first, second = trial.build_rounds[:2]
    assert first.admitted and first.notes and first.notes[0].startswith("duplicate_of_reference:")
    assert second.strategy_digest != first.strategy_digest and not second.notes
    assert trial.status == "completed" and trial.strategy_digest == trial.build_rounds[-1].strategy_digest
    (view,) = [v for v in builder_views(backend) if v.trial_id == "C1/P1/T1" and v.round == 1]
    assert view.previous[0].notes == first.notes  # the Builder sees why its admitted round came back
    with RunStore.open(run_dir) as store:
        returned = [e for e in store.events() if e.kind == "trial_returned_to_builder"]
    assert [e.subject for e in returned] == ["C1/P1/T1"]
