"""Plans: the Coordinator's direction, relation and commitment (paper Sec 3.1, Appendix C.2)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from ade_core.schemas.artifact import Comparator
from ade_core.schemas.common import Model

Relation = Literal["new", "revisit", "contradict", "combine"]
ExpectationKind = Literal["strict_improvement", "no_regression", "diagnostic"]
Against = Literal["comparison_target", "portfolio_target", "generic_baseline", "absolute"]


class MetricExpectation(Model):
    """What the Plan expects of one in-loop metric, against a named target."""

    metric: str = Field(description="Metric name from the task's metric_order.")
    kind: ExpectationKind = Field(description="strict_improvement, no_regression or diagnostic.")
    against: Against = Field(default="comparison_target", description="Which frozen score it is compared with.")
    margin: float = Field(default=0.0, ge=0, description="Percentage points required (or tolerated for no_regression).")
    prose: str = Field(default="", description="The expectation in words.")


class RejectionCondition(Model):
    """A mechanically checkable condition under which the hypothesis is rejected."""

    metric: str = Field(description="Metric or realized statistic the condition reads.")
    comparator: Comparator = Field(description="Applied as `value(metric) comparator threshold`.")
    threshold: float = Field(description="Threshold (percentage points for metrics).")
    against: Against = Field(
        default="absolute", description="'absolute' compares the value itself; otherwise the difference to the target."
    )
    prose: str = Field(min_length=1, description="The condition in words.")


class CitedFinding(Model):
    """A finding from Run Memory that motivates the Plan."""

    finding_id: str = Field(description="Identifier of the finding in Run Memory.")
    why: str = Field(min_length=1, description="How it motivates this Plan.")


class Commitment(Model):
    """ψ: what a Plan commits to before any execution; frozen into each of its Trials."""

    hypothesis: str = Field(description="The hypothesis.")
    mechanism: str = Field(description="Why the intervention should work.")
    expected_observations: tuple[str, ...] = Field(description="What should be observed if true.")
    rejection_conditions: tuple[RejectionCondition, ...] = Field(description="When to reject.")
    controls: tuple[str, ...] = Field(description="What is held fixed.")
    expectations: tuple[MetricExpectation, ...] = Field(description="Per-metric expectation.")


class FrozenTarget(Model):
    """A comparison frozen by the Harness at Plan admission (paper App. C.2)."""

    kind: Literal["base_model", "generic_baseline", "source_plan", "run_best"] = Field(
        description="What the target is: the base model, the generic baseline P000, a source Plan, the Run's best."
    )
    plan_id: str | None = Field(description="Plan of the target Trial; None for the base model.")
    trial_id: str | None = Field(description="The target Trial (the Plan's best eligible one); None if none.")
    scores: dict[str, float] | None = Field(description="Its in-loop scores; None when no eligible Trial exists.")


class Plan(Model):
    """A research Plan; frozen at admission."""

    plan_id: str = Field(description="Identifier, e.g. 'C1/P3'; 'P000' is the bootstrap reference.")
    coordinator: int = Field(ge=0, description="Coordinator that proposed it; 0 for the Harness's bootstrap Plan.")
    direction: str = Field(min_length=1, description="η: the research direction.")
    relation: Relation = Field(description="ρ: new, revisit, contradict or combine.")
    sources: tuple[str, ...] = Field(default=(), description="Completed source Plans of the relation.")
    cited_findings: tuple[CitedFinding, ...] = Field(default=(), description="Findings the Plan builds on.")
    hypothesis: str = Field(min_length=1, description="ψ: the hypothesis.")
    mechanism: str = Field(min_length=1, description="ψ: why the intervention should work.")
    expected_observations: tuple[str, ...] = Field(min_length=1, description="What should be observed if true.")
    rejection_conditions: tuple[RejectionCondition, ...] = Field(min_length=1, description="When to reject.")
    controls: tuple[str, ...] = Field(default=(), description="What is held fixed to isolate the mechanism.")
    expectations: tuple[MetricExpectation, ...] = Field(min_length=1, description="Per-metric expectation.")
    rationale: str = Field(default="", description="Why the direction is worth testing now (the Coordinator's).")
    comparison_target: FrozenTarget | None = Field(
        default=None, description="Harness: the frozen target the commitment is tested against."
    )
    portfolio_target: FrozenTarget | None = Field(
        default=None, description="Harness: the Run's best at admission, for the portfolio conclusion."
    )

    def commitment(self) -> Commitment:
        """ψ of this Plan."""
        return Commitment(
            hypothesis=self.hypothesis,
            mechanism=self.mechanism,
            expected_observations=self.expected_observations,
            rejection_conditions=self.rejection_conditions,
            controls=self.controls,
            expectations=self.expectations,
        )

    @model_validator(mode="after")
    def _relation_sources(self) -> Plan:
        needed = {"new": (0, 0), "revisit": (1, 1), "contradict": (1, 1), "combine": (2, None)}
        low, high = needed[self.relation]
        count = len(self.sources)
        if count < low or (high is not None and count > high):
            want = "no sources" if high == 0 else f"{low}" + ("+" if high is None else "") + " source(s)"
            raise ValueError(f"relation {self.relation!r} needs {want} (got {list(self.sources)})")
        if len(set(self.sources)) != count:
            raise ValueError(f"sources repeat a Plan: {list(self.sources)}")
        return self
