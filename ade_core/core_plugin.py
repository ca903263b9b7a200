"""Hooks ade-core answers itself: generic metrics, graders and review pools for every task."""

from __future__ import annotations

from ade_core.engine.grading.boxed import grade_boxed_exact
from ade_core.engine.grading.code import PROGRAM_LIMIT_S, grade_code, grade_code_fraction, score_code
from ade_core.engine.grading.math import GRADING_TIMEOUT_S, grade_math_verify
from ade_core.engine.metrics import average_at_k, pass_at_k
from ade_core.engine.records import ENGINE_REVIEW_POOLS
from ade_core.plugins import hookimpl
from ade_core.specs import GraderSpec, MetricSpec, ReviewPool


@hookimpl
def ade_metrics(task: str) -> list[MetricSpec]:
    return [
        MetricSpec(
            name="pass_at_k",
            description="Pass@K: percentage of problems with at least one correct sample among K.",
            compute=pass_at_k,
        ),
        MetricSpec(
            name="average_at_k",
            description="Average@K: mean fraction of correct samples per problem, as a percentage.",
            compute=average_at_k,
        ),
    ]


@hookimpl
def ade_graders() -> list[GraderSpec]:
    return [
        GraderSpec(
            name="boxed_exact",
            description="The last \\boxed{...} answer equals the reference after light normalization.",
            grade=grade_boxed_exact,
        ),
        GraderSpec(
            name="math_verify",
            description="math-verify equivalence of the final answer (the last \\boxed{...}) and the reference "
            "(3 s timeout).",
            grade=grade_math_verify,
            timeout_s=GRADING_TIMEOUT_S,
        ),
        GraderSpec(
            name="code_tests",
            description="The last ```python block passes every test of the reference, run in the sandbox "
            "(6 s per test, 30 s per program).",
            grade=grade_code,
            # The sandbox enforces the per-test and per-program limits; this only catches a stuck runner.
            timeout_s=PROGRAM_LIMIT_S,
        ),
        GraderSpec(
            name="code_tests_fraction",
            description="As code_tests (correct: every test passes), with a continuous score, the share of tests "
            "passed, for coverage@k ([evaluation] coverage_k); every test runs.",
            grade=grade_code_fraction,
            score=score_code,
            timeout_s=PROGRAM_LIMIT_S,
        ),
    ]


@hookimpl
def ade_review_pools(task: str) -> list[ReviewPool]:
    return list(ENGINE_REVIEW_POOLS)
