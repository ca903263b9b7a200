"""Reading a planning call's reply: a Verbalized Sampling list or a Groot tree with its chosen paths.

A planning reply is model output, so every way it can go wrong is an outcome, never an exception:
``malformed`` (nothing usable: no approach blocks, no tree, no labelled node), ``shortfall`` (fewer
than n usable approaches, the usable ones kept) or ``ok``. The raw text is kept with the outcome.

Verbalized Sampling: ``<approach>`` blocks, each opening with ``Probability: p`` (p in [0, 1], or a
percentage). A block whose probability is missing or unreadable keeps its approach with no
probability; a list whose blocks are not closed is read up to the next opening tag.

Groot: a ``<tree>`` of labelled decisions (``A``, ``A1``, ``A1a``, ``A1a1``: each label extends
its parent's by one letter or number run), then for each approach a ``Path: B -> B1a`` line and an
``<approach>`` block. A path names its leaf (intermediate labels may be left out); it is usable
only when its last label is a leaf of the tree, and two paths that end at the same leaf share
their whole route, so the second is dropped. Every pair of kept paths therefore diverges at some
decision of the tree.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

PlanStatus = Literal["ok", "shortfall", "malformed"]

_APPROACH_OPEN = re.compile(r"<approach>", re.IGNORECASE)
_APPROACH_BLOCK = re.compile(r"<approach>(.*?)(?:</approach>|(?=<approach>)|\Z)", re.IGNORECASE | re.DOTALL)
_PROBABILITY = re.compile(r"^\s*\**probability\**\s*[:=]\s*\**\s*([0-9]*\.?[0-9]+)\s*(%?)\**\s*$", re.IGNORECASE)
_TREE = re.compile(r"<tree>(.*?)(?:</tree>|\Z)", re.IGNORECASE | re.DOTALL)
# A root label needs its punctuation ("A. ..."), so a line that opens with the word "A" is not a node.
_NODE = re.compile(r"^\s*[-*]?\s*([A-Z](?:[0-9]+(?:[a-z]+[0-9]*)*)[.):]?|[A-Z][.):])\s+(\S.*)$")
_PATH_LINE = re.compile(r"^\s*\**path\**\s*:\s*(.+?)\s*$", re.IGNORECASE)
_LABEL_RUN = re.compile(r"[A-Z]|[0-9]+|[a-z]+")


@dataclass(frozen=True)
class Approach:
    """One approach to execute: its text (the hidden instruction), and what the plan said of it."""

    text: str
    probability: float | None = None  # Verbalized Sampling's estimate, when readable
    path: tuple[str, ...] = ()  # Groot: the labels from the root to the leaf


@dataclass(frozen=True)
class PlanReading:
    """What a planning reply yields: the approaches, the outcome, and why it is not ``ok``."""

    status: PlanStatus
    approaches: tuple[Approach, ...]
    raw: str
    reason: str = ""
    dropped: tuple[str, ...] = field(default=())  # paths or blocks left out, each with its reason

    @property
    def usable(self) -> bool:
        return self.status != "malformed"


def _outcome(approaches: list[Approach], n: int, raw: str, dropped: list[str], what: str) -> PlanReading:
    if not approaches:
        return PlanReading("malformed", (), raw, f"no usable {what}", tuple(dropped))
    if len(approaches) < n:
        reason = f"{len(approaches)} usable {what} of the {n} asked for"
        return PlanReading("shortfall", tuple(approaches), raw, reason, tuple(dropped))
    return PlanReading("ok", tuple(approaches[:n]), raw, "", tuple(dropped))


def _blocks(text: str) -> list[str]:
    return [match.group(1).strip() for match in _APPROACH_BLOCK.finditer(text)]


# -- Verbalized Sampling ----------------------------------------------------------------------------


def read_verbalized(text: str, n: int) -> PlanReading:
    """The first ``n`` approaches of a Verbalized Sampling reply, with their stated probabilities."""
    if n < 1:
        raise ValueError(f"n must be >= 1 (got {n})")
    if not _APPROACH_OPEN.search(text):
        return PlanReading("malformed", (), text, "no <approach> blocks")
    approaches, dropped = [], []
    for block in _blocks(text):
        lines = block.splitlines()
        probability = None
        if lines:
            found = _PROBABILITY.match(lines[0])
            if found:
                value = float(found.group(1)) / (100.0 if found.group(2) else 1.0)
                probability = value if 0.0 <= value <= 1.0 else None
                lines = lines[1:]
        body = "\n".join(lines).strip()
        if not body:
            dropped.append("an empty <approach> block")
            continue
        approaches.append(Approach(body, probability))
    return _outcome(approaches, n, text, dropped, "approaches")


# -- Groot --------------------------------------------------------------------------------------------


def parent_label(label: str) -> str | None:
    """``A1b`` -> ``A1``, ``A1`` -> ``A``, ``A`` -> None: a label minus its last letter or number run."""
    runs = _LABEL_RUN.findall(label)
    return "".join(runs[:-1]) or None


def read_tree(text: str) -> dict[str, str]:
    """The labelled decisions of a ``<tree>`` block, label -> description (empty when there is none)."""
    found = _TREE.search(text)
    if found is None:
        return {}
    nodes: dict[str, str] = {}
    for line in found.group(1).splitlines():
        match = _NODE.match(line)
        label = match.group(1).rstrip(".):") if match else ""
        if match and label not in nodes:
            nodes[label] = match.group(2).strip()
    return nodes


def parent_in(label: str, nodes: dict[str, str]) -> str | None:
    """The nearest ancestor of ``label`` the tree has (a tree may skip a level, ``B`` -> ``B1a``)."""
    current = parent_label(label)
    while current is not None and current not in nodes:
        current = parent_label(current)
    return current


def route(label: str, nodes: dict[str, str]) -> tuple[str, ...] | None:
    """The labels from the root down to ``label``; None when ``label`` is not in the tree."""
    if label not in nodes:
        return None
    chain = [label]
    while (up := parent_in(chain[-1], nodes)) is not None:
        chain.append(up)
    return tuple(reversed(chain))


def leaves(nodes: dict[str, str]) -> set[str]:
    parents = {parent_in(label, nodes) for label in nodes}
    return {label for label in nodes if label not in parents}


def choose_paths(nodes: dict[str, str], named: list[str]) -> tuple[list[tuple[str, ...] | None], list[str]]:
    """For each ``Path:`` line, its root-to-leaf route, or None with the reason in the second list.

    A route is kept only when its last label is a leaf of the tree and no earlier kept route ends
    at the same leaf, so no two kept routes are the same path."""
    ends = leaves(nodes)
    taken: set[str] = set()
    routes: list[tuple[str, ...] | None] = []
    dropped: list[str] = []
    for line in named:
        labels = [part.strip(" .*`") for part in re.split(r"->|→|>|,", line) if part.strip(" .*`")]
        last = labels[-1] if labels else ""
        chain = route(last, nodes) if last else None
        problem = ""
        if not line:
            problem = "an approach without a Path: line"
        elif chain is None:
            problem = f"path {line!r} ends at {last!r}, which is not in the tree"
        elif last not in ends:
            problem = f"path {line!r} ends at {last!r}, which is not a leaf"
        elif any(label not in chain for label in labels):
            problem = f"path {line!r} names labels off the route to {last!r}"
        elif last in taken:
            problem = f"path {line!r} repeats the route to {last!r}"
        if problem:
            routes.append(None)
            dropped.append(problem)
            continue
        taken.add(last)
        routes.append(chain)
    return routes, dropped


def read_groot(text: str, n: int) -> PlanReading:
    """The first ``n`` usable (tree path, approach) pairs of a Groot reply."""
    if n < 1:
        raise ValueError(f"n must be >= 1 (got {n})")
    tree = _TREE.search(text)
    nodes = read_tree(text)
    if tree is None or not nodes:
        reason = "no <tree> block" if tree is None else "no labelled decisions in the <tree> block"
        return PlanReading("malformed", (), text, reason)
    after_tree = text[tree.end() :]
    # Each approach block is paired with the last Path: line before it.
    pieces = re.split(r"(<approach>.*?(?:</approach>|(?=<approach>)|\Z))", after_tree, flags=re.IGNORECASE | re.DOTALL)
    named: list[str] = []
    bodies: list[str] = []
    pending: str | None = None
    for piece in pieces:
        if _APPROACH_OPEN.match(piece):
            body = _blocks(piece)[0] if _blocks(piece) else ""
            named.append(pending or "")
            bodies.append(body)
            pending = None
            continue
        for line in piece.splitlines():
            found = _PATH_LINE.match(line)
            if found:
                pending = found.group(1)
    if not bodies:
        return PlanReading("malformed", (), text, "no <approach> blocks after the tree")
    routes, dropped = choose_paths(nodes, named)
    approaches = []
    for chain, body, line in zip(routes, bodies, named, strict=True):
        if chain is None:
            continue
        if not body:
            dropped.append(f"path {line!r} has an empty approach")
            continue
        approaches.append(Approach(body, None, chain))
    return _outcome(approaches, n, text, dropped, "distinct root-to-leaf paths")


__all__ = [
    "Approach",
    "PlanReading",
    "choose_paths",
    "leaves",
    "parent_in",
    "parent_label",
    "read_groot",
    "read_tree",
    "read_verbalized",
    "route",
]
