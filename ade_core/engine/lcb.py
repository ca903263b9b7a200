"""LiveCodeBench rows as code benchmark rows (problem text + the tests the code grader runs).

LiveCodeBench's code-generation files hold ``question_id``, ``question_content``, ``starter_code``,
``public_test_cases`` and ``private_test_cases`` (JSON text; in the released files the private
tests are base64 + zlib + a pickled JSON string) and ``metadata`` (JSON text; ``func_name`` for
functional tests). Stdin tests become ``{"stdin", "expected_stdout"}``; functional tests (one
JSON argument per input line) become ``{"args", "expected"}`` under ``fn_name``.
"""

from __future__ import annotations

import base64
import io
import json
import pickle
import zlib
from collections.abc import Mapping
from typing import Any

from ade_core.engine.model import EngineError


class _StringsOnly(pickle.Unpickler):
    """The private tests are a pickled *string*; refuse anything that would import or call code."""

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"refusing to load {module}.{name} from a test-case blob")


def _tests_text(value: Any, where: str) -> list[dict[str, Any]]:
    if isinstance(value, list):
        return value
    if not isinstance(value, str) or not value.strip():
        return []
    try:
        return json.loads(value)
    except ValueError:
        pass
    try:
        text = _StringsOnly(io.BytesIO(zlib.decompress(base64.b64decode(value)))).load()
        return json.loads(text)
    except Exception as exc:  # any decoding failure is a malformed row
        raise EngineError(f"{where}: test cases are neither JSON nor LiveCodeBench's compressed form ({exc})") from None


def is_livecodebench(row: Mapping[str, Any]) -> bool:
    return "question_content" in row and ("public_test_cases" in row or "private_test_cases" in row)


def from_livecodebench(row: Mapping[str, Any], where: str = "row") -> dict[str, Any]:
    """One LiveCodeBench row as a benchmark row for the ``code_tests`` grader."""
    cases = _tests_text(row.get("public_test_cases"), where) + _tests_text(row.get("private_test_cases"), where)
    if not cases:
        raise EngineError(f"{where}: LiveCodeBench row {row.get('question_id')!r} has no test cases")
    metadata = row.get("metadata") or {}
    if isinstance(metadata, str):
        metadata = json.loads(metadata) if metadata.strip() else {}
    problem = str(row["question_content"])
    if row.get("starter_code"):
        problem += f"\n\nStart from:\n```python\n{row['starter_code']}\n```"
    out: dict[str, Any] = {"problem_id": str(row.get("question_id") or row.get("id")), "problem": problem}
    if all(case.get("testtype", "stdin") == "stdin" for case in cases):
        out["tests"] = [{"stdin": c["input"], "expected_stdout": c["output"]} for c in cases]
        return out
    name = metadata.get("func_name")
    if not name:
        raise EngineError(f"{where}: functional LiveCodeBench tests need metadata.func_name")
    out["fn_name"] = name
    out["tests"] = [
        {
            "args": [json.loads(line) for line in c["input"].splitlines() if line.strip()],
            "expected": json.loads(c["output"]),
        }
        for c in cases
    ]
    return out
