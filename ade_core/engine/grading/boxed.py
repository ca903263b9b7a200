"""Exact-match grading of the boxed answer; needs no optional dependency.

A response commits to one final answer. Boxes that disagree (``\\boxed{41} or maybe \\boxed{42}``,
a list of candidates) or a box that never closes leave no single answer, and score 0: otherwise a
policy could guess several answers at once and be paid for the right one.
"""

from __future__ import annotations

BOX = "\\boxed{"


def last_boxed(text: str) -> str | None:
    """Content of the last balanced ``\\boxed{...}`` in ``text``, or None."""
    start = text.rfind(BOX)
    if start < 0:
        return None
    depth = 1
    pos = start + len(BOX)
    for index in range(pos, len(text)):
        char = text[index]
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                return text[pos:index]
    return None


def boxed_answers(text: str) -> list[str] | None:
    """Contents of every top-level ``\\boxed{...}`` in order; None when one of them never closes."""
    answers: list[str] = []
    start = text.find(BOX)
    while start >= 0:
        depth = 1
        pos = start + len(BOX)
        for index in range(pos, len(text)):
            char = text[index]
            if char == "{":
                depth += 1
            elif char == "}":
                depth -= 1
                if depth == 0:
                    answers.append(text[pos:index])
                    break
        else:
            return None
        start = text.find(BOX, index + 1)
    return answers


def normalize(answer: str) -> str:
    """Strip spaces, dollar signs and a trailing period; drop thousands separators."""
    cleaned = answer.strip().strip("$").rstrip(".").replace(" ", "")
    if cleaned.replace(",", "").lstrip("-").isdigit():
        cleaned = cleaned.replace(",", "")
    return cleaned


def grade_boxed_exact(response: str, reference: str) -> bool:
    """True when the response has boxed answers, all of them closed, each equal to the reference after normalization."""
    answers = boxed_answers(response)
    if not answers:
        return False
    expected = normalize(reference)
    return all(normalize(answer) == expected for answer in answers)
