"""Worked steps read from a response's think span, each checked by re-doing its arithmetic.

The tiny world writes a step as a chain of equal parts, ``47+85=[7+5=12, 4+8+1=13]=132``: an
expression, optionally its column-by-column working in brackets, and the result; top-level steps
are separated by ``; `` (``problems.py``). Prose around the steps (``let me think. …``) is skipped:
a text is cut into chunks at ``;``, line breaks and ``,``/``.`` followed by a space (outside
brackets), and a chunk with ``=`` is a step once the words before its first expression and after
its result are trimmed. Parts with a variable (``3x``, ``x^2``) are not evaluated; every other part
is evaluated exactly and must equal the others, and every bracketed column must hold on its own.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from fractions import Fraction

# The expression that ends the words before a step's first "=", and the one that starts its result.
_LEADING = re.compile(r"(?<![A-Za-z])[\dx(\-][\dx()+\-*/^ ]*$")
_TRAILING = re.compile(r"^[\dx()+\-*/^ ]*")
_INTEGER = re.compile(r"(?<!\d)\d{1,30}(?!\d)")  # longer digit runs are no operand a question states
MAX_EXPRESSION = 200
_OPERATORS = {ast.Add: Fraction.__add__, ast.Sub: Fraction.__sub__, ast.Mult: Fraction.__mul__}


@dataclass(frozen=True)
class Step:
    """One worked step: its text, the integers it works from, its result and whether its arithmetic holds."""

    text: str
    operands: tuple[int, ...]
    value: Fraction | None
    holds: bool


def _evaluate(node: ast.AST) -> Fraction | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
        return Fraction(node.value)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _evaluate(node.operand)
        return None if inner is None else -inner
    if isinstance(node, ast.BinOp):
        left, right = _evaluate(node.left), _evaluate(node.right)
        if left is None or right is None:
            return None
        if isinstance(node.op, ast.Div):
            return None if right == 0 else left / right
        operator = _OPERATORS.get(type(node.op))
        return None if operator is None else operator(left, right)
    return None


def evaluate(expression: str) -> Fraction | None:
    """The exact value of an integer expression (+ - * / and brackets), or None when it is not one
    (or is longer than MAX_EXPRESSION characters: no worked step is, and parsing it is unbounded work)."""
    if not expression or len(expression) > MAX_EXPRESSION or not set(expression) <= set("0123456789+-*/() "):
        return None
    try:
        return _evaluate(ast.parse(expression, mode="eval").body)
    except (SyntaxError, RecursionError, MemoryError):
        return None


def _chunks(text: str, separators: str, spaced: str) -> list[str]:
    """``text`` cut at ``separators``, and at ``spaced`` characters followed by a space or the end,
    never inside brackets."""
    chunks: list[str] = []
    current: list[str] = []
    depth = 0
    for index, char in enumerate(text):
        depth += (char == "[") - (char == "]")
        follows = text[index + 1 : index + 2]
        if depth <= 0 and (char in separators or (char in spaced and follows in ("", " ", "\n"))):
            chunks.append("".join(current))
            current = []
        else:
            current.append(char)
    chunks.append("".join(current))
    return [chunk.strip() for chunk in chunks if chunk.strip()]


def _columns_hold(part: str) -> bool:
    """Whether every column of a bracketed working (``[7+5=12, 4+8+1=13]``) is an equality that holds."""
    for column in _chunks(part[1:-1], ",", ""):
        values = [evaluate(side.strip()) for side in column.split("=")]
        if len(values) < 2 or None in values or len(set(values)) != 1:
            return False
    return True


def parse_step(chunk: str) -> Step | None:
    """The step a chunk writes, or None when it holds no equality."""
    parts = _chunks(chunk, "=", "")
    if len(parts) < 2:
        return None
    leading = _LEADING.search(parts[0])
    first = leading.group().strip() if leading else ""
    last = _TRAILING.findall(parts[-1])[0].strip()  # the match at the start, possibly empty
    parts = [first, *parts[1:-1], last]
    if not first or not last:
        return None
    holds, values = True, []
    for part in parts:
        if part.startswith("[") and part.endswith("]"):
            holds = holds and _columns_hold(part)
        elif "x" not in part and "^" not in part:
            value = evaluate(part)
            holds = holds and value is not None
            values.append(value)
    holds = holds and len(set(values)) <= 1
    working = [part for part in parts[:-1] if not part.startswith("[")]
    operands = tuple(int(number) for part in working for number in _INTEGER.findall(part))
    result = evaluate(last)
    return Step(text=chunk, operands=operands, value=result, holds=holds)


def worked_steps(span: str, *, cut: bool = False) -> list[Step]:
    """The steps of a think span in order; ``cut`` (the span never closed) drops the last chunk, which
    the length cap may have ended mid-step."""
    chunks = _chunks(span, ";\n", ",.")
    if cut and chunks:
        chunks = chunks[:-1]
    return [step for step in map(parse_step, chunks) if step is not None]
