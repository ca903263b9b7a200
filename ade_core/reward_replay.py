"""Probes that score responses the reward did not see in the synthetic groups: replay on the generic
reference's recorded rollouts, and the scorer that pays a response as GRPO would (the hacking bank's).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from ade_core.harness.static_policy import defined_entry_points
from ade_core.judging.process import PROCESS_EVIDENCE_SCHEMA, PROCESS_SERVICE, PROCESS_SIGNATURE, process_judge
from ade_core.reward_contract import (
    ROW_PARAMETERS,
    group_input,
    group_type,
    validate_group_credit,
    validate_reward_result,
)
from ade_core.schemas.config import JudgeConfig
from ade_core.specs import ProbeResult
from ade_sandbox import Service, open_worker


@contextmanager
def training_scorer(context: dict[str, Any]) -> Iterator[Callable[..., float | None]]:
    """The reward module as GRPO would pay a response, for probes that score their own responses.

    ``score(question_prompt, response_content, extracted_answer, outcome_score, response_length_tokens,
    max_response_length_tokens)``: the row reward, or its fallback where the row reward fails or its
    ``llm_judge`` answer is unavailable (the Engine's rule), with 𝓑's judge answering; with group
    credit, the training reward the response gets in a group beside a correct response (all correct
    when it is correct itself). None where nothing valid came back (the caller pays the outcome).
    """
    config = context["config"]
    settings = config.judge if config is not None else JudgeConfig()
    judge = process_judge(settings)
    service = Service(PROCESS_SERVICE, judge, max_calls=100_000, signature=PROCESS_SIGNATURE)
    source, interface = context["source"], context["interface"]
    credit = "assign_group_credit" in defined_entry_points(source, interface)
    with open_worker(
        source, services=[service], limits=context["limits"], min_isolation=context["min_isolation"]
    ) as worker:

        def row_score(arguments: dict[str, Any]) -> float | None:
            result = worker.call("compute_score", arguments)
            evidence = [c for c in result.service_calls if c.name == PROCESS_SERVICE]
            unavailable = any(not c.ok or (c.value or {}).get("status") != "available" for c in evidence)
            if result.ok and not unavailable and validate_reward_result(result.value, arguments).ok:
                return float(result.value["score"])
            fallback = worker.call("compute_fallback_score", arguments)
            if fallback.ok and validate_reward_result(fallback.value, arguments, fallback=True).ok:
                return float(fallback.value["score"])
            return None

        def score(*values: Any) -> float | None:
            arguments = dict(zip(ROW_PARAMETERS, values, strict=True))
            mine = row_score(arguments)
            if not credit:
                return mine
            question, outcome, cap = values[0], values[3], values[5]
            correct = context.setdefault("_correct_beside", {})  # a correct response per question, scored first
            if outcome == 1.0:
                correct[question] = arguments
            beside = correct.get(question, arguments)
            rows = [
                {
                    "outcome_score": a["outcome_score"],
                    "pre_group_reward": a["outcome_score"] if s is None else s,
                    "process": None,
                    "rule_evidence": None,
                    "response_length_tokens": a["response_length_tokens"],
                }
                for a, s in ((beside, row_score(beside)), (arguments, mine))
            ]
            built = group_input(rows, cap)
            result = worker.call("assign_group_credit", {"group_input": built})
            verdict = validate_group_credit(result.value, built) if result.ok else None
            if verdict is None or not verdict.ok:
                return None
            return float(verdict.canonical["assignments"][1]["training_reward"])

        yield score


def replay_groups(rollouts: Sequence[dict[str, Any]], prompt_groups: int, max_records: int) -> list[list[dict]]:
    """Whole prompt groups from the latest steps back, until ``prompt_groups`` groups or ``max_records``."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for record in rollouts:
        groups.setdefault(str(record["prompt_group_id"]), []).append(record)
    ordered = sorted(groups.values(), key=lambda g: (-int(g[0]["step"]), str(g[0]["prompt_group_id"])))
    chosen: list[list[dict[str, Any]]] = []
    for group in ordered:
        if len(chosen) >= prompt_groups or sum(map(len, chosen)) + len(group) > max_records:
            break
        chosen.append(group)
    return chosen


def _shapes(group: Sequence[dict[str, Any]]) -> list[str]:
    """The coverage classes of one replayed group."""
    outcomes = [r["outcome"] for r in group]
    shapes = [group_type(outcomes)]
    evidence = [r.get("process_evidence") or {} for r in group]
    available = [e["dimensions"] for e in evidence if e.get("status") == "available"]
    if len(available) < len(group):
        shapes.append("process_unavailable")
    if len(available) > 1 and all(d == available[0] for d in available):
        shapes.append("process_tie")
    if len({r["num_tokens"] for r in group}) == 1:
        shapes.append("length_tie")
    return shapes


class ReplayJudge:
    """``llm_judge`` on replay: the evidence the Engine recorded for each rollout (else unavailable)."""

    def __init__(self, groups: Sequence[Sequence[dict[str, Any]]]) -> None:
        self.answers = {
            (r["question"], r["response"]): r.get("process_evidence")
            for group in groups
            for r in group
            if (r.get("process_evidence") or {}).get("status") == "available"
        }

    def __call__(self, request: dict[str, Any]) -> dict[str, Any]:
        found = self.answers.get((request["question_prompt"], request["response_content"]))
        if found is None:
            return {
                "status": "unavailable",
                "schema_version": PROCESS_EVIDENCE_SCHEMA,
                "dimensions": None,
                "reason": "no process evidence was recorded for this rollout",
            }
        return found


def check_replay(context: dict[str, Any]) -> ProbeResult:
    """The reward on the reference's latest recorded groups: the verified outcome row for row, valid
    credit, and the coverage of group shapes."""
    rollouts = context.get("reference_rollouts")
    if not rollouts:
        return ProbeResult(
            status="skipped",
            reason="the generic reference's rollouts are not recorded yet (its Trial has not run under this config)",
        )
    config = context["config"]
    cap = config.training.grpo.max_response_tokens
    groups = replay_groups(rollouts, config.replay.prompt_groups, config.replay.max_records)
    source, interface = context["source"], context["interface"]
    credit = "assign_group_credit" in defined_entry_points(source, interface)
    service = Service(PROCESS_SERVICE, ReplayJudge(groups), max_calls=100_000, signature=PROCESS_SIGNATURE)
    problems: list[str] = []
    coverage: dict[str, int] = {}
    with open_worker(
        source, services=[service], limits=context["limits"], min_isolation=context["min_isolation"]
    ) as worker:
        for group in groups:
            for shape in _shapes(group):
                coverage[shape] = coverage.get(shape, 0) + 1
            scored: list[float] = []
            for record in group:
                values = (
                    record["question"],
                    record["response"],
                    record.get("extracted_answer", ""),
                    record["outcome"],
                    record["num_tokens"],
                    cap,
                )
                arguments = dict(zip(ROW_PARAMETERS, values, strict=True))
                where = f"rollout {record['prompt_group_id']}#{len(scored)}"
                result = worker.call("compute_score", arguments)
                evidence = [c for c in result.service_calls if c.name == PROCESS_SERVICE]
                unavailable = any(not c.ok or (c.value or {}).get("status") != "available" for c in evidence)
                entry, fallback = ("compute_fallback_score", True) if unavailable else ("compute_score", False)
                if unavailable:
                    result = worker.call(entry, arguments)
                if not result.ok:
                    problems.append(f"{where}: {entry} {result.status}: {result.error}")
                    scored.append(record["outcome"])
                    continue
                verdict = validate_reward_result(result.value, arguments, fallback=fallback)
                if not verdict.ok:
                    problems.append(f"{where}: {entry}: " + "; ".join(verdict.errors))
                    scored.append(record["outcome"])
                    continue
                scored.append(float(result.value["score"]))
            if not credit:
                continue
            built = group_input(
                [
                    {
                        "outcome_score": r["outcome"],
                        "pre_group_reward": s,
                        "process": r.get("process_evidence"),
                        "rule_evidence": None,
                        "response_length_tokens": r["num_tokens"],
                    }
                    for r, s in zip(group, scored, strict=True)
                ],
                cap,
            )
            result = worker.call("assign_group_credit", {"group_input": built})
            credit_verdict = validate_group_credit(result.value, built) if result.ok else None
            if credit_verdict is None or not credit_verdict.ok:
                why = f"{result.status}: {result.error}" if credit_verdict is None else "; ".join(credit_verdict.errors)
                problems.append(f"group {group[0]['prompt_group_id']}: assign_group_credit {why}")
    steps = sorted({int(g[0]["step"]) for g in groups})
    records = sum(map(len, groups))
    span = f"step {steps[0]}" if len(steps) == 1 else f"steps {steps[0]}-{steps[-1]}"
    shapes = ", ".join(f"{name} {count}" for name, count in sorted(coverage.items()))
    summary = f"replayed {len(groups)} groups ({records} rollouts, {span} of the reference); coverage: {shapes}"
    if problems:
        more = f" (+{len(problems) - 5} more)" if len(problems) > 5 else ""
        return ProbeResult(status="failed", reason="; ".join(problems[:5]) + more + f" [{summary}]")
    return ProbeResult(status="passed", reason=summary)


REPLAY_PROBE_DESCRIPTION = (
    "On the generic reference's latest recorded prompt groups ([replay]), with their recorded process evidence, "
    "the reward returns the verified outcome row for row and valid credit; group-shape coverage is recorded."
)
