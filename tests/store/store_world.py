"""Small valid research documents for run-store tests (and the crash worker, which imports this file)."""

from __future__ import annotations

from datetime import UTC, datetime

from ade_core.schemas import Attempt, LedgerEntry, Plan, PlanMemory, RunMemory, Trial
from ade_core.schemas.memory import Finding
from ade_core.schemas.trial import Conclusions, Unavailable

DIGEST = "sha256:" + "ab" * 32
PENDING = Unavailable(reason="not yet concluded")


def plan(n: int, *, hypothesis: str = "Deduplicated data helps.") -> Plan:
    """Plan ``C1/P<n>``."""
    return Plan.model_validate(
        {
            "plan_id": f"C1/P{n}",
            "coordinator": 1,
            "direction": "remove near-duplicate examples",
            "relation": "new",
            "hypothesis": hypothesis,
            "mechanism": "Repetition wastes the training budget.",
            "expected_observations": ["accuracy rises"],
            "rejection_conditions": [
                {
                    "metric": "accuracy",
                    "comparator": "<",
                    "threshold": 0.0,
                    "against": "comparison_target",
                    "prose": "no gain",
                }
            ],
            "expectations": [{"metric": "accuracy", "kind": "strict_improvement"}],
        }
    )


def trial(n: int, *, status: str = "planned", attempts: tuple[str, ...] = (), score: float | None = None) -> Trial:
    """Trial ``C1/P<n>/T1`` of ``plan(n)``."""
    return Trial(
        trial_id=f"C1/P{n}/T1",
        plan_id=f"C1/P{n}",
        plan_memory_base=f"C1/P{n}@v0",
        run_memory_base="v0",
        attempts=attempts,
        status=status,  # type: ignore[arg-type]
        scores=PENDING if score is None else {"accuracy": score},
        conclusions=Conclusions(realization=PENDING, hypothesis=PENDING, portfolio=PENDING),
    )


def attempt(n: int, number: int, *, attempt_id: str | None = None) -> Attempt:
    """Attempt ``number`` of ``trial(n)``."""
    return Attempt(
        attempt_id=attempt_id or f"C1/P{n}/T1/a{number}",
        trial_id=f"C1/P{n}/T1",
        number=number,
        command_digest=DIGEST,
        resources={"host": "localhost"},
        status="running",
        started_at=datetime.now(UTC),
    )


def plan_memory(n: int, version: int = 1, *, revision: int = 0) -> PlanMemory:
    """Plan-Memory version ``version`` of ``plan(n)`` with one finding from its Trial."""
    return PlanMemory(
        plan_id=f"C1/P{n}",
        version=version,
        parent=version - 1 if version else None,
        revision=revision,
        source_trials=(f"C1/P{n}/T1",),
        source_digests=(DIGEST,),
        findings=(Finding(finding_id=f"F{n}", statement=f"finding of plan {n}", source_trials=(f"C1/P{n}/T1",)),),
    )


def run_memory(version: int, commit_keys: tuple[str, ...], *, revision: int = 0) -> RunMemory:
    """Run-Memory version ``version`` that has merged ``commit_keys``."""
    return RunMemory(
        version=version,
        parent=version - 1 if version else None,
        revision=revision,
        source_trials=(),
        source_digests=(),
        findings=(),
        commit_keys=commit_keys,
    )


def ledger(sequence: int, action: str = "pause") -> LedgerEntry:
    """Operator ledger entry ``sequence``."""
    return LedgerEntry(sequence=sequence, action=action, operator="alice", at=datetime.now(UTC))  # type: ignore[arg-type]
