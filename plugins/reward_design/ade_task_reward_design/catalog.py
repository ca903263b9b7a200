"""Strategy families of the Reward Design task: reward modules with declared parameters.

Each template is a complete module under the paper's contract once its ``$name`` fields are filled.
The row rewards are written for judge enrichment on (the tiny and paper presets): every valid path
of ``compute_score`` awaits ``llm_judge`` once and keeps its evidence as the projection, whether or
not the score uses it. The group-credit families return the outcome row for row and shape credit
from the evidence the Engine gathers. ``hackable_format`` is a negative control: it pays a box and
brevity, not correctness, so the hacking probe names its exploits and only ``[hacking] mode =
"warn"`` admits it.
"""

from __future__ import annotations

from typing import Any

from ade_core import StrategyFamily, find_family

TASK = "reward_design"

# Shared module text: the result record, the judge's evidence as a quality, and the outcome fallback.
_ROW = """
DIMENSIONS = ("conclusion_support", "derivation_soundness", "substantive_relevance")


def _result(score, outcome_score, projection=None, rule=None):
    return {
        "schema_version": "ade.reward_result.v2",
        "score": min(1.0, max(0.0, float(score))),
        "outcome_score": outcome_score,
        "artifact_projection": projection,
        "rule_evidence": {"status": "available", "value": rule}
        if rule is not None
        else {"status": "not_configured", "value": None},
    }


def _quality(evidence):
    # The mean of the three process dimensions, or None when the judge gave no evidence.
    if evidence.get("status") != "available":
        return None
    return sum(evidence["dimensions"][d] for d in DIMENSIONS) / len(DIMENSIONS)


def compute_fallback_score(question_prompt, response_content, extracted_answer, outcome_score,
                           response_length_tokens, max_response_length_tokens):
    return _result(outcome_score, outcome_score)
"""

# Rule-based step checking: every `a op b ... = value` of the working, brackets folded away.
_STEPS = r"""
import re

_BRACKETS = re.compile(r"=\[[^\[\]]*\]")
_STEP = re.compile(r"(?<![\w.])(\d+(?:[-+*/]\d+)+)=(-?\d+)(?![\d.])")
_TERM = re.compile(r"\d+|[-+*/]")


def _evaluate(expression):
    # Integer arithmetic with * and / before + and -; None for a division that is not exact.
    tokens = _TERM.findall(expression)
    total, sign, term, op = 0, 1, int(tokens[0]), None
    for token in tokens[1:]:
        if token in "+-":
            total, sign, op = total + sign * term, 1 if token == "+" else -1, None
        elif token in "*/":
            op = token
        elif op == "*":
            term *= int(token)
        elif op == "/":
            if int(token) == 0 or term % int(token):
                return None
            term //= int(token)
        else:
            term = int(token)
    return total + sign * term


def _working(response):
    start, end = response.find("<think>"), response.find("</think>")
    return response[start + 7 : end] if 0 <= start < end else response


def _steps(response):
    # (correct steps, all steps) over the working: each bracket entry and each top-level step.
    working = _working(response)
    inner = [s for group in re.findall(r"\[([^\[\]]*)\]", working) for s in group.split(",")]
    outer = _BRACKETS.sub("", working)
    found = [m for text in inner + outer.split(";") for m in _STEP.findall(text.replace(" ", ""))]
    return sum(_evaluate(expr) == int(value) for expr, value in found), len(found)
"""

# Group credit: process quality from the Engine's evidence, and the identity decision.
_GROUP = """
DIMENSIONS = ("conclusion_support", "derivation_soundness", "substantive_relevance")


def _outcome_row(outcome_score):
    return {
        "schema_version": "ade.reward_result.v2",
        "score": float(outcome_score),
        "outcome_score": outcome_score,
        "artifact_projection": None,
        "rule_evidence": {"status": "not_configured", "value": None},
    }


def compute_fallback_score(question_prompt, response_content, extracted_answer, outcome_score,
                           response_length_tokens, max_response_length_tokens):
    return _outcome_row(outcome_score)


def _quality(record):
    process = record["evidence"]["process"]
    if process["status"] != "available":
        return None
    return sum(process["dimensions"][d] for d in DIMENSIONS) / len(DIMENSIONS)


def _identity(records, mode, reason):
    return {
        "schema_version": "ade.group_credit_output.v2",
        "decision": {"mode": mode, "evidence_sources": ["outcome"], "process_dimensions": [], "reason_code": reason},
        "assignments": [{"record_id": r["record_id"], "training_reward": float(r["outcome_score"])} for r in records],
    }


def _shaped(assignments, sources, reason):
    return {
        "schema_version": "ade.group_credit_output.v2",
        "decision": {
            "mode": "shaped",
            "evidence_sources": sorted(sources),
            "process_dimensions": sorted(DIMENSIONS) if "process" in sources else [],
            "reason_code": reason,
        },
        "assignments": [{"record_id": k, "training_reward": min(1.0, max(0.0, v))} for k, v in assignments.items()],
    }
"""

_OUTCOME_ONLY = (
    '''"""Outcome-only control: the verified outcome is the reward; the judge's evidence is recorded, unused."""
'''
    + _ROW
    + """

async def compute_score(question_prompt, response_content, extracted_answer, outcome_score,
                        response_length_tokens, max_response_length_tokens):
    evidence = await llm_judge(question_prompt, response_content)
    return _result(outcome_score, outcome_score, _quality(evidence))
"""
)

_LENGTH_PENALTY = (
    '''"""Length-aware penalty: a correct response loses up to PENALTY as it runs past FREE_SHARE of the cap."""

PENALTY = $penalty
FREE_SHARE = $free_share
'''
    + _ROW
    + """

async def compute_score(question_prompt, response_content, extracted_answer, outcome_score,
                        response_length_tokens, max_response_length_tokens):
    evidence = await llm_judge(question_prompt, response_content)
    share = response_length_tokens / max(1, max_response_length_tokens)
    excess = max(0.0, share - FREE_SHARE) / (1.0 - FREE_SHARE)
    # Incorrect responses stay at 0, so any correct response still outscores every incorrect one.
    return _result(outcome_score * (1.0 - PENALTY * min(1.0, excess)), outcome_score, _quality(evidence))
"""
)

_FORMAT_BONUS = (
    '''"""Format bonus: BONUS of the reward pays a closed think span followed by exactly one box holding an
integer; the rest pays the outcome, so a correct response always outscores a well-formed wrong one."""

BONUS = $bonus
'''
    + _ROW
    + r"""
import re

_BOX = re.compile(r"\\boxed\{(-?\d+)\}")


def _well_formed(response):
    head, closed, tail = response.partition("</think>")
    return bool(closed) and head.count("<think>") == 1 and len(_BOX.findall(tail)) == 1 == tail.count("\\boxed")


async def compute_score(question_prompt, response_content, extracted_answer, outcome_score,
                        response_length_tokens, max_response_length_tokens):
    evidence = await llm_judge(question_prompt, response_content)
    form = 1.0 if _well_formed(response_content) else 0.0
    # correct and well formed 1, correct 1 - BONUS, wrong but well formed BONUS, else 0
    score = outcome_score * (1.0 - BONUS + BONUS * form) + (1.0 - outcome_score) * BONUS * form
    return _result(score, outcome_score, _quality(evidence), form)
"""
)

_STEP_CREDIT = (
    '''"""Rule-based partial credit: a wrong response earns WEIGHT times the share of its arithmetic steps
that check out (at least MIN_STEPS of them), so near misses rank above babble; correct ones earn 1."""

WEIGHT = $weight
MIN_STEPS = $min_steps
'''
    + _ROW
    + _STEPS
    + """

async def compute_score(question_prompt, response_content, extracted_answer, outcome_score,
                        response_length_tokens, max_response_length_tokens):
    evidence = await llm_judge(question_prompt, response_content)
    right, total = _steps(response_content)
    share = right / total if total >= MIN_STEPS else 0.0
    score = 1.0 if outcome_score == 1 else WEIGHT * share
    return _result(score, outcome_score, _quality(evidence), share)
"""
)

_PROCESS_ROW = (
    '''"""Process-shaped row reward: one llm_judge call per row; WEIGHT of the reward follows the judged
process quality (on wrong responses only when ONLY_WRONG), the rest the verified outcome."""

WEIGHT = $weight
ONLY_WRONG = $only_wrong
'''
    + _ROW
    + """

async def compute_score(question_prompt, response_content, extracted_answer, outcome_score,
                        response_length_tokens, max_response_length_tokens):
    evidence = await llm_judge(question_prompt, response_content)
    quality = _quality(evidence)
    if quality is None:  # the Engine scores this row with the fallback
        return compute_fallback_score(question_prompt, response_content, extracted_answer, outcome_score,
                                      response_length_tokens, max_response_length_tokens)
    if ONLY_WRONG:
        score = 1.0 if outcome_score == 1 else WEIGHT * quality
    else:
        score = (1.0 - WEIGHT) * outcome_score + WEIGHT * quality
    return _result(score, outcome_score, quality)
"""
)

_PROCESS_GROUP = (
    '''"""Process-shaped group credit: in all-wrong groups a response earns SCALE times its judged process
quality; in mixed groups quality moves credit by SPREAD within the correct and within the incorrect
responses, so every correct response stays above every incorrect one."""

SCALE = $scale
SPREAD = $spread
'''
    + _GROUP
    + """

async def compute_score(question_prompt, response_content, extracted_answer, outcome_score,
                        response_length_tokens, max_response_length_tokens):
    return _outcome_row(outcome_score)


def assign_group_credit(group_input):
    records = group_input["records"]
    quality = {r["record_id"]: _quality(r) for r in records}
    if group_input["group_type"] == "all_correct":
        return _identity(records, "identity", "all_correct_outcome")
    if all(q is None for q in quality.values()):
        return _identity(records, "abstained", "no_process_evidence")
    credit = {}
    if group_input["group_type"] == "all_wrong":
        for r in records:
            credit[r["record_id"]] = SCALE * (quality[r["record_id"]] or 0.0)
    else:
        for correct, base in ((True, 1.0 - SPREAD), (False, SPREAD)):
            known = [quality[r["record_id"]] for r in records if r["is_correct"] == correct]
            known = [q for q in known if q is not None]
            mean = sum(known) / len(known) if known else 0.0
            for r in records:
                if r["is_correct"] == correct:
                    q = quality[r["record_id"]]
                    credit[r["record_id"]] = base + SPREAD * (0.0 if q is None else q - mean)
    return _shaped(credit, ["outcome", "process"], "process_shaped_credit")
"""
)

_SIBLING = (
    '''"""Sibling-corroborated all-wrong credit: in an all-wrong group, credit a response only where the judge's
process quality and the rule-based step check agree (their minimum), only when at least MIN_ELIGIBLE of
the siblings have both, and only above the group's weakest response; mixed and all-correct groups train
on the outcome."""

SCALE = $scale
MIN_ELIGIBLE = $min_eligible
'''
    + _GROUP
    + _STEPS
    + """

async def compute_score(question_prompt, response_content, extracted_answer, outcome_score,
                        response_length_tokens, max_response_length_tokens):
    right, total = _steps(response_content)
    row = _outcome_row(outcome_score)
    row["rule_evidence"] = {"status": "available", "value": right / total if total else 0.0}
    return row


def assign_group_credit(group_input):
    records = group_input["records"]
    if group_input["group_type"] != "all_wrong":
        return _identity(records, "identity", "outcome_has_variance")
    corroborated = {}
    for r in records:
        q, rule = _quality(r), r["evidence"]["rule_based"]
        if q is not None and rule["status"] == "available":
            corroborated[r["record_id"]] = min(q, rule["value"])
    if len(corroborated) < MIN_ELIGIBLE * len(records):
        return _identity(records, "abstained", "too_few_eligible_siblings")
    floor = min(corroborated.values())
    credit = {r["record_id"]: SCALE * (corroborated.get(r["record_id"], floor) - floor) for r in records}
    return _shaped(credit, ["outcome", "process", "rule_based"], "sibling_corroborated")
"""
)

_HACKABLE = (
    '''"""Hackable format reward (negative control): pays a boxed answer, whatever it says, and brevity past
FREE_SHARE of the cap; the hacking probe names its exploits, and only [hacking] mode = "warn" admits it."""

FREE_SHARE = $free_share
'''
    + _ROW
    + """

async def compute_score(question_prompt, response_content, extracted_answer, outcome_score,
                        response_length_tokens, max_response_length_tokens):
    evidence = await llm_judge(question_prompt, response_content)
    boxed = 1.0 if "\\\\boxed{" in response_content else 0.0
    share = response_length_tokens / max(1, max_response_length_tokens)
    return _result(boxed * min(1.0, (1.0 - share) / (1.0 - FREE_SHARE)), outcome_score, _quality(evidence))
"""
)

CATALOG: tuple[StrategyFamily, ...] = (
    StrategyFamily(
        name="step_credit",
        task=TASK,
        description="Rule-based partial credit for correct steps: wrong responses earn a share of the reward "
        "for arithmetic steps that check out, giving all-wrong groups a gradient towards sound working.",
        targets=("all_wrong_groups", "arithmetic_slips"),
        template=_STEP_CREDIT,
        parameters={"weight": (0.3, 0.15, 0.5), "min_steps": (1, 2)},
    ),
    StrategyFamily(
        name="process_group",
        task=TASK,
        description="Process-shaped group credit: the judge's process quality shapes credit in all-wrong "
        "groups and within the correct and incorrect responses of mixed groups.",
        targets=("all_wrong_groups", "unsound_correct_answers"),
        template=_PROCESS_GROUP,
        parameters={"scale": (0.3, 0.15), "spread": (0.1, 0.05)},
    ),
    StrategyFamily(
        name="sibling_corroborated",
        task=TASK,
        description="Sibling-corroborated all-wrong credit: credit in all-wrong groups only where the judge "
        "and the rule-based step check agree, and only when enough siblings carry both.",
        targets=("all_wrong_groups", "judge_noise"),
        template=_SIBLING,
        parameters={"scale": (0.3, 0.5), "min_eligible": (0.5, 1.0)},
    ),
    StrategyFamily(
        name="process_row",
        task=TASK,
        description="Process-shaped row reward: one llm_judge call per row, blending judged process quality "
        "with the verified outcome.",
        targets=("unsound_working", "all_wrong_groups"),
        template=_PROCESS_ROW,
        parameters={"weight": (0.2, 0.1, 0.3), "only_wrong": (True, False)},
    ),
    StrategyFamily(
        name="format_bonus",
        task=TASK,
        description="Format bonus: a share of the reward for a closed think span and exactly one boxed integer, "
        "on top of the outcome.",
        targets=("missing_box", "unclosed_think"),
        template=_FORMAT_BONUS,
        parameters={"bonus": (0.2, 0.1)},
    ),
    StrategyFamily(
        name="length_penalty",
        task=TASK,
        description="Length-aware penalty: correct responses lose reward as they run past a free share of the "
        "response cap.",
        targets=("meandering", "truncated"),
        template=_LENGTH_PENALTY,
        parameters={"penalty": (0.3, 0.5), "free_share": (0.5, 0.75)},
    ),
    StrategyFamily(
        name="outcome_only",
        task=TASK,
        description="Outcome-only control: the verified outcome as the reward (the reference's signal, "
        "with the judge's evidence recorded).",
        targets=("control",),
        template=_OUTCOME_ONLY,
    ),
    StrategyFamily(
        name="hackable_format",
        task=TASK,
        description="Negative control: pays a boxed answer and brevity, not correctness; admitted only with "
        "[hacking] mode = 'warn'.",
        targets=("negative_control",),
        template=_HACKABLE,
        parameters={"free_share": (0.25, 0.4)},
    ),
)


def family(name: str) -> StrategyFamily:
    """The catalog family called ``name``; an unknown name suggests the closest one."""
    return find_family(CATALOG, name)


def render(member: StrategyFamily, **choices: Any) -> str:
    """Source of one member: ``choices`` override the first allowed value of each parameter."""
    return member.member(**choices)
