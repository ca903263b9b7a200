"""The offline policy's evidence roles: Analyzer, Review Worker, Plan and Run Summarizers.

- Analyzer, design: review every pool it may: ``all`` where the pool requires full coverage,
  else the first groups of the pool's complete group list up to the required coverage, so every
  design passes the coverage rules however few records the view shows.
- Analyzer, interpretation: statistics computed from the package (scores, selected checkpoint,
  record counts, the share of each boolean field) and the frozen review's label counts.
- Review Worker: rule-based checks on each bound record — truncation, repetition fraction,
  language/format (share of non-ASCII letters), correctness when the record carries it, and an
  answer present and boxed.
- Plan Summarizer: the hypothesis is ``rejected`` when a pre-committed rejection condition holds
  on the measured comparison, ``supported`` when every expectation is met, else ``inconclusive``.
- Run Summarizer: append the update's new findings.
"""

from __future__ import annotations

import math
import operator
import re
from collections import Counter
from typing import Any

from ade_core.schemas.deliveries import (
    Analysis,
    AssessedClaim,
    EvidenceStatement,
    Judgment,
    MemoryProposal,
    PlanSummary,
    ProposedFinding,
    ReviewDesign,
    ReviewJudgments,
    ReviewRequest,
    RunSummary,
)
from ade_core.schemas.trial import Unavailable
from ade_core.schemas.views import AnalyzerView, PlanSummarizerView, ReviewWorkerView, RunSummarizerView

COMPARE = {"<": operator.lt, "<=": operator.le, "==": operator.eq, ">=": operator.ge, ">": operator.gt}
TEXT_FIELDS = ("response", "completion", "output", "text", "solution", "content")
REPETITION_LIMIT = 0.3  # share of repeated word 4-grams above which a text is "repetitive"
NON_ASCII_LIMIT = 0.3  # share of non-ASCII letters above which a text is "wrong_language"
_BOXED = re.compile(r"\\boxed\{[^{}]+\}")
REVIEW_LABELS = "truncated, repetitive, wrong_language, correct, incorrect, no_boxed_answer or no_defect_found"


# -- Analyzer ----------------------------------------------------------------------------------


def design_review(view: AnalyzerView) -> ReviewDesign:
    rows = {f.name: f.records for f in view.records}
    requests = []
    for pool in view.review_pools:
        records = rows.get(pool.record, ())
        question = f"Label each {pool.record} record: {REVIEW_LABELS}."
        key = pool.group_key  # groups are requested only when the pool names one
        groups = pool.groups or (tuple(dict.fromkeys(str(r.get(key)) for r in records)) if key else ())
        if "all" in pool.selections and pool.min_coverage >= 1.0:
            requests.append(ReviewRequest(pool=pool.name, selection="all", question=question))
        elif "groups" in pool.selections and pool.group_key and groups:
            take = max(1, math.ceil(pool.min_coverage * len(groups)))
            requests.append(
                ReviewRequest(pool=pool.name, selection="groups", ids=tuple(groups[:take]), question=question)
            )
        elif "all" in pool.selections:
            requests.append(ReviewRequest(pool=pool.name, selection="all", question=question))
    return ReviewDesign(requests=tuple(requests), rationale="Check the measured records behind the scores.")


def record_statistics(name: str, rows: tuple[dict[str, Any], ...], count: int) -> str:
    """``name: N records; field true in x%`` for each boolean field of the shown records."""
    shares = []
    fields = sorted({k for r in rows for k, v in r.items() if isinstance(v, bool)})
    for field in fields:
        values = [r[field] for r in rows if isinstance(r.get(field), bool)]
        shares.append(f"{field} {sum(values) / len(values):.0%} of {len(values)}")
    return f"{name}: {count} records" + (f" ({', '.join(shares)})" if shares else "")


def interpret(view: AnalyzerView) -> Analysis:
    trial = f"trial:{view.trial_id}"
    observations = []
    present = {f.name for f in view.records}
    if isinstance(view.package, Unavailable):
        observations.append(EvidenceStatement(statement=f"No package: {view.package.reason}.", references=(trial,)))
    else:
        cited = f"record:{view.trial_id}/checkpoint_scores" if "checkpoint_scores" in present else trial
        scores = view.package.in_loop_scores or {}
        shown = ", ".join(f"{k} {v:.2f}" for k, v in scores.items()) or "no offline scores"
        observations.append(
            EvidenceStatement(
                statement=f"Offline in-loop {shown}; checkpoint step {view.package.selected_step} selected "
                f"of {len(view.package.checkpoints)}.",
                references=(cited,),
            )
        )
    if view.records:
        observations.append(
            EvidenceStatement(
                statement="Record statistics: "
                + "; ".join(record_statistics(f.name, f.records, f.count) for f in view.records)
                + ".",
                references=tuple(f"record:{view.trial_id}/{f.name}" for f in view.records),
            )
        )
    if not isinstance(view.realization, Unavailable):
        observations.append(
            EvidenceStatement(
                statement=f"Realization {view.realization.verdict}: {view.realization.intervention}.",
                references=(trial,),
            )
        )
    if view.review and not isinstance(view.review.judgments, Unavailable):
        counts = Counter(j["verdict"] for j in view.review.judgments)
        labels = ", ".join(f"{n} {label}" for label, n in sorted(counts.items()))
        record_of = {p.name: p.record for p in view.review_pools}
        reviewed = sorted({record_of.get(r.pool, r.pool) for r in view.review.design.requests})
        observations.append(
            EvidenceStatement(
                statement=f"Record review: {labels}.",
                references=tuple(f"record:{view.trial_id}/{name}" for name in reviewed) or (trial,),
            )
        )
    summary = " ".join(o.statement for o in observations)
    return Analysis(observations=tuple(observations), summary=summary)


# -- Review Worker -----------------------------------------------------------------------------


def repetition_fraction(text: str, n: int = 4) -> float:
    """Share of word n-grams that repeat an earlier one (0 for texts shorter than 2n words)."""
    words = text.split()
    grams = [tuple(words[i : i + n]) for i in range(len(words) - n + 1)]
    if len(grams) < n:
        return 0.0
    return 1 - len(set(grams)) / len(grams)


def check_record(record: dict[str, Any]) -> tuple[str, str]:
    """The record's label and the rule results behind it (the first failing rule names the label)."""
    text = next((record[f] for f in TEXT_FIELDS if isinstance(record.get(f), str)), None)
    if text is None and isinstance(record.get("messages"), list):  # a selected example: judge its target
        targets = [m.get("content") for m in record["messages"] if isinstance(m, dict) and m.get("role") == "assistant"]
        text = next((t for t in reversed(targets) if isinstance(t, str)), None)
    notes: list[str] = []
    labels: list[str] = []
    if record.get("truncated") is True:
        labels.append("truncated")
    if text is not None:
        repeated = repetition_fraction(text)
        letters = [c for c in text if c.isalpha()]
        foreign = sum(1 for c in letters if not c.isascii()) / len(letters) if letters else 0.0
        boxed = bool(_BOXED.search(text))
        notes.append(f"repetition {repeated:.2f}, non-ASCII letters {foreign:.2f}, boxed answer {boxed}")
        if repeated > REPETITION_LIMIT:
            labels.append("repetitive")
        if foreign > NON_ASCII_LIMIT:
            labels.append("wrong_language")
        if isinstance(record.get("correct"), bool):
            labels.append("correct" if record["correct"] else "incorrect")
        if not boxed:
            labels.append("no_boxed_answer")
    elif isinstance(record.get("correct"), bool):
        labels.append("correct" if record["correct"] else "incorrect")
    return (labels[0] if labels else "no_defect_found"), "; ".join(notes)


def review(view: ReviewWorkerView) -> ReviewJudgments:
    judgments = []
    for bound in view.requests:
        for record in bound.records:
            verdict, note = check_record(record)
            judgments.append(Judgment(request=bound.request, record_id=str(record["id"]), verdict=verdict, note=note))
    return ReviewJudgments(judgments=tuple(judgments))


# -- Summarizers -------------------------------------------------------------------------------


def summarize_plan(view: PlanSummarizerView) -> PlanSummary:
    ref = f"trial:{view.trial_id}"
    deltas: dict[str, dict[str, float] | Unavailable] = {c.name: c.deltas for c in view.comparisons}
    claims: list[AssessedClaim] = []
    verdict = "inconclusive"
    if isinstance(view.scores, dict):
        rejected = False
        for condition in view.commitment.rejection_conditions:
            if condition.against == "absolute":
                value = view.scores.get(condition.metric)
            else:
                found = deltas.get(condition.against)
                value = found.get(condition.metric) if isinstance(found, dict) else None
            if value is not None and COMPARE[condition.comparator](value, condition.threshold):
                rejected = True
                claims.append(AssessedClaim(claim=condition.prose, assessment="rejected", references=(ref,)))
        met = []
        for expectation in view.commitment.expectations:
            if expectation.kind == "diagnostic":
                continue
            found = deltas.get(expectation.against)
            delta = found.get(expectation.metric) if isinstance(found, dict) else None
            ok = delta is not None and (
                delta > expectation.margin if expectation.kind == "strict_improvement" else delta >= -expectation.margin
            )
            met.append(ok)
            shown = "n/a" if delta is None else f"{delta:+.2f}"
            claims.append(
                AssessedClaim(
                    claim=f"{expectation.metric}: {expectation.kind} against the {expectation.against} ({shown})",
                    assessment="supported" if ok else "inconclusive",
                    references=(ref,),
                )
            )
        verdict = "rejected" if rejected else ("supported" if met and all(met) else "inconclusive")
    else:
        claims.append(
            AssessedClaim(
                claim=f"The Trial ended {view.status} without in-loop scores ({view.failure or view.scores.reason})",
                assessment="inconclusive",
                references=(ref,),
            )
        )
    scores = ", ".join(f"{k} {v:.2f}" for k, v in view.scores.items()) if isinstance(view.scores, dict) else "none"
    finding = ProposedFinding(
        statement=f"{view.direction.split(':')[0]} -> {view.status}; scores {scores}; hypothesis {verdict}.",
        source_trials=(view.trial_id,),
        scope=f"Plan {view.plan_id}",
        assessment=verdict,
        references=(ref,),
    )
    kept = tuple(ProposedFinding.kept(f) for f in view.parent_memory.findings)
    questions = view.parent_memory.open_questions
    if verdict == "inconclusive":
        questions = (*questions, f"Why was {view.trial_id} inconclusive?")
    return PlanSummary(
        claims=tuple(claims),
        hypothesis=verdict,
        memory=MemoryProposal(findings=(*kept, finding), open_questions=questions),
    )


def summarize_run(view: RunSummarizerView) -> RunSummary:
    known = {f.finding_id for f in view.run_memory.findings}
    findings = [
        ProposedFinding.kept(f)
        for f in (*view.run_memory.findings, *(f for f in view.update.findings if f.finding_id not in known))
    ]
    questions = tuple(dict.fromkeys((*view.run_memory.open_questions, *view.update.open_questions)))
    return RunSummary(memory=MemoryProposal(findings=tuple(findings), open_questions=questions))
