"""Integer-answer math problems in the seven MATH subjects, five levels, with worked solutions.

Each subject maps to an arithmetic family the tiny model can really learn; the level sets the
size of the numbers. Rows have MATH's fields (problem, solution, answer, subject, level,
unique_id), and rows from real MATH files load into the same type.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from ade_core.engine.grading.boxed import last_boxed

SUBJECTS: tuple[str, ...] = (
    "Prealgebra",
    "Algebra",
    "Number Theory",
    "Counting & Probability",
    "Geometry",
    "Intermediate Algebra",
    "Precalculus",
)
LEVELS: tuple[int, ...] = (1, 2, 3, 4, 5)


@dataclass(frozen=True)
class MathProblem:
    """One problem with MATH's fields; ``solution`` is the worked reasoning without the final box."""

    problem: str
    solution: str
    answer: str
    subject: str
    level: int
    unique_id: str

    def to_json(self) -> dict[str, object]:
        return asdict(self)


def problem_key(text: str) -> str:
    """Normalized text used to keep splits disjoint (case and spacing do not make a new problem)."""
    return " ".join(text.lower().split())


def _id(subject: str, level: int, problem: str) -> str:
    digest = hashlib.sha256(f"{subject}|{level}|{problem}".encode()).hexdigest()[:12]
    return f"tiny/{subject.lower().replace(' & ', '-').replace(' ', '-')}/{level}/{digest}"


def _magnitude(level: int, scale: int) -> int:
    """Upper bound of operands: level 1 -> 9, 2 -> 20, 3 -> 50, 4 -> 99, 5 -> 200 (times the scale)."""
    return (9, 20, 50, 99, 200)[level - 1] * scale


# Worked steps. A small model learns arithmetic as single-digit facts, so multi-digit results are
# worked column by column inside brackets ("47+85=[7+5=12, 4+8+1=13]=132"); every step ends in
# "=<value>", and top-level steps are separated by "; ".
def _digits(n: int) -> list[int]:
    return [int(d) for d in reversed(str(n))]


def add(a: int, b: int) -> tuple[str, int]:
    """``a + b`` as one fact (single digits) or column by column with carries."""
    if a < 10 and b < 10:
        return f"{a}+{b}={a + b}", a + b
    da, db = _digits(a), _digits(b)
    columns, carry = [], 0
    for i in range(max(len(da), len(db))):
        terms = [da[i] if i < len(da) else 0, db[i] if i < len(db) else 0] + ([carry] if carry else [])
        total = sum(terms)
        columns.append("+".join(map(str, terms)) + f"={total}")
        carry = total // 10
    return f"{a}+{b}=[{', '.join(columns)}]={a + b}", a + b


def subtract(a: int, b: int) -> tuple[str, int]:
    """``a - b`` (a >= b) as one fact (a < 20, b < 10) or column by column with borrows."""
    if a < 20 and b < 10:
        return f"{a}-{b}={a - b}", a - b
    da, db = _digits(a), _digits(b)
    columns, borrow = [], 0
    for i, x in enumerate(da):
        y = db[i] if i < len(db) else 0
        need = x - borrow < y
        top = f"1{x}" if need else str(x)
        columns.append(top + (f"-{borrow}" if borrow else "") + f"-{y}={10 * need + x - borrow - y}")
        borrow = int(need)
    return f"{a}-{b}=[{', '.join(columns)}]={a - b}", a - b


def multiply(a: int, b: int) -> tuple[str, int]:
    """``a * b`` as one fact (both below 10, or both 10 or more: the hard levels) or a single digit
    times a longer number column by column."""
    if (a < 10 and b < 10) or (a >= 10 and b >= 10):
        return f"{a}*{b}={a * b}", a * b
    digit, other = (a, b) if a < 10 else (b, a)
    columns, carry = [], 0
    for d in _digits(other):
        value = digit * d + carry
        columns.append(f"{digit}*{d}" + (f"+{carry}" if carry else "") + f"={value}")
        carry = value // 10
    return f"{a}*{b}=[{', '.join(columns)}]={a * b}", a * b


def _steps(*steps: str) -> str:
    return "; ".join(steps)


Family = Callable[[random.Random, int, int, bool], tuple[str, str, int]]


def _prealgebra(rng: random.Random, level: int, scale: int, reworded: bool) -> tuple[str, str, int]:
    top = _magnitude(level, scale)
    a, b = rng.randint(1, top), rng.randint(1, top)
    if rng.random() < 0.5:
        text = f"Add {a} and {b}." if reworded else f"What is {a} + {b}?"
        step, value = add(a, b)
        return text, step, value
    a, b = max(a, b), min(a, b)
    text = f"Take {b} away from {a}." if reworded else f"What is {a} - {b}?"
    step, value = subtract(a, b)
    return text, step, value


def _small(level: int, scale: int) -> int:
    """Upper bound of a factor that stays a single digit on the in-loop levels (1-3)."""
    return (3 + 2 * level) * scale


def _algebra(rng: random.Random, level: int, scale: int, reworded: bool) -> tuple[str, str, int]:
    a = rng.randint(2, 2 + level)
    x = rng.randint(1, 9 if level <= 3 else _magnitude(level, scale) // 2) * (scale if level <= 3 else 1)
    b = rng.randint(1, _magnitude(level, scale))
    c = a * x + b
    text = f"Find x if {a}x plus {b} equals {c}." if reworded else f"Solve for x: {a}x + {b} = {c}."
    difference, _ = subtract(c, b)
    return text, _steps(f"{a}x={difference}", f"x={c - b}/{a}={x}"), x


def _number_theory(rng: random.Random, level: int, scale: int, reworded: bool) -> tuple[str, str, int]:
    b = rng.randint(2, min(9, 3 + 2 * level))
    # quotients stay single digits on the in-loop levels; the hard levels and wider numbers lift that
    top = 10 * b - 1 if level <= 3 and scale == 1 else _magnitude(level, scale) + b + 1
    a = rng.randint(b + 1, top)
    q, r = divmod(a, b)
    text = (
        f"Divide {a} by {b}. What is left over?" if reworded else f"What is the remainder when {a} is divided by {b}?"
    )
    product, _ = multiply(b, q)
    difference, _ = subtract(a, b * q)
    return text, _steps(product, difference), r


def _counting(rng: random.Random, level: int, scale: int, reworded: bool) -> tuple[str, str, int]:
    if rng.random() < 0.5:
        n = rng.randint(2, _small(level, scale) + 1)
        pairs = n * (n - 1) // 2
        text = (
            f"{n} players each shake hands once. How many handshakes?"
            if reworded
            else f"How many ways can 2 people be chosen from {n}?"
        )
        product, _ = multiply(n, n - 1)
        return text, _steps(product, f"{n * (n - 1)}/2={pairs}"), pairs
    a, b = rng.randint(2, _small(level, scale)), rng.randint(2, _magnitude(level, scale))
    text = (
        f"Pick one of {a} hats and one of {b} scarves. How many outfits?"
        if reworded
        else f"A menu has {a} soups and {b} salads. How many soup-and-salad meals are there?"
    )
    step, value = multiply(a, b)
    return text, step, value


def _geometry(rng: random.Random, level: int, scale: int, reworded: bool) -> tuple[str, str, int]:
    a, b = rng.randint(1, _small(level, scale)), rng.randint(1, _magnitude(level, scale))
    if rng.random() < 0.5:
        text = (
            f"Sides {a} and {b}: find the rectangle's area."
            if reworded
            else f"A rectangle is {a} by {b}. What is its area?"
        )
        step, value = multiply(a, b)
        return text, step, value
    text = (
        f"Sides {a} and {b}: find the rectangle's perimeter."
        if reworded
        else f"A rectangle is {a} by {b}. What is its perimeter?"
    )
    total, half = add(a, b)
    double, value = multiply(2, half)
    return text, _steps(total, double), value


def _intermediate(rng: random.Random, level: int, scale: int, reworded: bool) -> tuple[str, str, int]:
    x = rng.randint(1, 2 + level)
    b, c = rng.randint(1, min(9, 3 * level) * scale), rng.randint(1, _magnitude(level, scale))
    text = f"Compute x^2 + {b}x + {c} when x is {x}." if reworded else f"If f(x) = x^2 + {b}x + {c}, what is f({x})?"
    square, xx = multiply(x, x)
    linear, bx = multiply(b, x)
    partial, first = add(xx, bx)
    total, value = add(first, c)
    return text, _steps(square, linear, partial, total), value


def _precalculus(rng: random.Random, level: int, scale: int, reworded: bool) -> tuple[str, str, int]:
    top = _small(level, scale)
    a, b, c, d = (rng.randint(1, top) for _ in range(4))
    text = (
        f"Take the dot product of ({a}, {b}) and ({c}, {d})."
        if reworded
        else f"What is the dot product of ({a}, {b}) and ({c}, {d})?"
    )
    first, ac = multiply(a, c)
    second, bd = multiply(b, d)
    total, value = add(ac, bd)
    return text, _steps(first, second, total), value


FAMILIES: dict[str, Family] = dict(
    zip(
        SUBJECTS,
        (_prealgebra, _algebra, _number_theory, _counting, _geometry, _intermediate, _precalculus),
        strict=True,
    )
)


def make_problem(
    rng: random.Random, subject: str, level: int, *, scale: int = 1, reworded: bool = False
) -> MathProblem:
    """One problem of ``subject`` at ``level``; ``scale`` widens the number range (a distribution shift)."""
    text, solution, answer = FAMILIES[subject](rng, level, scale, reworded)
    return MathProblem(text, solution, str(answer), subject, level, _id(subject, level, text))


def generate_problems(
    count: int,
    seed: int,
    *,
    subjects: Sequence[str] = SUBJECTS,
    levels: Sequence[int] = LEVELS,
    level_weights: Sequence[float] | None = None,
    scale: int = 1,
    reworded: bool = False,
    distinct: bool = True,
) -> list[MathProblem]:
    """``count`` problems, distinct by normalized text unless ``distinct`` is False (a corpus drawn with
    replacement keeps the level mix even where a level has few distinct problems); deterministic in ``seed``."""
    rng = random.Random(seed)
    seen: set[str] = set()
    out: list[MathProblem] = []
    attempts = 0
    while len(out) < count:
        attempts += 1
        if attempts > count * 50:
            raise ValueError(f"cannot draw {count} distinct problems from subjects={subjects}, levels={levels}")
        subject = rng.choice(list(subjects))
        level = rng.choices(list(levels), weights=level_weights)[0]
        problem = make_problem(rng, subject, level, scale=scale, reworded=reworded)
        key = problem_key(problem.problem)
        if key not in seen or not distinct:
            seen.add(key)
            out.append(problem)
    return out


def load_math_rows(path: Path) -> list[MathProblem]:
    """Rows of a real MATH JSONL file (problem, solution, answer?, subject/type, level) as MathProblem."""
    problems = []
    for number, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        row = json.loads(line)
        answer = row.get("answer") or last_boxed(row.get("solution", ""))
        if answer is None:
            raise ValueError(f"{path}:{number}: no answer field and no boxed answer in the solution")
        level = row.get("level", 0)
        if isinstance(level, str):  # MATH writes "Level 3"
            level = int(level.split()[-1]) if level.split()[-1].isdigit() else 0
        subject = row.get("subject") or row.get("type", "")
        problem = row["problem"]
        problems.append(
            MathProblem(
                problem,
                row.get("solution", ""),
                str(answer),
                subject,
                int(level),
                row.get("unique_id") or _id(subject, int(level), problem),
            )
        )
    return problems


def write_jsonl(path: Path, rows: Iterable[dict[str, object]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
    return path
