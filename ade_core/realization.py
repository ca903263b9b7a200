"""Generic realization check: declared statistic claims and service availability (paper Appendix C.6)."""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Iterable, Mapping
from typing import Any

from ade_core.specs import RealizationVerdict

_COMPARATORS = {"<": operator.lt, "<=": operator.le, "==": operator.eq, ">=": operator.ge, ">": operator.gt}
_CLAIM = re.compile(r"^\s*([\w.]+)\s*(<=|>=|==|<|>)\s*(-?\d+(?:\.\d+)?)\s*$")


def parse_claim(text: str) -> dict[str, Any]:
    """``"over_cap == 0"`` -> a declared claim ``{statistic, comparator, value}``."""
    match = _CLAIM.match(text)
    if match is None:
        raise ValueError(
            f"claim {text!r} is not STATISTIC OP NUMBER with OP one of {sorted(_COMPARATORS)}; e.g. 'over_cap == 0'"
        )
    name, comparator, value = match.groups()
    return {"statistic": name, "comparator": comparator, "value": float(value) if "." in value else int(value)}


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
