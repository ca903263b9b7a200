"""Views shortened to the configured context: evidence is cut and counted, what a role acts on is kept whole."""

from __future__ import annotations

import json
import re
from typing import Any

from chat_server import Fault, Received

from ade_core.agents.fitting import EVIDENCE, fit_view
from ade_core.schemas.views import VIEW_MODELS
from ade_core.store import RunStore

from conftest import dry_run, openai_config

_VIEW = re.compile(r"## Your view\n\n```json\n(.*?)\n```\n\n## Reply schema", re.DOTALL)
CUT = re.compile(r" …\[\d+ characters cut to fit the context\]$")


def shown(request: Received) -> dict[str, Any]:
    found = _VIEW.search(request.body["messages"][1]["content"])
    assert found
    return json.loads(found.group(1))


def estimate(request: Received) -> int:
    return int(sum(len(m["content"]) + 8 for m in request.body["messages"]) / 3) + 1


def same_or_cut(full: Any, cut: Any) -> bool:
    """``cut`` is ``full`` with some texts shortened (their start kept, the cut marked)."""
    if isinstance(full, str) and isinstance(cut, str):
        return cut == full or (CUT.search(cut) is not None and full.startswith(CUT.sub("", cut)))
    if isinstance(full, dict) and isinstance(cut, dict):
        return full.keys() == cut.keys() and all(same_or_cut(full[k], cut[k]) for k in full)
    if isinstance(full, list) and isinstance(cut, list):
        return len(full) == len(cut) and all(same_or_cut(a, b) for a, b in zip(full, cut, strict=True))
    return full == cut


def test_an_analyzer_view_is_shortened_to_its_context_and_says_so(chat_server, tmp_path):
    whole, fitted = chat_server(), chat_server()
    dry_run(tmp_path / "whole", openai_config(whole.url))
    status = dry_run(tmp_path / "fitted", openai_config(fitted.url, "agents.roles.analyzer.context_tokens=7000"))
    assert status["phase"] == "completed" and status["agent_failures"]["per_role"] == {}
    full = {r.subject: r for r in whole.state.requests("analyzer")}
    shortened = [r for r in fitted.state.requests("analyzer") if "This view was shortened" in r.text]
    assert len(shortened) >= 2 and max(estimate(r) for r in full.values()) > 7000 - 1750
    for request in shortened:
        before, after = shown(full[request.subject]), shown(request)
        VIEW_MODELS["analyzer"].model_validate(after)  # still a valid view, only smaller
        assert len(json.dumps(after)) < len(json.dumps(before))
        assert after["strategy_source"] == before["strategy_source"]  # what the role acts on: whole
        assert (after["role"], after["subject"], after["basis_revision"]) == (
            before["role"],
            before["subject"],
            before["basis_revision"],
        )
        for family_before, family_after in zip(before["records"], after["records"], strict=True):
            assert family_after["count"] == family_before["count"]  # the counts still describe the whole
            kept = family_after["records"]
            assert [r["id"] for r in kept] == [r["id"] for r in family_before["records"][: len(kept)]]
            assert all(same_or_cut(a, b) for a, b in zip(family_before["records"], kept, strict=False))
        assert request.body["max_tokens"] <= 7000 - estimate(request)
    for role in ("coordinator", "builder", "plan_summarizer", "run_summarizer", "review_worker"):
        assert all("This view was shortened" not in r.text for r in fitted.state.requests(role))
    with RunStore.open(tmp_path / "fitted") as store:
        trimmed = [
            e.payload["details"]["view_trimmed"]
            for e in store.events()
            if e.kind == "delivery_accepted" and "view_trimmed" in e.payload["details"]
        ]
    assert len(trimmed) == len(shortened)
    assert all(t["items_dropped"].get("records.*.records", 0) > 0 and t["texts_cut"] > 0 for t in trimmed)


def measure_chars(data: dict[str, Any]) -> int:
    return len(json.dumps(data))


def test_a_view_that_fits_is_not_touched_and_the_input_is_never_changed():
    data = {"role": "analyzer", "records": [{"name": "f", "count": 3, "records": [{"id": "a", "text": "x" * 500}]}]}
    same, trimmed = fit_view("analyzer", data, measure_chars, 10_000)
    assert same is data and not trimmed
    frozen = json.dumps(data)
    smaller, trimmed = fit_view("analyzer", data, measure_chars, 300)
    assert json.dumps(data) == frozen and trimmed.texts_cut == 1 and measure_chars(smaller) <= 300


def test_records_a_review_worker_must_judge_are_never_dropped_and_ids_never_cut():
    records = [{"id": f"r{i}-" + "k" * 300, "response": "y" * 3000} for i in range(6)]
    data = {"role": "review_worker", "requests": [{"request": 0, "pool": "p", "question": "q", "records": records}]}
    fitted, trimmed = fit_view("review_worker", data, measure_chars, 1)  # cannot fit: as far as it goes
    kept = fitted["requests"][0]["records"]
    assert [r["id"] for r in kept] == [r["id"] for r in records] and not trimmed.items_dropped
    assert all(len(r["response"]) < 200 for r in kept) and trimmed.texts_cut == 6
    assert fitted["requests"][0]["question"] == "q"


def test_lists_keep_the_end_that_matters_and_rules_apply_in_order():
    data = {
        "role": "coordinator",
        "catalog": [{"plan_id": f"P{i}", "direction": "d" * 100} for i in range(8)],
        "ranking": [{"rank": i + 1, "plan_id": f"P{i}"} for i in range(8)],
    }
    fitted, trimmed = fit_view("coordinator", data, measure_chars, 700)
    catalog, ranking = [c["plan_id"] for c in fitted["catalog"]], [r["rank"] for r in fitted["ranking"]]
    assert catalog == [f"P{i}" for i in range(8 - len(catalog), 8)]  # the newest Plans
    assert ranking == list(range(1, len(ranking) + 1))  # the best Plans
    assert sum(trimmed.items_dropped.values()) == 16 - len(catalog) - len(ranking) > 0


def test_every_evidence_path_names_a_field_of_the_role_s_view():
    for role, rules in EVIDENCE.items():
        model = VIEW_MODELS[role]
        for path, _ in rules:
            assert path.split(".")[0] in model.model_fields, (role, path)


def test_a_builder_loses_earlier_rounds_before_anything_of_its_latest_one():
    rounds = [{"round": i, "source": f"def select_data(rows):  # round {i}\n" + "    pass\n" * 200} for i in range(4)]
    data = {
        "role": "builder",
        "build_inputs": {"frozen_inputs": {"sample": [{"prompt": "p" * 3000} for _ in range(4)]}},
        "previous": rounds,
    }
    fitted, trimmed = fit_view("builder", data, measure_chars, 3000)
    assert fitted["previous"] == rounds[-1:]  # the latest round whole, its source uncut
    assert len(fitted["build_inputs"]["frozen_inputs"]["sample"]) == 1
    assert trimmed.items_dropped == {"build_inputs.frozen_inputs.sample": 3, "previous": 3}


def test_a_long_invalid_reply_is_quoted_back_cut_so_its_repair_fits_the_context(chat_server, tmp_path):
    server = chat_server(faults=[Fault("rambling", role="analyzer", times=1)])
    context = 12000
    status = dry_run(tmp_path / "run", openai_config(server.url, f"agents.roles.analyzer.context_tokens={context}"))
    assert status["phase"] == "completed" and status["agent_failures"]["per_role"] == {}
    analyzer = server.state.requests("analyzer")
    rambled = next(i for i, r in enumerate(analyzer) if r.fault == "rambling")
    repair = analyzer[rambled + 1]
    quoted = repair.body["messages"][2]
    assert quoted["role"] == "assistant" and quoted["content"].startswith("Let me think about the delivery.")
    assert "characters of this reply cut to fit the context" in quoted["content"]
    assert estimate(repair) <= context - min(8192, context // 4) and repair.body["max_tokens"] >= context // 4
