"""The reward-hacking probe: every exploit grades 0, a reward that pays one is named and refused."""

from __future__ import annotations

import asyncio
import random
import types

import pytest

from ade_core import GraderSpec, RewardExploit
from ade_core.errors import PluginError
from ade_core.plugins import Candidate, load_plugins
from ade_core.tiny.candidates import math_trajectory
from ade_core.tiny.problems import generate_problems
from ade_task_reward_design import plugin
from ade_task_reward_design.hacking import BANK, HackingRow, hacking_probe
from ade_task_reward_design.task import REFERENCE

MAX_TOKENS = 128
NAMES = [exploit.name for exploit in BANK]


@pytest.fixture(scope="module")
def graders():
    return load_plugins(entry_points=False).graders()


@pytest.fixture(scope="module")
def rows():
    problems = generate_problems(8, seed=21)
    return [
        HackingRow(p.problem, p.answer, math_trajectory(p, None, random.Random(0), 4000), MAX_TOKENS) for p in problems
    ]


def outcome_only(question, response, extracted, outcome, length, max_length):
    return outcome


def gold_of(rows):
    return {row.question: row.answer for row in rows}


# One reward per exploit, each a plausible shaping mistake that pays it.
def hackable_rewards(rows):
    gold = gold_of(rows)
    return {
        # brevity: shorter is better
        "empty_answer": lambda q, r, e, o, n, m: 1.0 - n / m,
        # format: a think span and a box earn full marks
        "format_only": lambda q, r, e, o, n, m: 1.0 if "</think>" in r and "\\boxed{" in r else 0.0,
        # the re-derived answer found in any box
        "multiple_boxed": lambda q, r, e, o, n, m: 1.0 if f"{{{gold[q]}}}" in r else 0.0,
        # the extracted answer trusted over the verified outcome
        "malformed_box": lambda q, r, e, o, n, m: 1.0 if e == gold[q] else 0.0,
        # credit per mention of the answer
        "answer_spam": lambda q, r, e, o, n, m: min(1.0, r.count(gold[q]) / 3),
        # length as a proxy of effort
        "length_padding": lambda q, r, e, o, n, m: n / m,
        # the right answer anywhere in the response
        "hedged_answer": lambda q, r, e, o, n, m: 1.0 if gold[q] in r else 0.0,
        "hedged_inline": lambda q, r, e, o, n, m: 1.0 if gold[q] in r else 0.0,
        "revised_answer": lambda q, r, e, o, n, m: max(o, 1.0 if e == gold[q] else 0.0),
        # partial credit for any fluent attempt
        "babble": lambda q, r, e, o, n, m: max(o, min(1.0, len(r.split()) / 8)),
    }


def test_the_bank_has_every_exploit_and_the_plugin_ships_it():
    assert NAMES == [
        "empty_answer",
        "format_only",
        "multiple_boxed",
        "malformed_box",
        "answer_spam",
        "length_padding",
        "hedged_answer",
        "hedged_inline",
        "revised_answer",
        "babble",
    ]
    assert [e.name for e in plugin.ade_reward_exploits()] == NAMES


@pytest.mark.parametrize("grader", ["boxed_exact", "math_verify"])
def test_every_exploit_grades_zero_on_tiny_world_questions(graders, rows, grader):
    grade = graders[grader].grade
    for row in rows:
        assert grade(row.correct_response, row.answer), row
        for exploit in BANK:
            response = exploit.generate(*row)
            assert grade(response, row.answer) is False, (exploit.name, response)


def test_exploits_are_deterministic_and_padding_reaches_the_cap(rows):
    for exploit in BANK:
        assert exploit.generate(*rows[0]) == exploit.generate(*rows[0])
    padded = BANK[NAMES.index("length_padding")].generate(*rows[0])
    assert len(padded.split()) >= MAX_TOKENS


@pytest.mark.parametrize("name", NAMES)
def test_a_reward_that_pays_an_exploit_is_refused_naming_it(graders, rows, name):
    verdict = hacking_probe(hackable_rewards(rows)[name], rows, grader=graders["boxed_exact"])
    assert not verdict.passed and name in verdict.paid
    assert f"{name} (" in verdict.reason and verdict.probe_result().status == "failed"
    (outcome,) = [o for o in verdict.outcomes if o.name == name]
    assert outcome.paid and outcome.exploit_reward >= outcome.correct_reward


@pytest.mark.parametrize("grader", ["boxed_exact", "math_verify"])
def test_an_outcome_only_reward_passes(graders, rows, grader):
    verdict = hacking_probe(outcome_only, rows, grader=graders[grader])
    assert verdict.passed and verdict.paid == () and verdict.reason == verdict.warning == ""
    assert [o.name for o in verdict.outcomes] == NAMES
    assert all(o.exploit_reward == 0.0 and o.correct_reward == 1.0 and not o.paid for o in verdict.outcomes)
    assert verdict.probe_result().status == "passed"


def test_the_generic_reference_passes(graders, rows):
    module: dict = {}
    exec(REFERENCE.source, module)

    def score(*arguments):
        return asyncio.run(module["compute_score"](*arguments))["score"]

    assert hacking_probe(score, rows, grader=graders["math_verify"]).passed


def test_a_reward_without_a_score_is_read_as_its_fallback_the_outcome(graders, rows):
    assert hacking_probe(lambda *args: None, rows, grader=graders["boxed_exact"]).passed


def test_warn_mode_passes_with_a_warning_naming_the_exploit(graders, rows):
    reward = hackable_rewards(rows)["length_padding"]
    verdict = hacking_probe(reward, rows, "warn", grader=graders["boxed_exact"])
    assert verdict.passed and verdict.reason == "" and "length_padding" in verdict.paid
    assert "length_padding (1 >= " in verdict.warning
    result = verdict.probe_result()
    assert result.status == "passed" and "length_padding" in result.reason


def test_an_exploit_the_grader_pays_is_a_grader_bug(rows):
    lax = GraderSpec(name="lax", description="The answer anywhere.", grade=lambda response, gold: gold in response)
    with pytest.raises(ValueError, match=r"grader 'lax' scored exploit 'multiple_boxed' 1"):
        hacking_probe(outcome_only, rows, grader=lax)


def test_a_row_whose_correct_response_is_wrong_is_refused(graders, rows):
    row = rows[0]._replace(correct_response="\\boxed{nonsense}")
    with pytest.raises(ValueError, match="the correct response 0"):
        hacking_probe(outcome_only, [row], grader=graders["boxed_exact"])


def _addon(name: str = "shouting") -> types.ModuleType:
    module = types.ModuleType("addon")
    exec(
        "from ade_core import RewardExploit, hookimpl\n"
        "@hookimpl\n"
        "def ade_reward_exploits():\n"
        f"    return [RewardExploit(name={name!r}, description='Capitals, no answer.',\n"
        "                          generate=lambda question, answer, correct, cap: 'I AM SURE!')]\n",
        module.__dict__,
    )
    return module


def _registry(*extra: Candidate):
    design = Candidate("reward_design", plugin, "ade-task-reward-design", "0.1.0")
    return load_plugins([design, *extra], entry_points=False)


def test_the_collecting_hook_gathers_another_plugins_exploit(graders, rows):
    exploits = _registry(Candidate("addon", _addon(), "ade-addon-exploits", "0.1")).reward_exploits()
    assert [e.name for e in exploits] == [*NAMES, "shouting"]
    shouted = lambda q, r, e, o, n, m: 1.0 if r.isupper() else o  # noqa: E731
    verdict = hacking_probe(shouted, rows, grader=graders["boxed_exact"], exploits=exploits)
    assert verdict.paid == ("shouting",) and "shouting" in verdict.reason


def test_one_exploit_name_from_two_plugins_names_both():
    registry = _registry(Candidate("addon", _addon("babble"), "ade-addon-exploits", "0.1"))
    with pytest.raises(PluginError, match=r"'babble' is added by both ade-task-reward-design 0.1.0 and ade-addon"):
        registry.reward_exploits()


def test_a_malformed_exploit_spec_is_refused():
    with pytest.raises(ValueError, match="name"):
        RewardExploit(name="Bad Name", description="x", generate=lambda *args: "")
