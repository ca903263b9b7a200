"""Builder development checks: a draft run on the development inputs, diagnostics back to the Builder only.

Paper Sec 3.2 and App. C.4: within its J reflections the Builder may get development feedback —
"the selected examples and diagnostics" — to repair interface or execution failures on fixed task
inputs. A check runs the same admission pipeline ``ade admit`` uses (static pre-check, sandbox run
on the task's declared development inputs with its services, output validation, admission
probes) and adds what admission alone does not report: the task's output statistics, a preview of
the output, the service answers, and the task's realization check of the declared claims on these
outputs. It never trains the target model. The diagnostics are stored in the object store and
named only by the Trial's ``BuildRound``; only ``builder_view`` reads them, so no ranking, memory
record or other role's view can (tests/harness/test_dev_checks.py checks this).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from ade_core.harness.admission import AdmissionResult, answer_statuses, merged_statistics
from ade_core.harness.gate import research_record
from ade_core.plugins import TaskHandle
from ade_core.schemas.views import CheckOutcome, DevCallDiagnostics, DevCheck

PREVIEW_CHARS = 600  # the start of each canonical output shown; statistics describe the rest


def _preview(canonical: Any) -> str:
    if canonical is None:
        return ""
    text = json.dumps(canonical, ensure_ascii=False, default=str)
    return text if len(text) <= PREVIEW_CHARS else text[: PREVIEW_CHARS - 3] + "..."


def diagnose(
    admission: AdmissionResult, task: TaskHandle, inputs: str, declared: Sequence[Mapping[str, Any]]
) -> DevCheck:
    """The diagnostics of one admission run on the development inputs.

    The claims verdict applies the task's realization check to the development outputs, so a
    Builder learns before finalizing whether its declared claims name statistics the task reports
    and hold on these inputs (the binding check runs again on the frozen inputs at realization).
    """
    ok = [c for c in admission.calls if c.status == "ok"]
    claims: str
    if ok and len(ok) == len(admission.calls):
        statuses = answer_statuses([s for c in ok for s in c.service_calls])
        verdict = task.realization_check(merged_statistics(ok), [dict(d) for d in declared], statuses)
        claims, reasons = verdict.status, tuple(verdict.reasons)
    else:
        claims, reasons = "not_checked", ("no valid output on the development inputs to check the claims against",)
    calls = tuple(
        DevCallDiagnostics(
            entry_point=c.entry_point,
            status=c.status,
            error=c.error,
            statistics=research_record(dict(c.statistics)),
            output_preview=_preview(c.canonical),
            service_answers=dict(Counter(answer_statuses(c.service_calls))),
        )
        for c in admission.calls
    )
    return DevCheck(
        inputs=inputs,
        admitted=admission.admitted,
        checks=tuple(CheckOutcome(name=c.name, status=c.status, reason=c.reason) for c in admission.checks),
        calls=calls,
        claims=claims,
        claim_reasons=reasons,
        isolation=admission.isolation,
    )


def event_summary(check: DevCheck, digest: str) -> dict[str, Any]:
    """What the delivery event records of a check (the full diagnostics stay in the object store)."""
    return {
        "digest": digest,
        "admitted": check.admitted,
        "failed": [f"{c.name}: {c.reason}" for c in check.checks if c.status == "failed"],
        "claims": check.claims,
    }
