"""Admission probes of the paper's reward contract, run before any training (paper App. D.2).

Five synthetic prompt groups at the configured group size — an all-wrong ladder, alternating
outcomes, one correct, one incorrect, all correct — each on its own arithmetic question, each
rollout with its own process evidence and length. The reward module runs on every row (the
row reward and its fallback) with a stub ``llm_judge`` that answers each row's evidence and counts
the calls, then group credit runs on each group as given, with its records reversed, and with its
record ids relabelled; the whole pass runs twice in fresh workers. The probes read that one pass:

- ``reward_contract``: every output valid (schema, bounds, outcome unchanged, the fallback pays
  the outcome; with group credit, the row reward is the outcome with no projection);
- ``judge_usage``: with judge enrichment on and no group credit, each ``compute_score`` awaits
  ``llm_judge`` exactly once; otherwise never; the fallback never (static and counted);
- ``determinism``, ``record_order_invariance``, ``id_relabel_invariance`` of the credit;
- ``advantage_sign_guard``: in mixed groups, the GRPO advantages of the credit (the Engine's own
  code) keep correct responses positive and incorrect ones non-positive.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ade_core.engine.training.advantages import advantages
from ade_core.engine.training.rewards import Rollout, sign_guard_holds
from ade_core.harness.static_policy import defined_entry_points
from ade_core.judging.process import (
    PROCESS_DIMENSIONS,
    PROCESS_EVIDENCE_SCHEMA,
    PROCESS_SERVICE,
    PROCESS_SIGNATURE,
)
from ade_core.reward_contract import ROW_PARAMETERS, group_input, validate_group_credit, validate_reward_result
from ade_core.reward_replay import REPLAY_PROBE_DESCRIPTION, check_replay
from ade_core.specs import AdmissionProbe, ProbeResult
from ade_sandbox import Limits, Service, open_worker

SHAPES = ("all_wrong_ladder", "alternating", "one_correct", "one_incorrect", "all_correct")
LEVELS = (0.0, 0.5, 1.0)


def shape_outcomes(shape: str, size: int) -> list[float]:
    """The verified outcomes of a probe group of ``size`` rollouts."""
    if shape == "all_wrong_ladder":
        return [0.0] * size
    if shape == "alternating":
        return [float(i % 2 == 0) for i in range(size)]
    if shape == "one_correct":
        return [1.0] + [0.0] * (size - 1)
    if shape == "one_incorrect":
        return [0.0] + [1.0] * (size - 1)
    return [1.0] * size


def _wrong(answer: str, offset: int) -> str:
    try:
        return str(int(answer) + offset)
    except ValueError:
        return f"{answer} + {offset}"


def _evidence(index: int, size: int) -> dict[str, Any]:
    """A ladder of process quality across a group: the first record worst, the last best."""
    level = LEVELS[min(len(LEVELS) - 1, index * len(LEVELS) // max(size, 1))]
    dims = {name: level for name in PROCESS_DIMENSIONS}
    dims["substantive_relevance"] = 1.0 if index % 2 else level
    return {"status": "available", "schema_version": PROCESS_EVIDENCE_SCHEMA, "dimensions": dims}


@dataclass(frozen=True)
class ProbeGroup:
    """One synthetic group: its shape and its rows (the reward's six arguments and the evidence)."""

    shape: str
    rows: tuple[dict[str, Any], ...]
    evidence: tuple[dict[str, Any], ...]


PROBE_QUESTIONS = (
    ("What is 17 + 25?", "42"),
    ("What is 91 - 19?", "72"),
    ("Solve for x: 3x + 4 = 19.", "5"),
    ("What is the remainder when 47 is divided by 6?", "5"),
    ("A rectangle is 7 by 12. What is its area?", "84"),
)


def probe_groups(group_size: int, max_tokens: int) -> list[ProbeGroup]:
    """The five probe groups of ``group_size`` rollouts with responses up to ``max_tokens`` long."""
    groups = []
    for shape, (question, reference) in zip(SHAPES, PROBE_QUESTIONS, strict=True):
        rows, evidence = [], []
        for index, outcome in enumerate(shape_outcomes(shape, group_size)):
            answer = reference if outcome else _wrong(reference, index + 1)
            response = f"<think>Working on the question, attempt {index + 1}.</think>\n\\boxed{{{answer}}}"
            length = max(1, (index + 1) * max_tokens // (group_size + 1))
            values = (question, response, answer, outcome, length, max_tokens)
            rows.append(dict(zip(ROW_PARAMETERS, values, strict=True)))
            evidence.append(_evidence(index, group_size))
        groups.append(ProbeGroup(shape, tuple(rows), tuple(evidence)))
    return groups


def judge_call_sites(source: str) -> dict[str, int]:
    """``llm_judge(...)`` call sites per top-level function of ``source``."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return {}
    sites: dict[str, int] = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            sites[node.name] = sum(
                isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == PROCESS_SERVICE
                for n in ast.walk(node)
            )
    return sites


@dataclass
class ProbePass:
    """What one run of the reward over the probe groups returned."""

    rows: list[list[dict[str, Any]]] = field(default_factory=list)  # per group: score, fallback, judge calls
    credit: dict[str, list[Any]] = field(default_factory=dict)  # as given / reversed / relabelled, per group
    errors: list[str] = field(default_factory=list)


class StubJudge:
    """``llm_judge`` for the probes: answers the evidence each probe row was given, counts calls."""

    def __init__(self, groups: Sequence[ProbeGroup]) -> None:
        self.answers = {
            (row["question_prompt"], row["response_content"]): evidence
            for group in groups
            for row, evidence in zip(group.rows, group.evidence, strict=True)
        }

    def __call__(self, request: dict[str, Any]) -> dict[str, Any]:
        key = (request["question_prompt"], request["response_content"])
        found = self.answers.get(key)
        if found is None:
            return {
                "status": "unavailable",
                "schema_version": PROCESS_EVIDENCE_SCHEMA,
                "dimensions": None,
                "reason": "not a probe row",
            }
        return found


def _judge_calls(result: Any) -> int:
    return sum(call.name == PROCESS_SERVICE for call in result.service_calls)


def run_probe_passes(
    source: str,
    groups: Sequence[ProbeGroup],
    *,
    group_credit: bool,
    limits: Limits,
    min_isolation: str,
    passes: int = 1,
) -> list[ProbePass]:
    """``passes`` runs in one worker (state it keeps between calls shows as a difference)."""
    service = Service(PROCESS_SERVICE, StubJudge(groups), max_calls=100_000, signature=PROCESS_SIGNATURE)
    with open_worker(source, services=[service], limits=limits, min_isolation=min_isolation) as worker:
        return [_probe_pass(worker, groups, group_credit) for _ in range(passes)]


def _probe_pass(worker: Any, groups: Sequence[ProbeGroup], group_credit: bool) -> ProbePass:
    """Every probe row through the reward and its fallback, every group through its credit."""
    out = ProbePass()
    for group in groups:
        scored = []
        for row in group.rows:
            result = worker.call("compute_score", row)
            fallback = worker.call("compute_fallback_score", row)
            scored.append(
                {
                    "score": result.value if result.ok else None,
                    "score_error": None if result.ok else f"{result.status}: {result.error}",
                    "score_judge_calls": _judge_calls(result),
                    "fallback": fallback.value if fallback.ok else None,
                    "fallback_error": None if fallback.ok else f"{fallback.status}: {fallback.error}",
                    "fallback_judge_calls": _judge_calls(fallback),
                }
            )
        out.rows.append(scored)
        if not group_credit:
            continue
        pre = [
            s["score"]["score"] if isinstance(s["score"], dict) and "score" in s["score"] else r["outcome_score"]
            for s, r in zip(scored, group.rows, strict=True)
        ]
        built = group_input(
            [
                {
                    "outcome_score": r["outcome_score"],
                    "pre_group_reward": p,
                    "process": e,
                    "rule_evidence": None,
                    "response_length_tokens": r["response_length_tokens"],
                }
                for r, p, e in zip(group.rows, pre, group.evidence, strict=True)
            ],
            group.rows[0]["max_response_length_tokens"],
        )
        records = built["records"]
        relabel = {r["record_id"]: (r["record_id"] + 1) % len(records) for r in records}
        variants = {
            "given": built,
            "reversed": {**built, "records": list(reversed(records))},
            "relabelled": {**built, "records": [{**r, "record_id": relabel[r["record_id"]]} for r in records]},
        }
        for name, variant in variants.items():
            result = worker.call("assign_group_credit", {"group_input": variant})
            credit = None
            if not result.ok:
                out.errors.append(f"{group.shape}/{name}: assign_group_credit {result.status}: {result.error}")
            else:
                verdict = validate_group_credit(result.value, variant)
                if not verdict.ok:
                    out.errors.append(f"{group.shape}/{name}: " + "; ".join(verdict.errors))
                else:
                    by_id = {a["record_id"]: a["training_reward"] for a in verdict.canonical["assignments"]}
                    ids = [relabel[i] if name == "relabelled" else i for i in range(len(records))]
                    # per original record, whatever order or ids it was given in
                    credit = {"mode": verdict.canonical["decision"]["mode"], "rewards": [by_id[i] for i in ids]}
            out.credit.setdefault(name, []).append(credit)
    return out


@dataclass
class ProbeRun:
    """Both passes, with what the probes need to know about the strategy and the config."""

    groups: list[ProbeGroup]
    first: ProbePass
    again: ProbePass  # the same worker, a second time
    fresh: ProbePass  # a fresh worker
    group_credit: bool
    judge_on: bool
    sites: dict[str, int]


def _result(problems: list[str], what: str) -> ProbeResult:
    if not problems:
        return ProbeResult(status="passed")
    more = f" (+{len(problems) - 5} more)" if len(problems) > 5 else ""
    return ProbeResult(status="failed", reason=f"{what}: " + "; ".join(problems[:5]) + more)


def check_contract(run: ProbeRun) -> ProbeResult:
    problems = list(run.first.errors)
    for group, scored in zip(run.groups, run.first.rows, strict=True):
        for index, (row, got) in enumerate(zip(group.rows, scored, strict=True)):
            where = f"{group.shape}[{index}]"
            for key, fallback in (("score", False), ("fallback", True)):
                entry = "compute_fallback_score" if fallback else "compute_score"
                if got[key] is None:
                    problems.append(f"{where} {entry} {got[key + '_error']}")
                    continue
                verdict = validate_reward_result(got[key], row, fallback=fallback)
                if not verdict.ok:
                    problems.append(f"{where} {entry}: " + "; ".join(verdict.errors))
                elif (
                    key == "score"
                    and run.group_credit
                    and (got[key]["score"] != row["outcome_score"] or got[key]["artifact_projection"] is not None)
                ):
                    problems.append(
                        f"{where} compute_score must return score = outcome_score and a null projection when "
                        f"assign_group_credit is defined (got score {got[key]['score']!r})"
                    )
    return _result(problems, "the reward breaks its contract")


def check_judge_usage(run: ProbeRun) -> ProbeResult:
    problems = []
    wanted = 1 if run.judge_on and not run.group_credit else 0
    why = (
        "judge enrichment is on and there is no group credit"
        if wanted
        else (
            "group credit is defined (the Engine gathers process evidence itself)"
            if run.group_credit
            else "judge enrichment is off"
        )
    )
    if run.sites.get("compute_fallback_score", 0):
        problems.append("compute_fallback_score calls llm_judge; the fallback must not")
    if (
        wanted
        and not run.sites.get("compute_score", 0)
        and not any(
            run.sites.get(name, 0)
            for name in run.sites
            if name not in ("compute_fallback_score", "assign_group_credit")
        )
    ):
        problems.append("compute_score has no llm_judge call site")
    for group, scored in zip(run.groups, run.first.rows, strict=True):
        for index, got in enumerate(scored):
            if got["score"] is not None and got["score_judge_calls"] != wanted:
                problems.append(
                    f"{group.shape}[{index}]: compute_score awaited llm_judge {got['score_judge_calls']} times, "
                    f"expected {wanted} ({why})"
                )
            if got["fallback_judge_calls"]:
                problems.append(f"{group.shape}[{index}]: compute_fallback_score awaited llm_judge")
    return _result(problems, "llm_judge usage")


def check_determinism(run: ProbeRun) -> ProbeResult:
    def text(probe_pass: ProbePass) -> str:
        return json.dumps([probe_pass.rows, probe_pass.credit], sort_keys=True, default=str)

    first = text(run.first)
    for other, where in ((run.again, "in the same worker"), (run.fresh, "in a fresh worker")):
        if text(other) != first:
            return ProbeResult(
                status="failed", reason=f"two runs on the same probe groups returned different results ({where})"
            )
    return ProbeResult(status="passed")


def _invariance(run: ProbeRun, variant: str, what: str) -> ProbeResult:
    if not run.group_credit:
        return ProbeResult(status="skipped", reason="no assign_group_credit: nothing to permute")
    problems = []
    given_credit, other_credit = run.first.credit.get("given", []), run.first.credit.get(variant, [])
    for group, given, other in zip(run.groups, given_credit, other_credit, strict=True):
        if given is not None and other is not None and given["rewards"] != other["rewards"]:
            problems.append(f"{group.shape}: {given['rewards']} as given, {other['rewards']} {what}")
    return _result(problems, f"group credit changes when the records are {what}")


def check_sign_guard(run: ProbeRun) -> ProbeResult:
    if not run.group_credit:
        return ProbeResult(status="skipped", reason="no assign_group_credit: advantages come from the row rewards")
    problems = []
    for group, credit in zip(run.groups, run.first.credit.get("given", []), strict=True):
        if credit is None:
            continue
        size = len(credit["rewards"])
        values = advantages(credit["rewards"], size, "grpo")
        rollouts = [Rollout(0, "probe", 0, "", 1, r["outcome_score"], r["outcome_score"]) for r in group.rows]
        if not sign_guard_holds(rollouts, values):
            problems.append(
                f"{group.shape}: credit {credit['rewards']} gives advantages {[round(v, 3) for v in values]}"
            )
    return _result(problems, "a mixed group's credit breaks the advantage-sign guard")


PROBE_CHECKS = (
    (
        "reward_contract",
        "Every row reward, fallback and group credit on the five probe groups meets the contract.",
        check_contract,
    ),
    (
        "judge_usage",
        "llm_judge is awaited exactly once per compute_score under enrichment without group credit, "
        "else never; never in the fallback.",
        check_judge_usage,
    ),
    ("determinism", "Two runs on the same probe groups return the same results.", check_determinism),
    (
        "record_order_invariance",
        "Group credit per record is unchanged with the records reversed.",
        lambda run: _invariance(run, "reversed", "reversed"),
    ),
    (
        "id_relabel_invariance",
        "Group credit per record is unchanged with the record ids relabelled.",
        lambda run: _invariance(run, "relabelled", "relabelled"),
    ),
    (
        "advantage_sign_guard",
        "In mixed groups the credit's GRPO advantages keep correct responses positive and incorrect ones non-positive.",
        check_sign_guard,
    ),
)


RUN_KEY = "reward_probe_run"


def probe_run(context: dict[str, Any]) -> ProbeRun:
    """The probe passes for the admission ``context`` (run once, shared by every probe)."""
    if RUN_KEY not in context:
        config = context["config"]
        recipe = config.training.grpo if config is not None else None
        size = recipe.rollouts_per_prompt if recipe is not None else 8
        max_tokens = recipe.max_response_tokens if recipe is not None else 8192
        source, interface = context["source"], context["interface"]
        credit = "assign_group_credit" in defined_entry_points(source, interface)
        groups = probe_groups(size, max_tokens)
        options = {"group_credit": credit, "limits": context["limits"], "min_isolation": context["min_isolation"]}
        first, again = run_probe_passes(source, groups, passes=2, **options)
        (fresh,) = run_probe_passes(source, groups, **options)
        context[RUN_KEY] = ProbeRun(
            groups=groups,
            first=first,
            again=again,
            fresh=fresh,
            group_credit=credit,
            judge_on=bool(config is not None and config.judge.enabled),
            sites=judge_call_sites(source),
        )
    return context[RUN_KEY]


def reward_admission_probes(tasks: Sequence[str]) -> list[AdmissionProbe]:
    """The paper's reward probes as admission probes of ``tasks`` (a reward task registers them): the
    synthetic-group probes, then replay on the reference's recorded rollouts."""
    synthetic = [
        AdmissionProbe(
            name=name,
            description=description,
            tasks=tuple(tasks),
            check=lambda context, check=check: check(probe_run(context)),
        )
        for name, description, check in PROBE_CHECKS
    ]
    replay = AdmissionProbe(
        name="replay",
        description=REPLAY_PROBE_DESCRIPTION,
        tasks=tuple(tasks),
        check=lambda context: check_replay(context),
        needs_reference=True,
    )
    return [*synthetic, replay]


def hacking_rows(max_tokens: int) -> list[tuple[str, str, str, int]]:
    """(question, answer, a correct response, the response limit) for the reward-hacking bank."""
    return [
        (question, answer, f"<think>Working on the question.</think>\n\\boxed{{{answer}}}", max_tokens)
        for question, answer in PROBE_QUESTIONS
    ]
