"""A dry run of a 3-Coordinator search end to end, and the paper's protocol invariants on it."""

from __future__ import annotations

import json
import sys
from collections import Counter

import pytest
from harness_world import ROOT, RecordingBackend, config, digest_of, dry_run, models

from ade_core.harness.core import FrozenInputsChanged
from ade_core.harness.run import open_harness
from ade_core.harness.scripted import ScriptedBackend
from ade_core.schemas.deliveries import PlanProposal
from ade_core.schemas.views import VIEW_MODELS, CoordinatorView
from ade_core.store import RunStore, check_store
from ade_core.testing import run_command

RESEARCH_KINDS = {"plan", "trial", "plan_memory", "run_memory", "run"}


@pytest.fixture(scope="module")
def three_coordinators(tmp_path_factory):
    """One C=3, B_P=2 dry run shared by the invariant tests (the views it showed are recorded)."""
    run_dir = tmp_path_factory.mktemp("c3") / "run"
    backend = RecordingBackend()
    phase = dry_run(run_dir, config(coordinators=3, plans=2), backend=backend)
    return run_dir, backend, phase


def test_three_coordinators_complete_with_the_budgeted_plans_and_trials(three_coordinators):
    run_dir, _, phase = three_coordinators
    assert phase == "completed"
    plans = models(run_dir, "plan")
    trials = models(run_dir, "trial")
    assert sorted(p.plan_id for p in plans) == ["C1/P1", "C1/P2", "C2/P1", "C2/P2", "C3/P1", "C3/P2", "P000"]
    assert len(trials) == 7 and all(t.status == "completed" for t in trials)
    assert Counter(p.coordinator for p in plans) == {0: 1, 1: 2, 2: 2, 3: 2}
    with RunStore.open(run_dir) as store:
        assert check_store(store) == []
        record = store.get_model("run", "run")
        assert record.phase == "completed" and isinstance(record.base_model, dict)
        best = max((t for t in trials), key=lambda t: (t.scores["pass_at_k"], t.scores["average_at_k"]))
        assert record.selection.trial_id == best.trial_id
        assert record.selection.scores == best.scores


def test_each_coordinator_first_explores_a_different_catalog_family(three_coordinators):
    run_dir, _, _ = three_coordinators
    families = [p.direction.split("(")[0] for p in models(run_dir, "plan") if p.plan_id != "P000"]
    assert len(set(families)) == len(families)


def test_the_same_config_and_seeds_give_the_same_state_digest(three_coordinators, tmp_path):
    run_dir, _, _ = three_coordinators
    again = tmp_path / "again"
    assert dry_run(again, config(coordinators=3, plans=2)) == "completed"
    assert digest_of(again) == digest_of(run_dir)
    other = tmp_path / "other-seed"
    dry_run(other, config(coordinators=3, plans=2, extra=["seeds.training=1"]))
    assert digest_of(other) != digest_of(run_dir)


def test_the_frozen_config_and_interface_digests_never_change(three_coordinators):
    run_dir, _, _ = three_coordinators
    with RunStore.open(run_dir) as store:
        versions = [doc.model() for doc in store.history("run", "run")]
        assert len(versions) > 3
        assert {(v.config_digest, v.interface_digest) for v in versions} == {
            (versions[0].config_digest, versions[0].interface_digest)
        }
        config_json = store.objects.read_json(versions[0].config_object)
        assert config_json["budget"]["coordinators"] == 3


def test_a_changed_config_is_refused_before_any_commit(three_coordinators):
    run_dir, _, _ = three_coordinators
    with RunStore.open(run_dir) as store:
        h = open_harness(store)
        revision = store.revision
        h.config = h.config.model_copy(update={"name": "edited"})
        with pytest.raises(FrozenInputsChanged, match="frozen as sha256:"):
            with h.transition("anything", "run"):
                pass
        assert store.revision == revision


def test_every_accepted_delivery_names_the_digest_of_the_view_it_answered(three_coordinators):
    run_dir, backend, _ = three_coordinators
    shown = {VIEW_MODELS[role].model_validate_json(v).digest() for role, views in backend.views.items() for v in views}
    with RunStore.open(run_dir) as store:
        answered = [e.payload["details"]["view_digest"] for e in store.events() if e.kind == "delivery_accepted"]
    assert answered and set(answered) <= shown


def test_the_analyzer_never_sees_the_hypothesis(tmp_path):
    canary = "CANARY-7f3a-hypothesis"

    class Planting(RecordingBackend):
        def coordinator(self, view: CoordinatorView) -> PlanProposal:
            proposal = super().coordinator(view)
            return proposal.model_copy(
                update={"hypothesis": f"{proposal.hypothesis} {canary}", "mechanism": f"{canary} mechanism"}
            )

    backend = Planting()
    assert dry_run(tmp_path / "run", config(coordinators=2, plans=1), backend=backend) == "completed"
    assert canary in "".join(backend.views["plan_summarizer"])  # ψ does reach the Plan Summarizer
    assert canary in "".join(backend.views["builder"])
    assert len(backend.views["analyzer"]) == 2 * 3  # design + interpretation for P000 and two Plans
    for role in ("analyzer", "review_worker"):
        for text in backend.views[role]:
            assert canary not in text
            assert "hypothesis" not in json.loads(text)
    trials = models(tmp_path / "run", "trial")
    plans = {p.plan_id: p for p in models(tmp_path / "run", "plan")}
    for trial in trials:  # ψ was frozen into each Trial before it ran
        assert trial.commitment_digest == plans[trial.plan_id].commitment().digest()


def test_only_harness_admission_changes_canonical_knowledge(three_coordinators):
    run_dir, _, _ = three_coordinators
    with RunStore.open(run_dir) as store:
        events = {e.revision: e for e in store.events()}
        with store.snapshot() as conn:
            writes = conn.execute("SELECT kind, revision FROM documents").fetchall()
        for kind, revision in writes:
            event = events[revision]
            if kind in RESEARCH_KINDS:
                # a Harness transition, or an agent delivery the Harness accepted, or the queue's publication
                assert event.actor == "harness" or event.kind in ("delivery_accepted", "run_memory_published"), event
            if event.actor == "operator":
                assert kind == "ledger"
        rejected = [e.revision for e in events.values() if e.kind == "delivery_rejected"]
        assert not [kind for kind, revision in writes if revision in rejected]


def test_each_terminal_trial_yields_exactly_one_plan_and_run_memory_update(three_coordinators):
    run_dir, _, _ = three_coordinators
    with RunStore.open(run_dir) as store:
        trials = [d.model() for d in store.list("trial")]
        memories = [d.model() for d in store.list("plan_memory")]
        queue = store.queue()
        run_memories = [d.model() for d in store.list("run_memory")]
    added = Counter()
    for memory in memories:
        if memory.version:
            parent = next(m for m in memories if m.plan_id == memory.plan_id and m.version == memory.parent)
            new = set(memory.source_trials) - set(parent.source_trials)
            assert len(new) == 1
            added.update(new)
    assert added == Counter({t.trial_id: 1 for t in trials})
    assert [e.status for e in queue] == ["published"] * len(trials)
    assert sorted(e.commit_key for e in queue) == sorted(f"{t.trial_id}#run-memory" for t in trials)
    assert run_memories[-1].commit_keys == tuple(e.commit_key for e in queue)
    assert len(run_memories) == len(trials) + 1
    # every Run-Memory finding is traceable to the Trials it came from
    assert {t for f in run_memories[-1].findings for t in f.source_trials} == {t.trial_id for t in trials}


def test_later_plans_build_on_completed_plans(tmp_path):
    run_dir = tmp_path / "run"
    assert dry_run(run_dir, config(coordinators=1, plans=9)) == "completed"
    plans = models(run_dir, "plan")
    relations = Counter(p.relation for p in plans)
    assert relations["new"] == 8 and relations["revisit"] >= 1  # seven families, then revisits of the best
    revisit = next(p for p in plans if p.relation == "revisit")
    source_best = next(t for t in models(run_dir, "trial") if t.plan_id == revisit.sources[0])
    assert revisit.comparison_target.kind == "source_plan"
    assert revisit.comparison_target.trial_id == source_best.trial_id
    assert revisit.comparison_target.scores == source_best.scores
    new = next(p for p in plans if p.plan_id == "C1/P1")
    assert new.comparison_target.kind == "generic_baseline" and new.comparison_target.plan_id == "P000"
    assert new.portfolio_target.kind == "run_best" and new.portfolio_target.plan_id == "P000"


def test_the_dry_run_controller_does_not_import_torch(tmp_path):
    code = (
        "import sys; sys.path.insert(0, {tests!r}); from harness_world import config, dry_run; "
        "from pathlib import Path; assert dry_run(Path({run!r}), config(coordinators=2, plans=1)) == 'completed'; "
        "heavy = sorted(m for m in ('torch', 'transformers', 'trl') if m in sys.modules); print(heavy)"
    ).format(tests=str(ROOT / "tests" / "harness"), run=str(tmp_path / "run"))
    result = run_command([sys.executable, "-c", code], idle_s=10)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_a_scripted_backend_is_deterministic_per_view(three_coordinators):
    _, backend, _ = three_coordinators
    import asyncio

    view = CoordinatorView.model_validate_json(backend.views["coordinator"][0])
    first = asyncio.run(ScriptedBackend().deliver("coordinator", view))
    second = asyncio.run(ScriptedBackend().deliver("coordinator", view))
    assert first == second


def test_trials_of_a_plan_run_serially_on_bases_frozen_at_creation(tmp_path):
    run_dir = tmp_path / "run"
    assert dry_run(run_dir, config(coordinators=2, plans=1, trials=2)) == "completed"
    with RunStore.open(run_dir) as store:
        for plan_id in ("C1/P1", "C2/P1"):
            first, second = (store.history("trial", f"{plan_id}/T{i}") for i in (1, 2))
            assert first[0].model().plan_memory_base == f"{plan_id}@v0"
            assert second[0].model().plan_memory_base == first[-1].model().plan_memory == f"{plan_id}@v1"
            assert second[0].revision > store.get("plan_memory", f"{plan_id}@v1").revision  # T2 began after T1 ended
            for versions in (first, second):  # bases and ψ never change once frozen
                frozen = {
                    (v.model().plan_memory_base, v.model().run_memory_base, v.model().commitment_digest)
                    for v in versions
                }
                assert len(frozen) == 1
        scores = {t.trial_id: t.scores["pass_at_k"] for t in (d.model() for d in store.list("trial"))}
    assert scores["C1/P1/T1"] != scores["C1/P1/T2"]  # a later Builder realized the Plan differently
