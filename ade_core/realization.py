"""Generic realization check: declared statistic claims and service availability (paper Appendix C.6)."""

from __future__ import annotations

import math
import operator
from collections.abc import Iterable, Mapping
from typing import Any

from ade_core.specs import RealizationVerdict

_COMPARATORS = {"<": operator.lt, "<=": operator.le, "==": operator.eq, ">=": operator.ge, ">": operator.gt}


def check_claims(
    statistics: Mapping[str, Any],
    declared: Iterable[Mapping[str, Any]],
    service_statuses: Iterable[str] = (),
) -> RealizationVerdict:
    """``deviated`` if a declared claim contradicts the realized statistics;
    ``unverified`` if services were called and every answer was ``unavailable``;
    otherwise ``verified``.

    A claim naming a statistic the task does not report is a deviation: the account
    promised something the realization cannot show.
    """
    reasons = []
    for claim in declared:
        name, comparator, value = claim["statistic"], claim["comparator"], claim["value"]
        if comparator not in _COMPARATORS:
            reasons.append(f"claim on {name!r} uses unknown comparator {comparator!r}")
            continue
        if name not in statistics:
            reasons.append(f"declared statistic {name!r} is not reported (reported: {sorted(statistics)})")
            continue
        actual = statistics[name]
        if not isinstance(actual, (int, float)) or not math.isfinite(actual):
            reasons.append(f"statistic {name!r} is not a finite number (got {actual!r})")
        elif not _COMPARATORS[comparator](actual, value):
            reasons.append(f"declared {name} {comparator} {value}, realized {actual}")
    if reasons:
        return RealizationVerdict(status="deviated", reasons=tuple(reasons))
    statuses = list(service_statuses)
    if statuses and all(status == "unavailable" for status in statuses):
        return RealizationVerdict(
            status="unverified", reasons=(f"all {len(statuses)} service answers were 'unavailable'",)
        )
    return RealizationVerdict(status="verified")
