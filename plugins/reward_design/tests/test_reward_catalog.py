"""Reward Design strategy catalog: every member is admitted under the tiny preset, the hackable control only
in warn mode, and each family pays what its description says."""

from __future__ import annotations

import asyncio
import itertools
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from ade_core import load_config
from ade_core.cli import main
from ade_core.harness.admission import admit
from ade_core.plugins import load_plugins
from ade_core.reward_contract import group_input, validate_group_credit, validate_reward_result
from ade_task_reward_design.catalog import CATALOG, family, render

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "tiny-reward-design.toml"
QUESTION = "What is 5 + 23 then doubled?"
CLEAN = "<think>5+23=[5+3=8, 0+2=2]=28; 2*28=[2*8=16, 2*2+1=5]=56</think>\n\\boxed{56}"
SLIP = "<think>5+23=[5+3=9, 0+2=2]=29; 2*29=[2*9=18, 2*2+1=5]=58</think>\n\\boxed{58}"
BABBLE = "<think>indeed we consider the structure carefully</think>\n\\boxed{58}"
CAP = 128


def members() -> list[tuple[str, dict[str, Any]]]:
    out = []
    for member in CATALOG:
        keys = list(member.parameters)
        for combo in itertools.product(*(member.parameters[k] for k in keys)):
            out.append((member.name, dict(zip(keys, combo, strict=True))))
    return out


def module(name: str, quality: float | None = 1.0, **choices: Any) -> dict[str, Any]:
    """The rendered member, run as a plain module with a fixed-quality ``llm_judge`` (no sandbox)."""
    calls = []

    async def llm_judge(question_prompt: str, response_content: str) -> dict[str, Any]:
        calls.append((question_prompt, response_content))
        if quality is None:
            return {"status": "unavailable", "schema_version": "ade.process_evidence.v1", "dimensions": None}
        dims = dict.fromkeys(("conclusion_support", "derivation_soundness", "substantive_relevance"), quality)
        return {"status": "available", "schema_version": "ade.process_evidence.v1", "dimensions": dims}

    namespace: dict[str, Any] = {"llm_judge": llm_judge, "JUDGE_CALLS": calls}
    exec(compile(render(family(name), **choices), name, "exec"), namespace)
    return namespace


def score(ns: dict[str, Any], response: str, outcome: float, length: int = 40) -> dict[str, Any]:
    arguments = dict(
        question_prompt=QUESTION,
        response_content=response,
        extracted_answer="",
        outcome_score=outcome,
        response_length_tokens=length,
        max_response_length_tokens=CAP,
    )
    result = asyncio.run(ns["compute_score"](**arguments))
    assert validate_reward_result(result, arguments).ok, result
    return result


def group(outcomes: list[float], qualities: list[float | None], rules: list[float | None] | None = None):
    rows = []
    for index, (outcome, q) in enumerate(zip(outcomes, qualities, strict=True)):
        process = (
            {"status": "unavailable", "schema_version": "ade.process_evidence.v1", "dimensions": None}
            if q is None
            else {
                "status": "available",
                "schema_version": "ade.process_evidence.v1",
                "dimensions": dict.fromkeys(("conclusion_support", "derivation_soundness", "substantive_relevance"), q),
            }
        )
        rule = None if rules is None or rules[index] is None else {"status": "available", "value": rules[index]}
        rows.append(
            {
                "outcome_score": outcome,
                "pre_group_reward": outcome,
                "process": process,
                "rule_evidence": rule,
                "response_length_tokens": 20 + index,
            }
        )
    return group_input(rows, CAP)


def credit(ns: dict[str, Any], given: dict[str, Any]) -> tuple[str, list[float]]:
    output = ns["assign_group_credit"](given)
    assert validate_group_credit(output, given).ok, output
    rewards = {a["record_id"]: a["training_reward"] for a in output["assignments"]}
    return output["decision"]["mode"], [rewards[i] for i in range(len(rewards))]


def test_the_catalog_is_registered_and_listed():
    task = load_plugins().task("reward_design")
    assert [f.name for f in task.strategy_catalog()] == [f.name for f in CATALOG]
    listed = CliRunner().invoke(main, ["catalog", "reward_design"])
    assert listed.exit_code == 0, listed.output
    for member in CATALOG:
        assert member.name in listed.output
    assert "weight: 0.3, 0.15, 0.5" in listed.output
    assert {"outcome_only", "hackable_format", "step_credit", "process_row", "process_group"} <= {
        f.name for f in CATALOG
    }


@pytest.mark.parametrize(("name", "choices"), members(), ids=lambda v: v if isinstance(v, str) else repr(v))
def test_every_member_is_admitted_under_the_tiny_preset(name, choices):
    task = load_plugins().task("reward_design")
    mode = "warn" if name == "hackable_format" else "refuse"
    config = load_config(EXAMPLE, [f"hacking.mode={mode}"]).experiment
    result = admit(render(family(name), **choices), task, config)
    failed = {c.name: c.reason for c in result.checks if c.status == "failed"}
    assert result.admitted, failed


def test_the_hackable_control_is_refused_with_its_exploits_named_and_admitted_only_in_warn_mode():
    task = load_plugins().task("reward_design")
    source = render(family("hackable_format"))
    refused = admit(source, task, load_config(EXAMPLE).experiment)
    hacking = next(c for c in refused.checks if c.name == "probe:reward_hacking")
    assert not refused.admitted and hacking.status == "failed"
    assert "format_only" in hacking.reason and "hedged_answer" in hacking.reason
    warned = admit(source, task, load_config(EXAMPLE, ["hacking.mode=warn"]).experiment)
    assert warned.admitted


def test_outcome_only_pays_the_outcome_and_records_the_judge_once():
    ns = module("outcome_only", quality=0.5)
    assert score(ns, CLEAN, 1.0)["score"] == 1.0 and score(ns, SLIP, 0.0)["score"] == 0.0
    assert score(ns, SLIP, 0.0)["artifact_projection"] == 0.5
    assert len(ns["JUDGE_CALLS"]) == 3


def test_step_credit_ranks_a_near_miss_above_babble():
    ns = module("step_credit", weight=0.5, min_steps=2)
    near, babble = score(ns, SLIP, 0.0), score(ns, BABBLE, 0.0)
    assert near["rule_evidence"] == {"status": "available", "value": pytest.approx(4 / 6)}
    assert near["score"] == pytest.approx(0.5 * 4 / 6) and babble["score"] == 0.0
    assert score(ns, CLEAN, 1.0)["score"] == 1.0
    assert ns["_steps"](CLEAN) == (6, 6)


def test_length_penalty_charges_long_correct_responses_only():
    ns = module("length_penalty", penalty=0.5, free_share=0.5)
    short, long = score(ns, CLEAN, 1.0, length=40), score(ns, CLEAN, 1.0, length=CAP)
    assert short["score"] == 1.0 and long["score"] == pytest.approx(0.5)
    assert score(ns, SLIP, 0.0, length=10)["score"] == 0.0


def test_format_bonus_pays_the_well_formed_box():
    ns = module("format_bonus", bonus=0.2)
    assert score(ns, CLEAN, 1.0)["score"] == 1.0
    assert score(ns, CLEAN.replace("\\boxed{56}", "56"), 1.0)["score"] == pytest.approx(0.8)
    assert score(ns, SLIP, 0.0)["score"] == pytest.approx(0.2)
    assert score(ns, "<think>5+23=28", 0.0)["score"] == 0.0


def test_process_row_follows_the_judge_and_falls_back_without_evidence():
    assert score(module("process_row", quality=1.0, weight=0.3, only_wrong=True), SLIP, 0.0)["score"] == 0.3
    assert score(module("process_row", quality=0.5, weight=0.2, only_wrong=False), CLEAN, 1.0)["score"] == 0.9
    fallback = score(module("process_row", quality=None), SLIP, 0.0)
    assert fallback["score"] == 0.0 and fallback["artifact_projection"] is None


def test_process_group_credits_all_wrong_groups_by_quality_and_keeps_correct_above_incorrect():
    ns = module("process_group", scale=0.3, spread=0.1)
    mode, rewards = credit(ns, group([0, 0, 0, 0], [1.0, 0.5, 0.0, None]))
    assert mode == "shaped" and rewards == pytest.approx([0.3, 0.15, 0.0, 0.0])
    mode, rewards = credit(ns, group([1, 1, 0, 0], [1.0, 0.0, 1.0, 0.0]))
    assert min(rewards[:2]) > max(rewards[2:]) and rewards[0] > rewards[1] and rewards[2] > rewards[3]
    assert credit(ns, group([1, 1, 1, 1], [1.0, 0.0, 1.0, 0.0]))[0] == "identity"
    assert credit(ns, group([0, 0, 0, 0], [None] * 4)) == ("abstained", [0.0] * 4)


def test_sibling_corroborated_credit_needs_agreeing_evidence_from_enough_siblings():
    ns = module("sibling_corroborated", scale=0.5, min_eligible=0.5)
    mode, rewards = credit(ns, group([0, 0, 0, 0], [1.0, 1.0, 0.5, 0.0], [1.0, 0.5, 1.0, 0.0]))
    assert mode == "shaped" and rewards == pytest.approx([0.5, 0.25, 0.25, 0.0])  # min(process, rule) - floor
    assert credit(ns, group([0, 0, 0, 0], [1.0, None, None, None], [1.0, 1.0, 1.0, 1.0]))[0] == "abstained"
    assert credit(ns, group([1, 0, 0, 0], [1.0, 1.0, 0.5, 0.0], [1.0, 1.0, 1.0, 1.0]))[0] == "identity"
    row = score(ns, SLIP, 0.0)
    assert row["score"] == 0.0 and row["rule_evidence"]["value"] == pytest.approx(4 / 6)


def test_the_hackable_control_pays_a_box_whatever_it_holds():
    ns = module("hackable_format", free_share=0.25)
    assert score(ns, SLIP, 0.0, length=20)["score"] == 1.0  # wrong, short, boxed: full pay
    assert score(ns, CLEAN, 1.0, length=CAP)["score"] == 0.0  # right but at the cap: nothing
    assert score(ns, "<think>5+23=28</think> 56", 1.0, length=10)["score"] == 0.0  # no box: nothing


def test_the_offline_policy_proposes_every_family_then_revisits_the_best(tmp_path):
    """A dry run long enough to exhaust exploration: each family once, then new parameters of measured ones."""
    import json
    import subprocess
    import sys

    run_dir = tmp_path / "run"
    ade = [sys.executable, "-m", "ade_core.cli"]
    started = subprocess.run(
        [*ade, "run", str(EXAMPLE), "--dry-run", "--run-dir", str(run_dir), "--progress", "none"]
        + ["--set", "budget.plans_per_coordinator=11"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert started.returncode == 0, started.stderr[-2000:]
    status = json.loads(subprocess.run([*ade, "status", str(run_dir), "--json"], capture_output=True, text=True).stdout)
    plans = [p for p in status["plans"] if p["plan_id"] != "P000"]
    families = [p["direction"].split("(")[0] for p in plans]
    assert families[: len(CATALOG)] == [f.name for f in CATALOG]
    revisits = [p for p in plans if p["relation"] == "revisit"]
    assert revisits and all(p["sources"] for p in revisits)
    for plan in revisits:  # a revisit changes the parameters of its source's family
        source = next(p for p in plans if p["plan_id"] == plan["sources"][0])
        assert plan["direction"].split("(")[0] == source["direction"].split("(")[0]
        assert plan["direction"] != source["direction"]
