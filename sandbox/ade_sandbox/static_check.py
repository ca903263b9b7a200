"""Static pre-check of strategy source: a first filter against the declared contract.

It is not the security boundary (the sandbox is): deny-lists over Python source are
bypassable. It checks module shape, imports against an allow-list, exact entry-point
signatures (no defaults, no varargs, no decorators) and a size cap.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

DEFAULT_MAX_SOURCE_BYTES = 256 << 10
_ALLOWED_TOP_LEVEL = (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.Assign, ast.AnnAssign)


@dataclass(frozen=True)
class EntrySpec:
    """A function the strategy must (or may) define, with its exact parameter names."""

    name: str
    parameters: tuple[str, ...]
    is_async: bool = False
    required: bool = True


@dataclass(frozen=True)
class Violation:
    """One reason a source is refused, with the line it concerns."""

    code: str
    message: str
    line: int | None = None

    def __str__(self) -> str:
        where = f"line {self.line}: " if self.line else ""
        return f"{where}{self.message} [{self.code}]"


def _imports(tree: ast.Module) -> list[tuple[str, int]]:
    found: list[tuple[str, int]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            found.append(("." * node.level + (node.module or ""), node.lineno))
    return found


def _signature(node: ast.FunctionDef | ast.AsyncFunctionDef, entry: EntrySpec) -> list[Violation]:
    problems = []
    if isinstance(node, ast.AsyncFunctionDef) != entry.is_async:
        kind = "async def" if entry.is_async else "def"
        problems.append(Violation("entry_point_kind", f"{entry.name} must be declared with '{kind}'", node.lineno))
    args = node.args
    declared = [a.arg for a in (*args.posonlyargs, *args.args)]
    extras = [
        what
        for what, present in (
            ("*args", args.vararg),
            ("**kwargs", args.kwarg),
            ("keyword-only parameters", args.kwonlyargs),
            ("default values", args.defaults or any(d is not None for d in args.kw_defaults)),
        )
        if present
    ]
    if declared != list(entry.parameters) or extras:
        detail = f" and has {', '.join(extras)}" if extras else ""
        problems.append(
            Violation(
                "entry_point_signature",
                f"{entry.name} must take exactly ({', '.join(entry.parameters)}); "
                f"found ({', '.join(declared)}){detail}",
                node.lineno,
            )
        )
    if node.decorator_list:
        problems.append(Violation("entry_point_decorated", f"{entry.name} must not be decorated", node.lineno))
    return problems


def check_source(
    source: str,
    entries: Sequence[EntrySpec],
    allowed_imports: Iterable[str] | None,
    *,
    max_source_bytes: int = DEFAULT_MAX_SOURCE_BYTES,
) -> list[Violation]:
    """Every contract violation of ``source``; empty means it may go on to the sandbox.

    ``allowed_imports=None`` means no import restriction (e.g. ad-hoc CLI runs).
    """
    size = len(source.encode("utf-8"))
    if size > max_source_bytes:
        return [Violation("size", f"source is {size} bytes, above the {max_source_bytes}-byte cap")]
    try:
        tree = ast.parse(source, filename="strategy.py")
    except SyntaxError as exc:
        return [Violation("syntax", f"syntax error: {exc.msg}", exc.lineno)]
    problems: list[Violation] = []
    for index, node in enumerate(tree.body):
        docstring = index == 0 and isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
        if not (isinstance(node, _ALLOWED_TOP_LEVEL) or docstring):
            problems.append(
                Violation(
                    "top_level_statement",
                    f"module level may hold only imports, functions and constants; found {type(node).__name__}",
                    node.lineno,
                )
            )
    if allowed_imports is not None:
        allowed = set(allowed_imports)
        for module, line in _imports(tree):
            if module.split(".")[0] not in allowed:
                problems.append(
                    Violation("import", f"import of {module!r} is not allowed; allowed: {sorted(allowed)}", line)
                )
    defined = {n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    for entry in entries:
        function = defined.get(entry.name)
        if function is None:
            if entry.required:
                problems.append(Violation("missing_entry_point", f"missing entry point {entry.name!r}"))
            continue
        problems += _signature(function, entry)
    return problems
