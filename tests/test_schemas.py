"""Protocol schemas: structured Plans, explicit unavailability, content digests."""

from __future__ import annotations

import re

import pydantic
import pytest

from ade_core.schemas import Plan, StrategyArtifact, Trial, sha256_digest
from ade_core.schemas.artifact import BuilderAccount
from ade_core.schemas.trial import Conclusions, Unavailable


def plan(**changes):
    base = dict(
        plan_id="C1/P1",
        coordinator=1,
        direction="Filter looping trajectories.",
        relation="new",
        hypothesis="Removing loops raises Pass@K.",
        mechanism="Loops teach the model to never box.",
        expected_observations=("fewer unboxed responses",),
        rejection_conditions=(
            {
                "metric": "pass_at_k",
                "comparator": "<=",
                "threshold": 0.0,
                "against": "comparison_target",
                "prose": "no gain over the baseline",
            },
        ),
        expectations=(
            {"metric": "pass_at_k", "kind": "strict_improvement"},
            {"metric": "average_at_k", "kind": "no_regression", "margin": 1.0},
        ),
    )
    return Plan(**{**base, **changes})


def test_plan_conditions_are_structured():
    p = plan()
    assert p.rejection_conditions[0].comparator == "<=" and p.expectations[1].kind == "no_regression"


@pytest.mark.parametrize(
    ("relation", "sources", "message"),
    [
        ("new", ("C1/P1",), "relation 'new' needs no sources"),
        ("revisit", (), "relation 'revisit' needs 1 source"),
        ("combine", ("C1/P1",), "relation 'combine' needs 2+ source"),
        ("combine", ("C1/P1", "C1/P1"), "sources repeat a Plan"),
    ],
)
def test_relation_source_rules(relation, sources, message):
    with pytest.raises(pydantic.ValidationError, match=re.escape(message)):
        plan(relation=relation, sources=sources)


def test_unknown_expectation_kind_is_rejected():
    with pytest.raises(pydantic.ValidationError):
        plan(expectations=({"metric": "pass_at_k", "kind": "improve"},))


def test_trial_unavailable_fields_are_explicit():
    trial = Trial(
        trial_id="C1/P1/T1",
        plan_id="C1/P1",
        plan_memory_base="pm-0",
        run_memory_base="rm-0",
        status="build_failed",
        scores=Unavailable(reason="strategy never admitted"),
        conclusions=Conclusions(
            realization=Unavailable(reason="no realization"), hypothesis="inconclusive", portfolio="not_comparable"
        ),
    )
    dumped = trial.model_dump(mode="json")
    assert dumped["scores"] == {"unavailable": True, "reason": "strategy never admitted"}
    with pytest.raises(pydantic.ValidationError):
        Trial(**{**trial.model_dump(), "conclusions": {"realization": "verified", "hypothesis": "supported"}})


def test_artifact_digest_is_content_addressed():
    account = BuilderAccount(implementation="keeps boxed answers")
    a = StrategyArtifact(task="data_selection", source="x = 1\n", account=account)
    b = StrategyArtifact(task="data_selection", source="x = 1\n", account=account)
    c = StrategyArtifact(task="data_selection", source="x = 2\n", account=account)
    assert a.digest() == b.digest() != c.digest()
    assert a.digest() == sha256_digest(a.model_dump(mode="json"))


def test_schema_models_forbid_unknown_fields():
    with pytest.raises(pydantic.ValidationError, match="extra"):
        BuilderAccount(implementation="x", notes="y")
