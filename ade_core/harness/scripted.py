"""A deterministic, scripted research policy behind the role-backend interface.

It reads only its view and decides mechanically, so dry runs and tests are reproducible:

- Coordinator: try each family of the task's strategy catalog once (Coordinators start at
  different families); then revisit the best completed Plan with its next untried parameter
  setting, or combine the two best Plans when they share a family.
- Builder: render the catalog template the Plan names (a later Trial of the same Plan varies its
  last parameter); after a failed admission, fall back to the family's default parameters.
- Analyzer: review every pool it may (groups up to the required coverage); interpret by counting.
- Review Worker: label each bound record from its own fields.
- Plan Summarizer: check the rejection conditions and expectations against the frozen comparisons.
- Run Summarizer: append the update's new findings to Run Memory.

Directions follow the convention ``family(param=value, ...): description`` so the Builder can
read what the Coordinator meant.
"""

from __future__ import annotations

import ast
import hashlib
import itertools
import math
import operator
import re
from collections import Counter
from collections.abc import Mapping
from typing import Any

from ade_core.harness.roles import AgentReply
from ade_core.harness.views import render_template
from ade_core.schemas.artifact import BuilderAccount
from ade_core.schemas.common import canonical_json
from ade_core.schemas.deliveries import (
    Analysis,
    AssessedClaim,
    BuilderDelivery,
    EvidenceStatement,
    Judgment,
    MemoryProposal,
    PlanProposal,
    PlanSummary,
    ProposedFinding,
    ReviewDesign,
    ReviewJudgments,
    ReviewRequest,
    RunSummary,
)
from ade_core.schemas.plan import MetricExpectation, RejectionCondition
from ade_core.schemas.trial import Unavailable
from ade_core.schemas.views import (
    AnalyzerView,
    BuilderView,
    CoordinatorView,
    PlanSummarizerView,
    ReviewWorkerView,
    RunSummarizerView,
    View,
)

# Virtual seconds each role "thinks" in a dry run (jittered per call by ±25%).
DEFAULT_LATENCY: dict[str, float] = {
    "coordinator": 40.0,
    "builder": 60.0,
    "analyzer": 45.0,
    "review_worker": 30.0,
    "plan_summarizer": 20.0,
    "run_summarizer": 15.0,
}
_DIRECTION = re.compile(r"^\s*([A-Za-z_]\w*)\((.*?)\)\s*:")
_COMPARE = {"<": operator.lt, "<=": operator.le, "==": operator.eq, ">=": operator.ge, ">": operator.gt}


def parse_direction(direction: str) -> tuple[str, dict[str, Any]] | None:
    """``family(a=1, b='x'): ...`` -> (family, {a: 1, b: 'x'}); None for any other direction."""
    match = _DIRECTION.match(direction)
    if not match:
        return None
    try:
        call = ast.parse(f"f({match.group(2)})", mode="eval").body
        assert isinstance(call, ast.Call)
        return match.group(1), {kw.arg: ast.literal_eval(kw.value) for kw in call.keywords if kw.arg}
    except (SyntaxError, ValueError, AssertionError):
        return None


def format_direction(family: str, params: Mapping[str, Any], description: str) -> str:
    inner = ", ".join(f"{k}={v!r}" for k, v in params.items())
    return f"{family}({inner}): {description}"


def _fraction(text: str) -> float:
    return int(hashlib.sha256(text.encode()).hexdigest()[:8], 16) / 0xFFFFFFFF


class ScriptedBackend:
    """Deterministic answers for every role; ``latency`` are the seconds each call reports."""

    def __init__(self, latency: Mapping[str, float] | None = None):
        self.latency = {**DEFAULT_LATENCY, **(latency or {})}

    async def deliver(self, role: str, view: View) -> AgentReply:
        delivery = getattr(self, role)(view)
        seconds = self.latency[role] * (0.75 + 0.5 * _fraction(f"{role}:{view.subject}:{len(view.feedback)}"))
        tokens = len(canonical_json(view.model_dump(mode="json"))) // 4
        return AgentReply(delivery=delivery, seconds=round(seconds, 3), tokens=tokens)

    # -- Coordinator ---------------------------------------------------------------------------

    def coordinator(self, view: CoordinatorView) -> PlanProposal:
        tried: dict[str, set[str]] = {}
        parsed: dict[str, tuple[str, dict[str, Any]]] = {}
        for entry in view.catalog:
            found = parse_direction(entry.direction)
            if found:
                parsed[entry.plan_id] = found
                tried.setdefault(found[0], set()).add(canonical_json(found[1]))
        families = {f.name: f for f in view.families}
        names = list(families)
        start = (view.coordinator - 1) * max(1, len(names) // 3) % max(1, len(names))
        for name in names[start:] + names[:start]:
            if name not in tried:
                params = {k: v[0] for k, v in families[name].parameters.items()}
                return self._proposal(view, name, params, "new", ())
        completed = {e.plan_id for e in view.catalog if e.status == "completed"}
        ranked = [r.plan_id for r in view.ranking if r.plan_id in completed and r.plan_id in parsed]
        if len(ranked) >= 2:
            (fam_a, par_a), (fam_b, par_b) = parsed[ranked[0]], parsed[ranked[1]]
            if fam_a == fam_b and par_a != par_b:
                keys = sorted(par_a)
                mixed = {k: (par_a if i % 2 == 0 else par_b)[k] for i, k in enumerate(keys)}
                if canonical_json(mixed) not in tried[fam_a]:
                    return self._proposal(view, fam_a, mixed, "combine", (ranked[0], ranked[1]))
        for plan_id in ranked:
            name, _ = parsed[plan_id]
            family = families.get(name)
            if family is None:
                continue
            keys = list(family.parameters)
            for combo in itertools.product(*(family.parameters[k] for k in keys)):
                params = dict(zip(keys, combo, strict=True))
                if canonical_json(params) not in tried.get(name, set()):
                    return self._proposal(view, name, params, "revisit", (plan_id,))
        name = names[start] if names else "reference"
        params = {k: v[0] for k, v in families[name].parameters.items()} if names else {}
        return self._proposal(view, name, params, "new", ())

    def _proposal(
        self, view: CoordinatorView, family: str, params: dict[str, Any], relation: str, sources: tuple[str, ...]
    ) -> PlanProposal:
        brief = next((f for f in view.families if f.name == family), None)
        description = brief.description if brief else "the task's generic strategy"
        targets = ", ".join(brief.targets) if brief else "no specific defect"
        first, rest = view.metric_order[0], view.metric_order[1:]
        against = "comparison_target"
        expectations = [MetricExpectation(metric=first, kind="strict_improvement", against=against)]
        expectations += [MetricExpectation(metric=m, kind="no_regression", against=against, margin=2.0) for m in rest]
        if relation == "new":
            why = f"{family} has not been tried in this run"
        elif relation == "revisit":
            why = f"{sources[0]} ranks best among completed Plans; vary its parameters"
        else:
            why = f"{' and '.join(sources)} rank best and share the {family} family"
        return PlanProposal(
            direction=format_direction(family, params, description),
            relation=relation,  # type: ignore[arg-type]
            sources=sources,
            hypothesis=f"Training with {family} ({params}) raises {first} above the comparison target "
            f"because it addresses {targets}.",
            mechanism=description,
            expected_observations=(f"{first} exceeds the comparison target",),
            rejection_conditions=(
                RejectionCondition(
                    metric=first,
                    comparator="<=",
                    threshold=0.0,
                    against=against,
                    prose=f"{first} does not exceed the comparison target",
                ),
            ),
            controls=("frozen training recipe, data pool and evaluation",),
            expectations=tuple(expectations),
            rationale=f"{why}; {view.budget.plans_left_for_coordinator} Plan(s) left for this Coordinator.",
        )

    # -- Builder -------------------------------------------------------------------------------

    def builder(self, view: BuilderView) -> BuilderDelivery:
        families = {f.name: f for f in view.build_inputs.families}
        parsed = parse_direction(view.plan.direction)
        failed = [p for p in view.previous if not p.admitted]
        if parsed and parsed[0] in families:
            family = families[parsed[0]]
            params = dict(parsed[1])
            earlier = len(view.plan_memory.source_trials)  # later Trials of a Plan vary its last parameter
            if earlier and family.parameters:
                name, allowed = list(family.parameters.items())[-1]
                start = allowed.index(params[name]) if params.get(name) in allowed else 0
                params[name] = allowed[(start + earlier) % len(allowed)]
            if failed:  # a failed admission: fall back to the family's first allowed values
                params = {k: v[0] for k, v in family.parameters.items()}
        elif view.sources:
            source = view.sources[0]
            return BuilderDelivery(
                source=source.source,
                account=BuilderAccount(
                    implementation="Reuses the source Plan's admitted strategy unchanged.",
                    inheritance=f"{source.plan_id} ({source.trial_id})",
                ),
                action="finalize",
            )
        else:
            family = next(iter(families.values()))
            params = {k: v[0] for k, v in family.parameters.items()}
        inheritance = ", ".join(f"{s.plan_id} ({s.trial_id})" for s in view.sources)
        return BuilderDelivery(
            source=render_template(family.template, params),
            account=BuilderAccount(
                implementation=f"Renders catalog family {family.name} with {params}: {family.description}",
                inheritance=f"same family as {inheritance}; parameters {params}" if inheritance else "",
                limitations="A catalog template; no logic beyond the family's parameters.",
            ),
            action="finalize",
        )

    # -- Analyzer and Review Worker ------------------------------------------------------------

    def analyzer(self, view: AnalyzerView) -> ReviewDesign | Analysis:
        return self._design(view) if view.stage == "design" else self._interpret(view)

    def _design(self, view: AnalyzerView) -> ReviewDesign:
        rows = {f.name: f.records for f in view.records}
        requests = []
        for pool in view.review_pools:
            records = rows.get(pool.record, ())
            question = f"Label each {pool.record} record: correct, incorrect, truncated or no_defect_found."
            if "groups" in pool.selections and pool.group_key and records:
                groups = sorted({str(r.get(pool.group_key)) for r in records})
                take = max(1, math.ceil(pool.min_coverage * len(groups)))
                requests.append(
                    ReviewRequest(pool=pool.name, selection="groups", ids=tuple(groups[:take]), question=question)
                )
            elif "all" in pool.selections:
                requests.append(ReviewRequest(pool=pool.name, selection="all", question=question))
        return ReviewDesign(requests=tuple(requests), rationale="Check the measured records behind the scores.")

    def _interpret(self, view: AnalyzerView) -> Analysis:
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

    def review_worker(self, view: ReviewWorkerView) -> ReviewJudgments:
        judgments = []
        for bound in view.requests:
            for record in bound.records:
                if isinstance(record.get("correct"), bool):
                    verdict = "correct" if record["correct"] else "incorrect"
                elif record.get("truncated") is True:
                    verdict = "truncated"
                else:
                    verdict = "no_defect_found"
                judgments.append(Judgment(request=bound.request, record_id=str(record["id"]), verdict=verdict))
        return ReviewJudgments(judgments=tuple(judgments))

    # -- Summarizers ---------------------------------------------------------------------------

    def plan_summarizer(self, view: PlanSummarizerView) -> PlanSummary:
        ref = f"trial:{view.trial_id}"
        deltas = {c.name: c.deltas for c in view.comparisons}
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
                if value is not None and _COMPARE[condition.comparator](value, condition.threshold):
                    rejected = True
                    claims.append(AssessedClaim(claim=condition.prose, assessment="rejected", references=(ref,)))
            met = []
            for expectation in view.commitment.expectations:
                if expectation.kind == "diagnostic":
                    continue
                found = deltas.get(expectation.against)
                delta = found.get(expectation.metric) if isinstance(found, dict) else None
                ok = delta is not None and (
                    delta > expectation.margin
                    if expectation.kind == "strict_improvement"
                    else delta >= -expectation.margin
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
                    claim=f"The Trial ended {view.status} without in-loop scores "
                    f"({view.failure or view.scores.reason})",
                    assessment="inconclusive",
                    references=(ref,),
                )
            )
        scores = ", ".join(f"{k} {v:.2f}" for k, v in view.scores.items()) if isinstance(view.scores, dict) else "none"
        finding = ProposedFinding(
            statement=f"{view.direction.split(':')[0]} -> {view.status}; scores {scores}; hypothesis {verdict}.",
            source_trials=(view.trial_id,),
            scope=f"Plan {view.plan_id}",
            assessment=verdict,  # type: ignore[arg-type]
            references=(ref,),
        )
        kept = tuple(ProposedFinding.kept(f) for f in view.parent_memory.findings)
        questions = view.parent_memory.open_questions
        if verdict == "inconclusive":
            questions = (*questions, f"Why was {view.trial_id} inconclusive?")
        return PlanSummary(
            claims=tuple(claims),
            hypothesis=verdict,  # type: ignore[arg-type]
            memory=MemoryProposal(findings=(*kept, finding), open_questions=questions),
        )

    def run_summarizer(self, view: RunSummarizerView) -> RunSummary:
        known = {f.finding_id for f in view.run_memory.findings}
        findings = [
            ProposedFinding.kept(f)
            for f in (*view.run_memory.findings, *(f for f in view.update.findings if f.finding_id not in known))
        ]
        questions = tuple(dict.fromkeys((*view.run_memory.open_questions, *view.update.open_questions)))
        return RunSummary(memory=MemoryProposal(findings=tuple(findings), open_questions=questions))
