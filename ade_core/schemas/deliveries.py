"""What each role delivers to the Harness (paper App. C.1): proposals only; the Harness admits and commits.

A delivery is accepted against the call it answers (role, subject, basis revision; see
``ade_core.store.deliveries``) and then checked against the state it proposes to change.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, StringConstraints, model_validator

from ade_core.schemas.artifact import BuilderAccount
from ade_core.schemas.common import Model
from ade_core.schemas.memory import Finding
from ade_core.schemas.plan import CitedFinding, MetricExpectation, RejectionCondition, Relation
from ade_core.schemas.trial import HypothesisStatus

Assessment = Literal["supported", "rejected", "inconclusive", "observed"]

# Bounds on what a model may write (chosen by ADE, far above any useful reply): a runaway reply is refused
# with feedback instead of flooding the store, the views built from it and every later prompt.
TEXT_CHARS = 8000  # a statement, rationale, hypothesis or note
NAME_CHARS = 300  # an id, a label, a reference
SOURCE_CHARS = 200_000  # a strategy's Python source
Text = Annotated[str, StringConstraints(max_length=TEXT_CHARS)]
Name = Annotated[str, StringConstraints(max_length=NAME_CHARS)]


class PlanProposal(Model):
    """Coordinator: a direction, its relation to earlier Plans, and the commitment ψ."""

    direction: str = Field(max_length=TEXT_CHARS, min_length=1, description="η: the research direction.")
    relation: Relation = Field(description="ρ: new, revisit, contradict or combine.")
    sources: tuple[Name, ...] = Field(default=(), description="Completed source Plans of the relation.")
    cited_findings: tuple[CitedFinding, ...] = Field(default=(), description="Run-Memory findings it builds on.")
    hypothesis: str = Field(max_length=TEXT_CHARS, min_length=1, description="ψ: the hypothesis.")
    mechanism: str = Field(max_length=TEXT_CHARS, min_length=1, description="ψ: why the intervention should work.")
    expected_observations: tuple[Text, ...] = Field(min_length=1, description="What should be observed if true.")
    rejection_conditions: tuple[RejectionCondition, ...] = Field(min_length=1, description="When to reject.")
    controls: tuple[Text, ...] = Field(default=(), description="What is held fixed.")
    expectations: tuple[MetricExpectation, ...] = Field(min_length=1, description="Per-metric expectation.")
    rationale: str = Field(max_length=TEXT_CHARS, min_length=1, description="Why this direction is worth testing now.")


class BuilderDelivery(Model):
    """Builder: executable strategy source, its scientific account, and whether to finalize or reflect."""

    source: str = Field(
        max_length=SOURCE_CHARS, min_length=1, description="Python source implementing the task's interface."
    )
    account: BuilderAccount = Field(description="Implementation, inheritance, limitations, declared claims.")
    action: Literal["finalize", "revise"] = Field(
        description="finalize: train this if admitted; revise: show me the admission feedback for another round."
    )
    dev_check: bool = Field(
        default=False,
        description="Ask for a development check of this draft: the Harness runs it on the task's development "
        "inputs in the sandbox and shows every admission check, the output statistics and the probe results in "
        "the next round (never training the target model). Needs action 'revise' and a reflection left: each "
        "check is one of the Trial's J reflections (budget.builder_reflections).",
    )

    @model_validator(mode="after")
    def _check_needs_a_revision(self) -> BuilderDelivery:
        if self.dev_check and self.action != "revise":
            raise ValueError("dev_check needs action 'revise': the diagnostics come back in the next round")
        return self


class ReviewRequest(Model):
    """One record-level review the Analyzer asks for, over one of the task's review pools."""

    pool: str = Field(max_length=NAME_CHARS, description="Review pool name (from the view's review_pools).")
    selection: Literal["all", "records", "groups"] = Field(description="Which records: all, listed ones, or groups.")
    ids: tuple[Name, ...] = Field(default=(), description="Record ids ('records') or group keys ('groups').")
    question: str = Field(
        max_length=TEXT_CHARS, min_length=1, description="What the Review Worker should judge for each record."
    )

    @model_validator(mode="after")
    def _ids_match_selection(self) -> ReviewRequest:
        if self.selection == "all" and self.ids:
            raise ValueError("selection 'all' takes no ids")
        if self.selection != "all" and not self.ids:
            raise ValueError(f"selection {self.selection!r} needs ids")
        return self


class ReviewDesign(Model):
    """Analyzer, stage 1: the record-level review it wants before interpreting (q)."""

    requests: tuple[ReviewRequest, ...] = Field(
        default=(),
        description="Review requests; empty only when no review pool holds the Trial's records (else refused).",
    )
    rationale: str = Field(max_length=TEXT_CHARS, min_length=1, description="What the review should establish.")


class Judgment(Model):
    """Review Worker: its judgment of one bound record."""

    request: int = Field(ge=0, description="Index of the review request.")
    record_id: str = Field(max_length=NAME_CHARS, description="The bound record judged.")
    verdict: str = Field(
        max_length=NAME_CHARS, min_length=1, description="Short label, e.g. 'correct', 'truncated', 'off_domain'."
    )
    note: str = Field(max_length=TEXT_CHARS, default="", description="Why.")


class ReviewJudgments(Model):
    """Review Worker: judgments over exactly the records the Harness bound to the request (r)."""

    judgments: tuple[Judgment, ...] = Field(description="One judgment per bound record.")


class EvidenceStatement(Model):
    """An observation with the records it rests on."""

    statement: str = Field(max_length=TEXT_CHARS, min_length=1, description="The observation.")
    references: tuple[Name, ...] = Field(min_length=1, description="'record:<trial>/<family>' or 'trial:<id>'.")


class Analysis(Model):
    """Analyzer, stage 2: the blinded interpretation of the evidence (a)."""

    observations: tuple[EvidenceStatement, ...] = Field(min_length=1, description="Observations with sources.")
    summary: str = Field(
        max_length=TEXT_CHARS, min_length=1, description="What the evidence shows, without reference to any plan."
    )


class AssessedClaim(Model):
    """Plan Summarizer: one claim γ, its assessment v and its sources R."""

    claim: str = Field(max_length=TEXT_CHARS, min_length=1, description="The claim.")
    assessment: Literal["supported", "rejected", "inconclusive"] = Field(description="How the evidence relates.")
    references: tuple[Name, ...] = Field(min_length=1, description="Source references.")


class ProposedFinding(Model):
    """A finding a Summarizer proposes for a memory version; the Harness assigns ids and checks sources."""

    finding_id: str | None = Field(
        max_length=NAME_CHARS, default=None, description="Keep an existing finding's id; None for a new one."
    )
    statement: str = Field(max_length=TEXT_CHARS, min_length=1, description="The finding.")
    source_trials: tuple[Name, ...] = Field(min_length=1, description="Trials whose evidence supports it.")
    scope: str = Field(max_length=TEXT_CHARS, default="", description="Conditions under which it holds.")
    assessment: Assessment = Field(default="observed", description="Hypothesis assessment or plain observation.")
    references: tuple[Name, ...] = Field(default=(), description="Source references.")
    status: Literal["active", "contradicted", "superseded"] = Field(default="active", description="Standing.")

    @classmethod
    def kept(cls, finding: Finding) -> ProposedFinding:
        """An admitted finding carried into the next version unchanged (its id kept)."""
        return cls.model_validate(finding.model_dump(include=set(cls.model_fields)))


class MemoryProposal(Model):
    """The content of a proposed memory version."""

    findings: tuple[ProposedFinding, ...] = Field(description="Findings of the new version, in order.")
    contradictions: tuple[Text, ...] = Field(default=(), description="Recorded contradictions.")
    open_questions: tuple[Text, ...] = Field(default=(), description="Unresolved questions.")


class PlanSummary(Model):
    """Plan Summarizer: adjudicated claims, the hypothesis conclusion, and the Plan-Memory successor."""

    claims: tuple[AssessedClaim, ...] = Field(description="Claims with assessments and sources.")
    hypothesis: HypothesisStatus = Field(description="supported, rejected or inconclusive.")
    memory: MemoryProposal = Field(description="Proposed Plan-Memory successor.")


class RunSummary(Model):
    """Run Summarizer: the Run-Memory successor integrating the queue head's Plan-Memory update."""

    memory: MemoryProposal = Field(description="Proposed Run-Memory successor.")


DELIVERY_MODELS: dict[str, type[Model]] = {
    "plan_proposal": PlanProposal,
    "builder_delivery": BuilderDelivery,
    "review_design": ReviewDesign,
    "review_judgments": ReviewJudgments,
    "analysis": Analysis,
    "plan_summary": PlanSummary,
    "run_summary": RunSummary,
}


def references_in(value: Any) -> list[str]:
    """Every string under a ``references`` key, at any depth (for source checks)."""
    found: list[str] = []
    if isinstance(value, dict):
        for key, inner in value.items():
            if key == "references" and isinstance(inner, list | tuple):
                found.extend(str(ref) for ref in inner)
            else:
                found.extend(references_in(inner))
    elif isinstance(value, list | tuple):
        for inner in value:
            found.extend(references_in(inner))
    return found
