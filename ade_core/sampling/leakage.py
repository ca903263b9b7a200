"""Whether an executed response gives away that it was handed an approach (seed 001, Sec 3).

A response trained on must read as the model's own reasoning, so one that refers to the hidden
instruction is dropped and counted. The check looks for what a model says when it leaks: the
approach, hint, plan or instruction as something *given* to it ("the given approach", "following
the hint", "as instructed", "the hidden approach", "the approach I was given"), and the planner's
own markup (a ``Path:`` line, ``<approach>`` tags). Ordinary talk of "this approach" or "a
different strategy" is not a leak.
"""

from __future__ import annotations

import re

_THING = r"(?:approach|hint|plan|strategy|instructions?|method|guidance|direction|idea)"
_GIVEN = r"(?:given|provided|supplied|suggested|hidden|prescribed|assigned|specified|recommended)"
_PATTERNS = [
    rf"\b(?:the|this|that|my|our)\s+{_GIVEN}\s+{_THING}\b",
    rf"\b{_THING}\s+(?:i|we)\s+(?:was|were|have\s+been|am|are)\s+{_GIVEN}\b",
    rf"\b{_THING}\s+(?:that\s+)?(?:was|were|is|has\s+been)\s+{_GIVEN}(?:\s+to\s+(?:me|us))?\b",
    rf"\b{_THING}\s+{_GIVEN}\s+(?:to|for)\s+(?:me|us)\b",
    r"\b(?:the|a)\s+hint\b",
    rf"\b(?:following|per|using|based\s+on|according\s+to)\s+the\s+(?:{_GIVEN}\s+)?(?:hint|instructions?)\b",
    r"\bas\s+(?:instructed|suggested|hinted|directed)\b",
    r"\bhidden\s+(?:basis|approach|instruction)\b",
    r"^\s*path\s*:\s*[A-Z]",
    r"</?approach>",
]
_LEAK = re.compile("|".join(f"(?:{pattern})" for pattern in _PATTERNS), re.IGNORECASE | re.MULTILINE)


def leak(response: str) -> str | None:
    """The phrase by which ``response`` refers to its hidden approach, or None when it does not."""
    found = _LEAK.search(response)
    return found.group(0) if found else None


__all__ = ["leak"]
