"""LiveCodeBench-format benchmark files: conversion, safe decoding, and real grading in the sandbox."""

from __future__ import annotations

import base64
import json
import os
import pickle
import zlib
from pathlib import Path

import pytest

from ade_core.engine import data
from ade_core.engine.grading.code import grade_code
from ade_core.engine.lcb import from_livecodebench
from ade_core.engine.model import EngineError

FIXTURE = Path(__file__).resolve().parents[2] / "examples" / "data" / "lcb_fixture.jsonl"
SOLUTIONS = {
    "lcb-fixture-1": "a, b = map(int, input().split())\nprint(a + b)",
    "lcb-fixture-2": "print(input()[::-1])",
    "lcb-fixture-3": "input()\nprint(sum(int(x) % 2 == 0 for x in input().split()))",
}


def test_the_fixture_converts_public_and_compressed_private_tests():
    rows = data.benchmark_rows(FIXTURE)
    assert [r["problem_id"] for r in rows] == list(SOLUTIONS)
    assert [len(r["tests"]) for r in rows] == [3, 3, 2]
    assert rows[0]["tests"][2] == {"stdin": "100 200\n", "expected_stdout": "300\n"}


@pytest.mark.parametrize("row", data.benchmark_rows(FIXTURE), ids=lambda r: r["problem_id"])
def test_solutions_pass_and_wrong_programs_fail_in_the_sandbox(row):
    reference = data.reference_of(row)
    assert grade_code(f"<think>plan</think>\n```python\n{SOLUTIONS[row['problem_id']]}\n```", reference)
    assert not grade_code("<think>plan</think>\n```python\nprint(0)\n```", reference)
    assert not grade_code("no code at all", reference)


def test_functional_tests_map_to_function_calls():
    row = {
        "question_id": "f1",
        "question_content": "Return the sum of a list plus k.",
        "starter_code": "def add(xs, k):",
        "public_test_cases": json.dumps([{"input": "[1, 2]\n3", "output": "6", "testtype": "functional"}]),
        "metadata": json.dumps({"func_name": "add"}),
    }
    converted = from_livecodebench(row)
    assert converted["fn_name"] == "add" and converted["tests"] == [{"args": [[1, 2], 3], "expected": 6}]
    assert "def add(xs, k):" in converted["problem"]
    assert grade_code("```python\ndef add(xs, k):\n    return sum(xs) + k\n```", data.reference_of(converted))


class _Exploit:
    def __reduce__(self):
        return (os.system, ("echo pwned",))


def test_a_pickle_that_would_call_code_is_refused():
    blob = base64.b64encode(zlib.compress(pickle.dumps(_Exploit()))).decode()
    row = {"question_id": "x", "question_content": "q", "public_test_cases": "", "private_test_cases": blob}
    with pytest.raises(EngineError, match="refusing to load"):
        from_livecodebench(row)
