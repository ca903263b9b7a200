"""Judge requests and their rubric: three written shapes, one model.

A rubric states observable criteria, the score levels each may take (in [0, 1]) and the weights
that aggregate them (summing to one). Strategies write it in any of three shapes, each normalised
to ``Rubric``: ``criteria[{name, description, levels, weight}]``, ``dimensions[{name, criterion,
levels, weight}]``, or the paper authors' ``projection.dimensions[{id, criterion, weight,
score_levels[{value, standard}]}]``; as an object or as its JSON string. A malformed request
raises ``InvalidServiceRequest`` naming the field and the fix: it is the strategy's error.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any, TypeGuard

from pydantic import Field

from ade_core.schemas.common import Model
from ade_sandbox import InvalidServiceRequest

WEIGHT_TOLERANCE = 1e-6
REQUEST_KEYS = ("question", "response", "rubric")
# Shape key -> (name key, criterion key) of its dimension entries.
SHAPES = {"criteria": ("name", "description"), "dimensions": ("name", "criterion")}


class Dimension(Model):
    """One rubric dimension: an observable criterion scored on a fixed ladder of levels."""

    name: str = Field(description="Dimension name, unique within the rubric; keys the scores.")
    criterion: str = Field(description="An observable criterion a reader can check in the response.")
    levels: tuple[float, ...] = Field(description="Allowed scores, at least two, each in [0, 1], ascending.")
    weight: float = Field(description="Share of the projected score, > 0; the rubric's weights sum to 1.")
    standards: tuple[str, ...] = Field(
        default=(), description="What each level means, aligned with levels (empty when the rubric gives none)."
    )

    def snap(self, value: float) -> float:
        """The allowed level nearest to ``value``; a tie goes to the lower level, so doubt never inflates."""
        return min(self.levels, key=lambda level: (abs(level - value), level))


class Rubric(Model):
    """What the judge scores: dimensions whose weights sum to one."""

    dimensions: tuple[Dimension, ...] = Field(description="Scored dimensions, at least one, names unique.")

    def project(self, scores: Mapping[str, float]) -> float:
        """The weighted sum of per-dimension scores."""
        return sum(d.weight * scores[d.name] for d in self.dimensions)


class JudgeRequest(Model):
    """One request: the question, the response to judge, and the rubric to judge it by."""

    question: str = Field(description="The user turn the response answers.")
    response: str = Field(description="The assistant turn to judge.")
    rubric: Rubric = Field(description="The normalised rubric.")


def _number(value: Any) -> TypeGuard[int | float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _text(entry: Mapping[str, Any], key: str, path: str, example: str) -> str:
    value = entry.get(key)
    if not isinstance(value, str) or not value.strip():
        raise InvalidServiceRequest(f"{path}.{key}", f"must be a non-empty string (got {value!r}); e.g. {example!r}")
    return value


def _levels(values: Any, path: str) -> tuple[float, ...]:
    if not isinstance(values, (list, tuple)) or not all(_number(v) for v in values):
        raise InvalidServiceRequest(path, f"must be a list of numbers in [0, 1] (got {values!r}); e.g. [0, 0.5, 1]")
    outside = [v for v in values if not 0 <= v <= 1]
    if outside:
        raise InvalidServiceRequest(path, f"levels must lie in [0, 1] (got {outside}); rescale them, e.g. [0, 0.5, 1]")
    if len(set(values)) != len(values) or len(values) < 2:
        raise InvalidServiceRequest(
            path, f"needs at least two distinct levels, none repeated (got {values}); e.g. [0, 1]"
        )
    return tuple(float(v) for v in values)


def _dimension(entry: Any, path: str, shape: str) -> Dimension:
    if not isinstance(entry, Mapping):
        raise InvalidServiceRequest(path, f"a dimension is an object (got {type(entry).__name__})")
    if shape == "projection":
        keys, name_key, criterion_key = ("id", "criterion", "weight", "score_levels"), "id", "criterion"
    else:
        name_key, criterion_key = SHAPES[shape]
        keys = (name_key, criterion_key, "levels", "weight")
    unknown = sorted(set(entry) - set(keys))
    if unknown:
        raise InvalidServiceRequest(f"{path}.{unknown[0]}", f"unknown field; a {shape} entry has {', '.join(keys)}")
    name = _text(entry, name_key, path, "correctness")
    criterion = _text(entry, criterion_key, path, "the boxed answer solves the question")
    standards: tuple[str, ...] = ()
    if shape == "projection":
        ladder = entry.get("score_levels")
        where = f"{path}.score_levels"
        if not isinstance(ladder, (list, tuple)) or not all(isinstance(s, Mapping) for s in ladder):
            raise InvalidServiceRequest(where, f"must be a list of {{value, standard}} (got {ladder!r})")
        for index, step in enumerate(ladder):
            if set(step) != {"value", "standard"}:
                raise InvalidServiceRequest(
                    f"{where}[{index}]", f"needs exactly value and standard (got {sorted(step)})"
                )
            _text(step, "standard", f"{where}[{index}]", "the answer is fully supported")
        levels = _levels([step["value"] for step in ladder], where)
        pairs = sorted(zip(levels, (str(step["standard"]) for step in ladder), strict=True))
        levels, standards = tuple(p[0] for p in pairs), tuple(p[1] for p in pairs)
    else:
        levels = tuple(sorted(_levels(entry.get("levels"), f"{path}.levels")))
    weight = entry.get("weight")
    if not _number(weight) or weight <= 0:
        raise InvalidServiceRequest(
            f"{path}.weight", f"must be a number > 0 (got {weight!r}); give it a share or drop it"
        )
    return Dimension(name=name, criterion=criterion, levels=levels, weight=float(weight), standards=standards)


def parse_rubric(value: Any, path: str = "rubric") -> Rubric:
    """The rubric in any accepted shape (or its JSON string), normalised; raises InvalidServiceRequest."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise InvalidServiceRequest(path, f"a string rubric must be JSON ({exc.msg} at {exc.pos})") from None
    if not isinstance(value, Mapping):
        raise InvalidServiceRequest(path, f"a rubric is an object or its JSON string (got {type(value).__name__})")
    found = [key for key in ("criteria", "dimensions", "projection") if key in value]
    if len(found) != 1:
        raise InvalidServiceRequest(
            path, f"needs exactly one of criteria, dimensions, projection.dimensions (got {sorted(value)})"
        )
    shape, entries, where = found[0], value[found[0]], f"{path}.{found[0]}"
    if shape == "projection":
        if not isinstance(entries, Mapping) or "dimensions" not in entries:
            raise InvalidServiceRequest(
                where, "must be an object with dimensions[{id, criterion, weight, score_levels}]"
            )
        entries, where = entries["dimensions"], f"{where}.dimensions"
    if not isinstance(entries, (list, tuple)) or not entries:
        raise InvalidServiceRequest(where, f"must be a non-empty list of dimensions (got {entries!r})")
    dimensions = tuple(_dimension(entry, f"{where}[{i}]", shape) for i, entry in enumerate(entries))
    names = [d.name for d in dimensions]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise InvalidServiceRequest(where, f"dimension names repeat {repeated}; give each its own name")
    total = sum(d.weight for d in dimensions)
    if abs(total - 1) > WEIGHT_TOLERANCE:
        weights = {d.name: d.weight for d in dimensions}
        raise InvalidServiceRequest(
            f"{where}[*].weight", f"weights must sum to 1 (got {total:.6g} from {weights}); divide each by {total:.6g}"
        )
    return Rubric(dimensions=dimensions)


def parse_request(value: Any, path: str = "request") -> JudgeRequest:
    """One ``{question, response, rubric}`` request, normalised; raises InvalidServiceRequest."""
    if not isinstance(value, Mapping):
        raise InvalidServiceRequest(
            path, f"a judge request is an object {{question, response, rubric}} (got {type(value).__name__})"
        )
    unknown = sorted(set(value) - set(REQUEST_KEYS))
    if unknown:
        raise InvalidServiceRequest(
            f"{path}.{unknown[0]}", "unknown field; a request has only question, response, rubric"
        )
    for key in ("question", "response"):
        if not isinstance(value.get(key), str):
            got = "missing" if key not in value else type(value[key]).__name__
            raise InvalidServiceRequest(f"{path}.{key}", f"must be a string (got {got}); add the {key} text")
    if "rubric" not in value:
        raise InvalidServiceRequest(f"{path}.rubric", "required field is missing; add the rubric")
    return JudgeRequest(
        question=value["question"], response=value["response"], rubric=parse_rubric(value["rubric"], f"{path}.rubric")
    )
