"""Static pre-check of a strategy against its task's interface (first admission step).

The check itself lives in ade-sandbox; this adapts a task's StrategyInterface to it.
"""

from __future__ import annotations

import ast

from ade_core.specs import StrategyInterface
from ade_sandbox.static_check import EntrySpec, Violation, check_source

PolicyViolation = Violation


def entry_specs(interface: StrategyInterface) -> list[EntrySpec]:
    """The interface's entry points as the sandbox's static check sees them."""
    return [
        EntrySpec(e.name, tuple(p.name for p in e.parameters), is_async=e.is_async, required=e.required)
        for e in interface.entry_points
    ]


def check_strategy_source(source: str, interface: StrategyInterface) -> list[Violation]:
    """All contract violations of ``source``; an empty list means the pre-check passed."""
    return check_source(source, entry_specs(interface), interface.allowed_imports)


def defined_entry_points(source: str, interface: StrategyInterface) -> set[str]:
    """The interface's entry points ``source`` defines at module level (an optional one may be absent)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set()
    names = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    return {e.name for e in interface.entry_points if e.name in names}
