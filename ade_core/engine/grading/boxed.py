"""Exact-match grading of the last ``\\boxed{...}`` answer; needs no optional dependency."""

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


def normalize(answer: str) -> str:
    """Strip spaces, dollar signs and a trailing period; drop thousands separators."""
    cleaned = answer.strip().strip("$").rstrip(".").replace(" ", "")
    if cleaned.replace(",", "").lstrip("-").isdigit():
        cleaned = cleaned.replace(",", "")
    return cleaned


def grade_boxed_exact(response: str, reference: str) -> bool:
    """True when the response's last boxed answer equals the reference after normalization."""
    answer = last_boxed(response)
    return answer is not None and normalize(answer) == normalize(reference)
