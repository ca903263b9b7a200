"""The ``offline`` backend: ADE's deterministic research policy (no model, no network).

It is a real, simple search policy over the task's strategy catalog (``ade_strategy_catalog``),
deciding only from its view, so a dry run is reproducible:

- Coordinator: explore — propose each catalog family not yet tried (Coordinators start at
  different families); then exploit — combine the two best-measured Plans when they share a family,
  else revisit the best one with its next untried parameter setting; it cites the Run-Memory
  findings whose source Trials belong to the Plans it builds on. Under ``raw_evidence`` it ranks
  the accepted packages itself; under ``independent`` (only ``new`` Plans, nothing shared) the
  n-th Plan slot takes the n-th candidate of the catalog enumeration — the independent-search
  baseline.
- Builder: render the catalog template the Plan names (later Trials of a Plan vary its last
  parameter), and ask for one development check of the first draft (``dev_check``, spending one
  of the J reflections); after a refused admission or a check that found problems (failed checks,
  invalid outputs, deviated claims), reset the parameters the problems name (all of them when
  none is named) to the family's first allowed values; otherwise finalize the checked draft.
- Analyzer, Review Worker, Summarizers: ``ade_core.agents.offline_evidence``.

Directions follow ``family(param=value, ...): description`` so the Builder reads what the
Coordinator meant.
"""

from __future__ import annotations

import ast
import hashlib
import itertools
import re
from collections.abc import Mapping
from typing import Any

from ade_core.agents import offline_evidence as evidence
from ade_core.harness.roles import AgentReply
from ade_core.harness.views import render_template
from ade_core.schemas.artifact import BuilderAccount
from ade_core.schemas.common import canonical_json
from ade_core.schemas.deliveries import (
    Analysis,
    BuilderDelivery,
    PlanProposal,
    PlanSummary,
    ReviewDesign,
    ReviewJudgments,
    RunSummary,
)
from ade_core.schemas.plan import CitedFinding, MetricExpectation, RejectionCondition
from ade_core.schemas.views import (
    AnalyzerView,
    BuilderView,
    CoordinatorView,
    DevCheck,
    PlanSummarizerView,
    ReviewWorkerView,
    RunSummarizerView,
    StrategyFamilyBrief,
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
_SLOT = re.compile(r"/P(\d+)$")


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


def _defaults(family: StrategyFamilyBrief) -> dict[str, Any]:
    return {k: v[0] for k, v in family.parameters.items()}


def catalog_enumeration(families: list[StrategyFamilyBrief], start: int) -> list[tuple[str, dict[str, Any]]]:
    """Every (family, parameters) candidate: each family's defaults first (from ``start``), then the rest."""
    rotated = families[start:] + families[:start]
    first = [(f.name, _defaults(f)) for f in rotated]
    rest = []
    for family in rotated:
        keys = list(family.parameters)
        for combo in itertools.product(*(family.parameters[k] for k in keys)):
            params = dict(zip(keys, combo, strict=True))
            if params != _defaults(family):
                rest.append((family.name, params))
    return first + rest


def _check_problems(check: DevCheck | None) -> list[str]:
    """What a development check found wrong: failed checks, calls without a valid output, deviated claims."""
    if check is None:
        return []
    problems = [f"{c.name}: {c.reason}" for c in check.checks if c.status == "failed"]
    problems += [f"{c.entry_point}: {c.status}: {c.error}" for c in check.calls if c.status != "ok"]
    if check.claims == "deviated":
        problems += list(check.claim_reasons)
    return problems


class OfflinePolicy:
    """Deterministic answers for every role; ``latency`` are the seconds each call reports."""

    def __init__(self, latency: Mapping[str, float] | None = None):
        self.latency = {**DEFAULT_LATENCY, **(latency or {})}

    async def deliver(self, role: str, view: View) -> AgentReply:
        delivery = getattr(self, role)(view)
        seconds = self.latency[role] * (0.75 + 0.5 * _fraction(f"{role}:{view.subject}:{len(view.feedback)}"))
        prompt = len(canonical_json(view.model_dump(mode="json"))) // 4  # what a model would have read
        completion = len(canonical_json(delivery.model_dump(mode="json"))) // 4  # and written
        return AgentReply(
            delivery=delivery,
            seconds=round(seconds, 3),
            tokens=prompt + completion,
            prompt_tokens=prompt,
            completion_tokens=completion,
        )

    # -- Coordinator ---------------------------------------------------------------------------

    def coordinator(self, view: CoordinatorView) -> PlanProposal:
        families = list(view.families)
        by_name = {f.name: f for f in families}
        start = (view.coordinator - 1) * max(1, len(families) // 3) % max(1, len(families))
        if not families:
            return self._proposal(view, "reference", {}, "new", ())
        if view.relations == ("new",) and not view.catalog:  # independent search: slot n -> candidate n
            slot = int(m.group(1)) if (m := _SLOT.search(view.subject)) else 1
            order = catalog_enumeration(families, start)
            family, params = order[(slot - 1) % len(order)]
            return self._proposal(view, family, params, "new", ())
        tried: dict[str, set[str]] = {}
        parsed: dict[str, tuple[str, dict[str, Any]]] = {}
        for entry in view.catalog:
            found = parse_direction(entry.direction)
            if found:
                parsed[entry.plan_id] = found
                tried.setdefault(found[0], set()).add(canonical_json(found[1]))
        for brief in families[start:] + families[:start]:  # explore
            if brief.name not in tried:
                return self._proposal(view, brief.name, _defaults(brief), "new", ())
        ranked = [p for p in self._best_measured(view) if p in parsed]
        if len(ranked) >= 2 and "combine" in view.relations:  # exploit: combine the two best
            (fam_a, par_a), (fam_b, par_b) = parsed[ranked[0]], parsed[ranked[1]]
            if fam_a == fam_b and par_a != par_b:
                keys = sorted(par_a)
                mixed = {k: (par_a if i % 2 == 0 else par_b)[k] for i, k in enumerate(keys)}
                if canonical_json(mixed) not in tried[fam_a]:
                    return self._proposal(view, fam_a, mixed, "combine", (ranked[0], ranked[1]))
        for plan_id in ranked if "revisit" in view.relations else ():  # exploit: revisit the best
            name, _ = parsed[plan_id]
            if name in by_name:
                for candidate, params in catalog_enumeration([by_name[name]], 0):
                    if canonical_json(params) not in tried.get(candidate, set()):
                        return self._proposal(view, name, params, "revisit", (plan_id,))
        for name, params in catalog_enumeration(families, start):  # everything measured: any untried setting
            if canonical_json(params) not in tried.get(name, set()):
                return self._proposal(view, name, params, "new", ())
        return self._proposal(view, families[start].name, _defaults(families[start]), "new", ())

    def _best_measured(self, view: CoordinatorView) -> list[str]:
        """Completed Plans, best first: from the raw packages when the view has them, else the ranking."""
        completed = {e.plan_id for e in view.catalog if e.status == "completed"}
        if view.packages:  # raw_evidence: the Coordinator does its own analysis of the packages
            best: dict[str, tuple[float, ...]] = {}
            for package in view.packages:
                if package.in_loop_scores is None:
                    continue
                key = tuple(package.in_loop_scores.get(m, float("-inf")) for m in view.metric_order)
                best[package.plan_id] = max(best.get(package.plan_id, key), key)
            return [p for p in sorted(best, key=lambda p: best[p], reverse=True) if p in completed]
        return [r.plan_id for r in view.ranking if r.plan_id in completed]

    def _cited(self, view: CoordinatorView, sources: tuple[str, ...]) -> tuple[CitedFinding, ...]:
        """Run-Memory findings drawn from the source Plans' Trials."""
        trials = {t for e in view.catalog if e.plan_id in sources for t in e.trials}
        return tuple(
            CitedFinding(finding_id=f.finding_id, why=f"measured on {', '.join(sorted(set(f.source_trials)))}")
            for f in view.run_memory.findings
            if f.status == "active" and trials & set(f.source_trials)
        )

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
        cited = self._cited(view, sources)
        if relation == "new":
            why = f"{family} has not been tried in this run"
        elif relation == "revisit":
            why = f"{sources[0]} ranks best among completed Plans; vary its parameters"
        else:
            why = f"{' and '.join(sources)} rank best and share the {family} family"
        if cited:
            why += f" (findings {', '.join(c.finding_id for c in cited)})"
        if view.packages:
            why += f"; ranked from {len(view.packages)} accepted package(s)"
        if view.notes:
            why += f"; my last note: {view.notes[-1].text[:120]}"
        return PlanProposal(
            direction=format_direction(family, params, description),
            relation=relation,
            sources=sources,
            cited_findings=cited,
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
        # a round whose realization duplicated the reference came back with a note: repair it too
        failed = [p for p in view.previous if not p.admitted or p.notes or _check_problems(p.dev_check)]
        if parsed and parsed[0] in families:
            family = families[parsed[0]]
            params = dict(parsed[1])
            earlier = len(view.plan_memory.source_trials)  # later Trials of a Plan vary its last parameter
            if earlier and family.parameters:
                name, allowed = list(family.parameters.items())[-1]
                start = allowed.index(params[name]) if params.get(name) in allowed else 0
                params[name] = allowed[(start + earlier) % len(allowed)]
            if failed:  # repair from admission feedback and diagnostics: reset what the problems name
                text = " ".join((*failed[-1].failed_checks, *failed[-1].notes, *_check_problems(failed[-1].dev_check)))
                named = [k for k in family.parameters if k in text] or list(family.parameters)
                params = {k: (family.parameters[k][0] if k in named else params.get(k)) for k in family.parameters}
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
        checked = any(p.dev_check is not None for p in view.previous)
        check = not view.previous and view.reflections_left > 0  # first draft: one development check
        return BuilderDelivery(
            source=render_template(family.template, params),
            account=BuilderAccount(
                implementation=f"Renders catalog family {family.name} with {params}: {family.description}",
                inheritance=f"same family as {inheritance}; parameters {params}" if inheritance else "",
                limitations="A catalog template; no logic beyond the family's parameters."
                + (" Checked on the development inputs before finalizing." if checked else ""),
            ),
            action="revise" if check else "finalize",
            dev_check=check,
        )

    # -- evidence roles (offline_evidence) -----------------------------------------------------

    def analyzer(self, view: AnalyzerView) -> ReviewDesign | Analysis:
        return evidence.design_review(view) if view.stage == "design" else evidence.interpret(view)

    def review_worker(self, view: ReviewWorkerView) -> ReviewJudgments:
        return evidence.review(view)

    def plan_summarizer(self, view: PlanSummarizerView) -> PlanSummary:
        return evidence.summarize_plan(view)

    def run_summarizer(self, view: RunSummarizerView) -> RunSummary:
        return evidence.summarize_run(view)
