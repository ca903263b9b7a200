"""Shortening a view to fit a model's context: evidence is cut, never the parts a role must act on.

A view holds two kinds of content. What the role is asked to act on — its identity fields, the
Plan, memories, the strategy sources it builds on, interfaces and constraints, the records a
Review Worker must judge — is never shortened. Evidence that is already a sample of something
larger — package records, sample input rows, earlier rounds' diagnostics, the catalog and the
ranking — may be: ``EVIDENCE`` names it per role.

``fit_view`` applies the role's rules in order until ``measure`` says the prompt fits: a "cut"
rule shortens the long texts at its path (to 2000 characters, then halving down to 120; ids and
names are never cut), a "first"/"last" rule halves the largest list at its path, keeping that end,
down to one item. Only content is removed, so the shortened view still validates against the role's view
model and stays within what the Harness let the role see. What was left out is counted, and the
prompt says so.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

# What a rule does at its path: cut the texts inside it, or drop list items keeping its first or last ones.
Action = Literal["cut", "first", "last"]

# Per role, in the order they apply: (path, action). A path is dotted keys; '*' steps into every list item.
EVIDENCE: dict[str, tuple[tuple[str, Action], ...]] = {
    "coordinator": (
        ("packages.*.records.*.records", "cut"),
        ("packages.*.records.*.records", "first"),
        ("packages.*.checkpoints", "last"),
        ("packages", "last"),
        ("notes", "last"),
        ("catalog", "last"),
        ("ranking", "first"),
    ),
    "builder": (  # earlier rounds go before anything of the latest one
        ("build_inputs.frozen_inputs.sample", "cut"),
        ("build_inputs.frozen_inputs.sample", "first"),
        ("previous.*.dev_check.calls", "cut"),
        ("previous", "last"),
    ),
    "analyzer": (
        ("records.*.records", "cut"),
        ("records.*.records", "first"),
        ("package.checkpoints", "last"),
        ("review.judgments", "cut"),
    ),
    "review_worker": (("requests.*.records", "cut"),),  # every bound record is judged: none is dropped
    "plan_summarizer": (),
    "run_summarizer": (("ranking", "first"),),
}
TEXT_CAPS = (2000, 1000, 500, 250, 120)
_MARK = re.compile(r" …\[(\d+) characters cut to fit the context\]$")
NEVER_CUT = ("id", "plan_id", "trial_id", "role", "subject", "status", "name")


@dataclass
class Trimmed:
    """What ``fit_view`` left out: texts cut and list items dropped, by evidence path."""

    texts_cut: int = 0
    characters_cut: int = 0
    items_dropped: dict[str, int] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.texts_cut or self.items_dropped)

    def to_json(self) -> dict[str, Any]:
        return {
            "texts_cut": self.texts_cut,
            "characters_cut": self.characters_cut,
            "items_dropped": dict(sorted(self.items_dropped.items())),
        }

    def note(self) -> str:
        """The sentence the prompt carries about it."""
        parts = []
        if self.texts_cut:
            parts.append(f"{self.texts_cut} long texts were cut (marked where they end)")
        if self.items_dropped:
            dropped = ", ".join(f"{count} from {path}" for path, count in sorted(self.items_dropped.items()))
            parts.append(f"list items were left out ({dropped})")
        return (
            "This view was shortened to fit the model's context: "
            + "; ".join(parts)
            + ". Counts such as `count` and `size` still describe the whole."
        )


def _found(data: Any, path: list[str]) -> Iterator[Any]:
    """What ``path`` names inside ``data``."""
    if not path:
        yield data
        return
    key, rest = path[0], path[1:]
    if key == "*":
        if isinstance(data, list):
            for item in data:
                yield from _found(item, rest)
    elif isinstance(data, dict) and key in data:
        yield from _found(data[key], rest)


def _cut(container: dict[str, Any] | list[Any], key: Any, cap: int, trimmed: Trimmed) -> None:
    """Cut, in place, ``container[key]`` if it is a text longer than ``cap``, else every such text inside it
    (ids and names stay whole)."""
    value = container[key]
    if isinstance(value, str):
        earlier = _MARK.search(value)
        kept, before = (value[: earlier.start()], int(earlier.group(1))) if earlier else (value, 0)
        if len(kept) > cap and key not in NEVER_CUT:
            trimmed.texts_cut += 0 if earlier else 1
            trimmed.characters_cut += len(kept) - cap
            container[key] = kept[:cap] + f" …[{before + len(kept) - cap} characters cut to fit the context]"
    elif isinstance(value, dict) and key not in NEVER_CUT:
        for inner in list(value):
            _cut(value, inner, cap, trimmed)
    elif isinstance(value, list):
        for index in range(len(value)):
            _cut(value, index, cap, trimmed)


def fit_view(
    role: str, data: dict[str, Any], measure: Callable[[dict[str, Any]], int], budget: int
) -> tuple[dict[str, Any], Trimmed]:
    """``data`` (a view's JSON) shortened until ``measure(data) <= budget``, or as far as its evidence
    allows, and what was left out. ``data`` itself is not changed; a view that fits comes back as is."""
    trimmed = Trimmed()
    if measure(data) <= budget:
        return data, trimmed
    data = copy.deepcopy(data)
    for pattern, action in EVIDENCE.get(role, ()):
        path = pattern.split(".")
        if action == "cut":
            for cap in TEXT_CAPS:
                for parent in _found(data, path[:-1]):
                    if isinstance(parent, dict) and path[-1] in parent:
                        _cut(parent, path[-1], cap, trimmed)
                if measure(data) <= budget:
                    return data, trimmed
            continue
        while lists := [found for found in _found(data, path) if isinstance(found, list) and len(found) > 1]:
            largest = max(lists, key=lambda found: len(json.dumps(found, ensure_ascii=False)))
            drop = len(largest) // 2
            if action == "first":
                del largest[len(largest) - drop :]
            else:
                del largest[:drop]
            trimmed.items_dropped[pattern] = trimmed.items_dropped.get(pattern, 0) + drop
            if measure(data) <= budget:
                return data, trimmed
    return data, trimmed
