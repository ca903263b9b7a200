"""Data Selection strategy catalog: every member is admissible and valid, and each family does what it claims.

Mechanism checks read the tiny world's ground-truth defect labels here, in the test only; the
strategies see the inventory alone.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from ade_core.engine.grading.boxed import last_boxed, normalize
from ade_core.engine.pool import length_bin
from ade_core.harness.static_policy import check_strategy_source
from ade_core.plugins import load_plugins
from ade_core.specs import StrategyCall, TaskInputs
from ade_core.testing import run_strategy_calls
from ade_core.tiny.candidates import CHAT_TOPICS, WORDS, Candidate, build_candidates
from ade_core.tiny.problems import MathProblem, generate_problems
from ade_sandbox import Limits, Service, open_worker
from ade_task_data_selection.catalog import CATALOG, family, render
from ade_task_data_selection.judge import OfflineJudge

try:
    from ade_core.tiny.solver import solve
except ImportError:  # the question-only solver is optional; the test's own answer table stands in
    solve = None

CAP = 200  # the tiny world's truncation cap (characters, as its token_count counts them)
MECHANISM_SIZE = 150  # of 360 candidates: enough clean ones exist for every filter


def _variants() -> list[tuple[str, dict[str, Any]]]:
    """Every family at its defaults, then one parameter at a time through its other allowed values."""
    out = []
    for member in CATALOG:
        out.append((member.name, {}))
        for key, values in member.parameters.items():
            out += [(member.name, {key: value}) for value in values[1:]]
    return out


@pytest.fixture(scope="module")
def task():
    return load_plugins().task("data_selection")


@pytest.fixture(scope="module")
def problems() -> list[MathProblem]:
    return generate_problems(300, seed=1)


@pytest.fixture(scope="module")
def candidates(problems) -> list[Candidate]:
    return build_candidates(problems, chat_count=60, seed=2)


def _inventory(candidates: list[Candidate], bins: bool = True) -> list[dict[str, Any]]:
    """Flat rows as the inventory gives them; without ``bins`` only the uncapped count (no length fields)."""
    rows = []
    for c in candidates:
        count = sum(len(m["content"]) for m in c.messages)
        row = {"candidate_id": c.candidate_id, "problem_id": c.problem_id, "trajectory_ids": [c.candidate_id]}
        row |= {"domain": c.domain, "difficulty": "unlabeled", "quality_score": 1.0, "messages": list(c.messages)}
        if bins:
            capped = min(count, CAP)
            row |= {"token_count": capped, "uncapped_token_count": count, "over_cap": count > CAP}
            row["length_bin"] = length_bin(capped, CAP)
        else:
            row["token_count"] = count
        rows.append(row)
    return rows


def _call(inventory: list[dict[str, Any]], select_size: int) -> StrategyCall:
    arguments = {"candidate_inventory": inventory, "select_size": select_size}
    return StrategyCall(entry_point="select_trajectories", arguments=arguments)


def _puzzle() -> list[dict[str, Any]]:
    """Rows holding groups of 3, 3, 3, 2 and 2 trajectory ids: only the two pairs make 4, so first-fit alone
    can fail."""
    rows = []
    for index, size in enumerate((3, 3, 3, 2, 2)):
        messages = [
            {"role": "user", "content": f"What is {index} + 1?"},
            {"role": "assistant", "content": f"<think>{index}+1={index + 1}</think>\\boxed{{{index + 1}}}"},
        ]
        ids = [f"g{index}-t{k}" for k in range(size)]
        rows.append(
            {"candidate_id": f"g{index}", "domain": "math", "problem_id": f"p{index}", "trajectory_ids": ids}
            | {"token_count": 10 + index, "messages": messages}
        )
    return rows


def _select(task, source: str, inventory: list[dict[str, Any]], select_size: int) -> list[str]:
    (result,) = run_strategy_calls(source, task.interface(), TaskInputs(calls=(_call(inventory, select_size),)))
    assert result["ok"], result.get("error")
    verdict = task.validate_output("select_trajectories", result["value"], _call(inventory, select_size).arguments)
    assert verdict.ok, verdict.errors
    return result["value"]


def _defects(candidates: list[Candidate], selected: list[str]) -> Counter[str | None]:
    by_id = {c.candidate_id: c.defect for c in candidates}
    return Counter(by_id[i] for i in selected)


def test_catalog_is_registered(task):
    assert [f.name for f in task.strategy_catalog()] == [f.name for f in CATALOG]
    # the offline Coordinator's exploration order: quality checks first, controls last
    assert [f.name for f in CATALOG] == [
        "complete_target",
        "repetition_filter",
        "judge_correctness",
        "question_dedup",
        "domain_alignment",
        "length_band",
        "random",
    ]
    for member in CATALOG:
        assert member.task == "data_selection" and member.targets
        assert all(2 <= len(values) <= 4 for values in member.parameters.values()), member.name


@pytest.mark.parametrize(("name", "choices"), _variants(), ids=lambda v: v if isinstance(v, str) else repr(v))
def test_member_admissible_and_valid(task, candidates, name, choices):
    source = render(family(name), **choices)
    assert check_strategy_source(source, task.interface()) == []
    calls = (
        *task.builder_dev_inputs(None).calls,
        _call(_inventory(candidates), 50),
        _call(_puzzle(), 4),  # no length_bin: bins fall back to token counts
    )
    results = run_strategy_calls(source, task.interface(), TaskInputs(calls=calls))
    for call, result in zip(calls, results, strict=True):
        assert result["ok"], result.get("error")
        verdict = task.validate_output(call.entry_point, result["value"], call.arguments)
        assert verdict.ok, verdict.errors
    assert sorted(results[2]["value"]) == ["g3-t0", "g3-t1", "g4-t0", "g4-t1"]


def test_render_defaults_and_errors():
    member = family("domain_alignment")
    assert render(member) == member.render(target_domain="math", share=1.0)
    assert "TARGET_DOMAIN = 'code'" in render(member, target_domain="code")
    with pytest.raises(KeyError, match="did you mean 'share'"):
        render(member, shares=0.8)
    with pytest.raises(ValueError, match=r"choose one of \[1.0, 0.8\]"):
        render(member, share=0.5)
    with pytest.raises(KeyError, match="did you mean 'random'"):
        family("randm")


def test_repetition_filter_drops_loops(task, candidates):
    inventory = _inventory(candidates)
    filtered = _defects(
        candidates, _select(task, render(family("repetition_filter"), window=4), inventory, MECHANISM_SIZE)
    )
    drawn = _defects(candidates, _select(task, render(family("random")), inventory, MECHANISM_SIZE))
    assert filtered["repetition_loop"] == 0 < drawn["repetition_loop"]


@pytest.mark.parametrize("bins", [True, False], ids=["length_bin", "no_length_bin"])
def test_complete_target_drops_incomplete(task, candidates, bins):
    selected = _select(task, render(family("complete_target")), _inventory(candidates, bins), MECHANISM_SIZE)
    defects = _defects(candidates, selected)
    assert defects["truncated"] == 0 and defects["missing_box"] == 0


def test_length_band_matches_pool_bins(task, candidates):
    inventory = _inventory(candidates)
    selected = set(_select(task, render(family("length_band")), inventory, MECHANISM_SIZE))
    pool = Counter(r["length_bin"] for r in inventory if not r["over_cap"])
    chosen = Counter(r["length_bin"] for r in inventory if r["candidate_id"] in selected)
    assert not any(r["over_cap"] for r in inventory if r["candidate_id"] in selected)
    for label, count in pool.items():
        assert abs(chosen[label] - MECHANISM_SIZE * count / sum(pool.values())) < 1, (label, chosen, pool)


def test_question_dedup_keeps_one_per_question(task, candidates):
    inventory = _inventory(candidates)
    selected = set(_select(task, render(family("question_dedup")), inventory, MECHANISM_SIZE))
    questions = [
        " ".join(r["messages"][0]["content"].lower().split()) for r in inventory if r["candidate_id"] in selected
    ]
    assert len(questions) == len(set(questions)) == MECHANISM_SIZE


def test_domain_alignment_full_share_is_all_math(task, candidates):
    inventory = _inventory(candidates)
    selected = set(_select(task, render(family("domain_alignment")), inventory, MECHANISM_SIZE))
    assert {r["domain"] for r in inventory if r["candidate_id"] in selected} == {"math"}


def test_judge_correctness_without_judge_falls_back_to_complete_targets(task, candidates):
    selected = _select(task, render(family("judge_correctness")), _inventory(candidates), MECHANISM_SIZE)
    defects = _defects(candidates, selected)
    assert defects["truncated"] == 0 and defects["missing_box"] == 0


def _answer_table(problems: list[MathProblem]) -> dict[str, str]:
    table = {p.problem: p.answer for p in problems}
    table.update({template.format(w=word): solve_chat(word) for template, solve_chat in CHAT_TOPICS for word in WORDS})
    return table


def _correct_judge(problems: list[MathProblem]):
    """A judge that knows the answers: correctness by the final answer, format by the target's shape."""
    table = _answer_table(problems)

    def expected(question: str) -> str | None:
        solved = solve(question) if solve is not None else None
        return solved if solved is not None else table.get(question)

    def handler(requests: list[dict[str, Any]]) -> list[dict[str, Any]]:
        answers = []
        for request in requests:
            reference = expected(request["question"])
            if reference is None:
                answers.append({"status": "unavailable", "reason": "no reference answer"})
                continue
            response = request["response"]
            final = response.split("</think>", 1)[1].strip() if "</think>" in response else ""
            boxed = last_boxed(final)
            given = boxed if boxed is not None else final
            levels = {
                "correctness": 1.0 if final and normalize(given) == normalize(reference) else 0.0,
                "format": 0.0 if not final else 1.0 if boxed is not None else 0.5,
            }
            dimensions = request["rubric"]["dimensions"]
            scores = {d["name"]: levels.get(d["name"], d["levels"][0]) for d in dimensions}
            answers.append(
                {
                    "status": "completed",
                    "scores_by_dimension": scores,
                    "projected_score": sum(d["weight"] * scores[d["name"]] for d in dimensions),
                    "fallback": False,
                    "fallback_reason": "",
                }
            )
        return answers

    return handler


@pytest.mark.parametrize("provider", ["answer_table", "offline"])
def test_judge_correctness_with_a_correct_judge_drops_wrong_answers(task, problems, candidates, provider):
    # "offline" is the task's own rule-based judge without verdict noise: it answers chat questions
    # as a fallback (correctness unassessed), which the strategy must read as no evidence.
    handler = _correct_judge(problems) if provider == "answer_table" else OfflineJudge(error_rate=0.0, seed=0)
    inventory = _inventory(candidates)
    call = _call(inventory, MECHANISM_SIZE)
    judge = Service("judge", handler, max_calls=64, max_items_per_call=4096)
    with open_worker(render(family("judge_correctness")), services=[judge], limits=Limits(wall_s=60, cpu_s=60)) as w:
        result = w.call(call.entry_point, call.arguments)
    assert result.ok, result.error
    assert task.validate_output(call.entry_point, result.value, call.arguments).ok
    assert [c.name for c in result.service_calls] == ["judge"] and result.service_calls[0].ok
    judged = _defects(candidates, result.value)
    drawn = _defects(candidates, _select(task, render(family("random")), inventory, MECHANISM_SIZE))
    assert judged["wrong_answer"] < drawn["wrong_answer"]
    math = _defects([c for c in candidates if c.domain == "math"], [i for i in result.value if i.startswith("m")])
    assert math["wrong_answer"] == math["wrong_step"] == 0
    if provider == "answer_table":
        assert judged["wrong_answer"] == 0


def test_judge_requests_are_batched_within_the_service_limits(task):
    inventory = [
        {
            "candidate_id": f"g{index:05d}",
            "domain": "math",
            "problem_id": f"p{index}",
            "trajectory_ids": [f"g{index:05d}"],
            "token_count": 12,
            "messages": [
                {"role": "user", "content": f"What is {index} + 1?"},
                {"role": "assistant", "content": f"<think>{index}+1</think>\\boxed{{{index + 1}}}"},
            ],
        }
        for index in range(5000)
    ]
    batches: list[int] = []

    def handler(requests: list[dict[str, Any]]) -> list[dict[str, Any]]:
        batches.append(len(requests))
        return [{"status": "unavailable", "reason": "busy"} for _ in requests]

    call = _call(inventory, 100)
    judge = Service("judge", handler, max_calls=64, max_items_per_call=4096)
    with open_worker(render(family("judge_correctness")), services=[judge], limits=Limits(wall_s=60, cpu_s=60)) as w:
        result = w.call(call.entry_point, call.arguments)
    assert result.ok, result.error
    assert batches == [4096, 904]
    assert task.validate_output(call.entry_point, result.value, call.arguments).ok


@pytest.fixture(scope="module")
def tiny_config():
    from pathlib import Path

    from ade_core.config import load_config

    return load_config(Path(__file__).resolve().parents[3] / "examples" / "tiny-data-selection.toml")


def test_the_random_control_never_redraws_the_reference(task, tiny_config):
    """At every catalog seed the random control's realized selection differs from the generic reference's,
    and a copy of the reference's mechanism at the reference's seed is recognised as a duplicate."""
    from ade_core.harness.admission import realize

    config, base = tiny_config.experiment, tiny_config.base_dir
    reference = realize(task.reference_strategy().source, task, config, base_dir=base).canonical_outputs
    for seed in family("random").parameters["seed"]:
        drawn = realize(render(family("random"), seed=seed), task, config, base_dir=base, reference_outputs=reference)
        assert drawn.canonical_outputs != reference and drawn.duplicate_of_reference is False, seed
    copy = family("random").render(seed=20240601)  # the reference's own seed, outside the catalog's choices
    again = realize(copy, task, config, base_dir=base, reference_outputs=reference)
    assert again.duplicate_of_reference is True
    assert realize(copy, task, config, base_dir=base).duplicate_of_reference is None  # no reference at hand
