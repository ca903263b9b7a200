"""Which sampled responses become training data (seed 001, Sec 4.2): RFT, SFT and ANTI.

- ``rft`` keeps the correct responses;
- ``sft`` keeps a random subset of every kept response, as many as RFT keeps by default (the seed
  matches SFT's dataset size to RFT's), or ``size`` when given;
- ``anti`` keeps only incorrect responses: all of them, or ``size`` of them (matched to RFT with
  ``match_rft``); for continuous scores, the worst ``size``.

Responses that refer to their hidden approach were dropped at sampling and never reach a filter.
The result is the SFT candidate format the Engine trains on (``candidate_id``, ``problem_id``,
``trajectories`` of messages): the original conversation and the response, never the approach.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from ade_core.sampling.samplers import ProblemSamples, SamplingError

FilterName = Literal["rft", "sft", "anti"]
FILTERS: tuple[FilterName, ...] = ("rft", "sft", "anti")

Kept = tuple[ProblemSamples, dict[str, Any]]


def _score(sample: Mapping[str, Any]) -> float:
    score = sample.get("score")
    if score is not None:
        return float(score)
    return 1.0 if sample["correct"] else 0.0


def select(
    records: Sequence[ProblemSamples],
    how: FilterName,
    *,
    size: int | None = None,
    match_rft: bool = False,
    seed: int = 0,
) -> list[Kept]:
    """The (problem, response) pairs ``how`` keeps, in record order."""
    if how not in FILTERS:
        raise SamplingError(f"unknown filter {how!r}; choose one of {list(FILTERS)}")
    if size is not None and size < 0:
        raise SamplingError(f"size = {size} must be >= 0")
    kept = [(record, sample) for record in records for sample in record.kept()]
    ungraded = [record.problem_id for record, sample in kept if sample["correct"] is None and "score" not in sample]
    if ungraded:
        raise SamplingError(
            f"{len(ungraded)} responses are not graded (e.g. {ungraded[0]!r}); the {how} filter needs grades — "
            "sample with a grader (the config's in-loop benchmark grader)"
        )
    correct = [pair for pair in kept if pair[1]["correct"]]
    target = len(correct) if size is None and (how == "sft" or match_rft) else size
    if how == "rft":
        return correct if target is None else _subset(correct, target, seed)
    if how == "sft":
        return _subset(kept, target if target is not None else len(kept), seed)
    wrong = [pair for pair in kept if not pair[1]["correct"]]
    if target is None or target >= len(wrong):
        return wrong
    if any("score" in sample for _, sample in wrong):  # continuous: the worst ones
        order = sorted(range(len(wrong)), key=lambda i: (_score(wrong[i][1]), i))
        return [wrong[i] for i in sorted(order[:target])]
    return _subset(wrong, target, seed)


def _subset(pairs: list[Kept], size: int, seed: int) -> list[Kept]:
    """``size`` of ``pairs`` drawn at random with ``seed``, kept in their original order."""
    if size >= len(pairs):
        return list(pairs)
    chosen = sorted(random.Random(seed).sample(range(len(pairs)), size))
    return [pairs[i] for i in chosen]


def candidates(
    pairs: Sequence[Kept], messages: Mapping[str, list[dict[str, str]]], domain: str = "math"
) -> list[dict[str, Any]]:
    """The kept pairs as SFT candidate rows: one row per problem, one trajectory per response."""
    rows: dict[str, dict[str, Any]] = {}
    for record, sample in pairs:
        row = rows.setdefault(
            record.problem_id,
            {
                "candidate_id": f"{record.sampler}:{record.problem_id}",
                "domain": domain,
                "problem_id": record.problem_id,
                "trajectories": [],
            },
        )
        conversation = [*messages[record.problem_id], {"role": "assistant", "content": sample["response"]}]
        row["trajectories"].append(
            {
                "trajectory_id": f"{row['candidate_id']}:{sample['index']}",
                "messages": conversation,
                "token_count": sample["tokens"],
                "correct": sample["correct"],
            }
        )
    return list(rows.values())


__all__ = ["FILTERS", "FilterName", "candidates", "select"]
