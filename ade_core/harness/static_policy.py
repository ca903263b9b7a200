"""Static pre-check of a strategy's source against its task's interface (first admission step).

This checks the contract — module shape, imports, entry-point signatures — not safety:
isolation is the sandbox's job, since any deny-list over Python source is bypassable.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from ade_core.specs import EntryPoint, StrategyInterface

# Module-level statements a strategy may contain: imports, definitions, constants, a docstring.
_ALLOWED_TOP_LEVEL = (
    ast.Import,
    ast.ImportFrom,
    ast.FunctionDef,
    ast.AsyncFunctionDef,
    ast.Assign,
    ast.AnnAssign,
)


@dataclass(frozen=True)
class PolicyViolation:
    """One reason a source is not admissible, with the line it concerns."""

    code: str
    message: str
    line: int | None = None

    def __str__(self) -> str:
        where = f"line {self.line}: " if self.line else ""
        return f"{where}{self.message} [{self.code}]"


def _imported_modules(tree: ast.Module) -> list[tuple[str, int]]:
    found: list[tuple[str, int]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            found.append(("." * node.level + (node.module or ""), node.lineno))
    return found


def _check_signature(node: ast.FunctionDef | ast.AsyncFunctionDef, entry: EntryPoint) -> list[PolicyViolation]:
    problems = []
    is_async = isinstance(node, ast.AsyncFunctionDef)
    if is_async != entry.is_async:
        want = "async def" if entry.is_async else "def"
        problems.append(
            PolicyViolation("entry_point_kind", f"{entry.name} must be declared with '{want}'", node.lineno)
        )
    args = node.args
    declared = [a.arg for a in (*args.posonlyargs, *args.args)]
    expected = [p.name for p in entry.parameters]
    if declared != expected or args.vararg or args.kwarg or args.kwonlyargs:
        problems.append(
            PolicyViolation(
                "entry_point_signature",
                f"{entry.name} must take exactly ({', '.join(expected)}); found ({', '.join(declared)})"
                + (
                    " with *args/**kwargs/keyword-only parameters"
                    if args.vararg or args.kwarg or args.kwonlyargs
                    else ""
                ),
                node.lineno,
            )
        )
    return problems


def check_strategy_source(source: str, interface: StrategyInterface) -> list[PolicyViolation]:
    """All contract violations of ``source``; an empty list means the pre-check passed."""
    try:
        tree = ast.parse(source, filename="<strategy>")
    except SyntaxError as exc:
        return [PolicyViolation("syntax", f"syntax error: {exc.msg}", exc.lineno)]

    problems: list[PolicyViolation] = []
    for index, node in enumerate(tree.body):
        is_docstring = (
            index == 0 and isinstance(node, ast.Expr) and isinstance(getattr(node, "value", None), ast.Constant)
        )
        if not (isinstance(node, _ALLOWED_TOP_LEVEL) or is_docstring):
            problems.append(
                PolicyViolation(
                    "top_level_statement",
                    f"module level may hold only imports, functions and constants; found {type(node).__name__}",
                    node.lineno,
                )
            )

    allowed = set(interface.allowed_imports)
    for module, line in _imported_modules(tree):
        if module.split(".")[0] not in allowed:
            problems.append(
                PolicyViolation(
                    "import",
                    f"import of {module!r} is not allowed; allowed modules: {sorted(allowed) or 'none'}",
                    line,
                )
            )

    defined = {node.name: node for node in tree.body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))}
    for entry in interface.entry_points:
        node = defined.get(entry.name)
        if node is None:
            if entry.required:
                problems.append(PolicyViolation("missing_entry_point", f"missing entry point {entry.name!r}"))
            continue
        problems += _check_signature(node, entry)
    return problems
