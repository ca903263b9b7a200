"""Record review covers whole pools (paper Sec 4, App. C.5): every selected example and every in-loop
response is bound, nothing is cut, large reviews reach the Review Worker in batches, and the
coverage the Trial records is counted from the judgments."""

from __future__ import annotations

import pytest
from harness_world import config, dry_run, models

from ade_core.harness import analysis
from ade_core.plugins import load_plugins
from ade_core.store import RunStore


def test_review_batches_split_requests_and_keep_every_record_in_order():
    bound = [
        {"request": 0, "pool": "selected_examples", "question": "q", "records": [{"id": str(i)} for i in range(1234)]},
        {"request": 1, "pool": "eval_responses", "question": "q", "records": [{"id": f"e{i}"} for i in range(3)]},
    ]
    batches = analysis.review_batches(bound, 500)
    assert [sum(len(b["records"]) for b in batch) for batch in batches] == [500, 500, 237]
    flat = [(b["request"], r["id"]) for batch in batches for b in batch for r in b["records"]]
    assert flat == [(b["request"], r["id"]) for b in bound for r in b["records"]]


def test_the_data_selection_review_pools_require_every_record():
    pools = {p.name: p for p in load_plugins().task("data_selection").review_pools()}
    assert pools["selected_examples"].min_coverage == pools["eval_responses"].min_coverage == 1.0


def _reviews(run_dir):
    with RunStore.open(run_dir) as store:
        for trial in models(run_dir, "trial"):
            design = store.objects.read_json(trial.records.review_design)
            yield trial, design, store.objects.read_json(trial.records.review), store


@pytest.mark.parametrize(
    ("batch", "shown"),
    [(analysis.REVIEW_BATCH_RECORDS, 200), (4, 200), (analysis.REVIEW_BATCH_RECORDS, 2)],
    ids=["one_batch", "batches_of_4", "view_shows_2_records"],
)
def test_every_selected_example_and_in_loop_response_is_reviewed(tmp_path, monkeypatch, batch, shown):
    """However few records the Analyzer's view shows, its design covers the whole pool."""
    from ade_core.harness import views

    monkeypatch.setattr(analysis, "REVIEW_BATCH_RECORDS", batch)
    monkeypatch.setattr(views, "RECORDS_PER_FAMILY", shown)
    run_dir = tmp_path / "run"
    assert dry_run(run_dir, config(coordinators=1, plans=1)) == "completed"
    seen = 0
    for trial, design, review, store in _reviews(run_dir):
        bound = {
            b["pool"]: sum(len(x["records"]) for x in design["bound"] if x["pool"] == b["pool"])
            for b in design["bound"]
        }
        assert design["pool_sizes"] == bound  # nothing bound is cut
        assert set(bound) == {"selected_examples", "eval_responses"}
        for pool, figure in review["coverage"].items():
            assert figure == {"records": bound[pool], "reviewed": bound[pool], "coverage": 1.0}, (pool, figure)
        assert len(review["judgments"]) == sum(bound.values())
        expected = -(-sum(bound.values()) // batch)
        assert review["batches"] == expected
        subjects = {d.subject for d in store.accepted_deliveries() if d.role == "review_worker"}
        assert {s for s in subjects if s.startswith(f"{trial.trial_id}#review")} == {
            f"{trial.trial_id}#review" if i == 0 else f"{trial.trial_id}#review/{i + 1}" for i in range(expected)
        }
        seen += 1
    assert seen >= 2  # the reference and the Coordinator's Trial


def test_the_builder_view_carries_the_pool_statistics_and_real_sample_rows():
    """The Builder's build inputs, as a real Run's Harness builds them (the pipeline gate reads the frozen
    inputs once); a dry run's controller never reads them and says so."""
    import json
    from types import SimpleNamespace

    from ade_core.harness.gate import PipelineGate
    from ade_core.harness.simulated import DryRunGate
    from ade_core.harness.views import build_inputs
    from ade_core.schemas.trial import Unavailable
    from ade_core.schemas.views import BuildInputs

    loaded = config(coordinators=1, plans=1)
    task = load_plugins().task("data_selection")
    fields = {"interface": task.interface(), "families": task.strategy_catalog(), "dev_inputs": "dev"}
    gate = PipelineGate(task, loaded.experiment, str(loaded.base_dir), "process")
    view = BuildInputs.model_validate_json(build_inputs(SimpleNamespace(**fields, gate=gate)).model_dump_json())
    stats, rows = view.frozen_inputs.statistics, view.frozen_inputs.sample
    assert stats["candidates"] == 2000 and stats["domain_math"] + stats["domain_chat"] == 2000
    assert {k for k in stats if k.startswith("bin_")} <= {"bin_le_4096", "bin_4097_8192", "bin_8193_16384"}
    assert sum(v for k, v in stats.items() if k.startswith("bin_")) == 2000
    assert stats["total_tokens"] == stats["tokens_domain_math"] + stats["tokens_domain_chat"] > 0
    assert 0 < stats["over_cap"] < 2000 and stats["uncapped_total_tokens"] > stats["total_tokens"]
    assert len(rows) == 8 and {r["domain"] for r in rows} == {"math", "chat"}
    for row in rows:
        assert row["trajectory_ids"] == [row["candidate_id"]]
        assert row["length_bin"] in ("le_4096", "4097_8192", "8193_16384")
        assert {"token_count", "uncapped_token_count", "over_cap", "problem_id", "difficulty", "quality_score"} <= set(
            row
        )
        assert [m["role"] for m in row["messages"]] == ["user", "assistant"] and row["messages"][1]["content"]
    assert "defect" not in json.dumps(view.frozen_inputs.model_dump())  # ground truth never reaches the Builder
    dry = build_inputs(SimpleNamespace(**fields, gate=DryRunGate(task, loaded.experiment)))
    assert isinstance(dry.frozen_inputs, Unavailable) and "dry run" in dry.frozen_inputs.reason


def test_group_pools_list_every_group_so_a_design_reaches_coverage_beyond_the_shown_records():
    """A rollout pool needs 25 % of its groups; the view shows 2 records of 40 groups, and the pool
    brief lists all 40, so the offline design takes 10 of them rather than 25 % of what it saw."""
    from types import SimpleNamespace

    from ade_core.agents.offline_evidence import design_review
    from ade_core.schemas.views import PoolBrief, RecordFamilyView

    groups = tuple(f"s{i // 8}-g{i % 8}" for i in range(40))
    pool = PoolBrief(
        name="training_rollouts",
        record="training_rollouts",
        selections=("groups",),
        min_coverage=0.25,
        group_key="prompt_group_id",
        size=160,
        groups=groups,
    )
    shown = RecordFamilyView(
        name="training_rollouts", count=160, records=({"id": "r0", "prompt_group_id": groups[0]},) * 2
    )
    design = design_review(SimpleNamespace(records=(shown,), review_pools=(pool,)))
    (request,) = design.requests
    assert request.selection == "groups" and request.ids == groups[:10]
