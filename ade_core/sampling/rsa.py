"""Recursive Self-Aggregation (seed 001, Sec 4.3): test-time scaling from a model's own population.

Per problem, a population of ``population`` responses is drawn from the plain prompt; each of
``iterations`` rounds replaces it with as many children, each the model's aggregation of ``subset``
members of the previous population drawn without replacement. The score is pass@1 of the final
population (the share of its members that are correct), averaged over problems, then over
``runs`` independent runs. The same model does every stage. Every member records its parents, so
the population's bookkeeping can be checked: each round keeps the population's size, and every
child names ``subset`` distinct members of the round before.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from ade_core.engine.generation.base import Generator, SamplingParams
from ade_core.sampling import prompts
from ade_core.sampling.samplers import Problem, SamplingError

AGGREGATE = """Here is a problem and {count} candidate solutions to it. Some may be wrong.

PROBLEM:
{problem}

{candidates}

Combine what is useful in them into one better solution, reasoning carefully; where they disagree, \
work out which is right, and if none is right, try another way.{answer_format}"""

REFINE = """Here is a problem and a candidate solution to it, which may be wrong.

PROBLEM:
{problem}

{candidates}

Check it and write an improved solution, reasoning carefully; if it is wrong, try another way.\
{answer_format}"""


@dataclass(frozen=True)
class RSAConfig:
    """The seed's settings by default: population 16, subsets of 4, 10 rounds, 3 runs."""

    population: int = 16
    subset: int = 4
    iterations: int = 10
    runs: int = 3
    temperature: float = 1.0
    top_p: float = 1.0
    max_new_tokens: int = 512
    seed: int = 0
    prompt: str | None = None  # an aggregation template of one's own ({problem}, {candidates}, {count})

    def __post_init__(self) -> None:
        if self.prompt is not None and not all(f in self.prompt for f in ("{problem}", "{candidates}")):
            raise SamplingError("an RSA prompt template needs {problem} and {candidates} (and may use {count})")
        for name in ("population", "subset", "runs", "max_new_tokens"):
            if getattr(self, name) < 1:
                raise SamplingError(f"rsa {name} = {getattr(self, name)} must be >= 1")
        if self.iterations < 0:
            raise SamplingError(f"rsa iterations = {self.iterations} must be >= 0")
        if self.subset > self.population:
            raise SamplingError(
                f"rsa subset = {self.subset} exceeds the population ({self.population}): a child aggregates distinct "
                "members of the population before it"
            )

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def aggregation_prompt(problem: Problem, candidates: Sequence[str], template: str | None = None) -> str:
    """The prompt that asks for one child of ``candidates`` (refinement when there is only one), in ADE's
    wording or ``template``'s."""
    shown = "\n\n".join(f"CANDIDATE {i + 1}:\n{text}" for i, text in enumerate(candidates))
    template = template or (REFINE if len(candidates) == 1 else AGGREGATE)
    return (
        template.replace("{count}", str(len(candidates)))
        .replace("{problem}", problem.text)
        .replace("{candidates}", shown)
        .replace("{answer_format}", prompts.answer_format(problem.domain))
    )


def run_rsa(
    problems: Sequence[Problem],
    generator: Generator,
    config: RSAConfig,
    grade: Callable[[list[tuple[str, Any]]], list[bool]],
) -> dict[str, Any]:
    """RSA over ``problems``: pass@1 per round and at the end, per run and averaged; every member's lineage."""
    if not problems:
        raise SamplingError("RSA over no problems: the problem set is empty")
    runs: list[dict[str, Any]] = []
    for run in range(config.runs):
        seed = config.seed * 1_000_003 + run * 10_007

        def draw(conversations: list[list[dict[str, str]]], round_: int, k: int, seed: int = seed) -> list[Any]:
            params = SamplingParams(config.temperature, config.top_p, config.max_new_tokens, k, seed + round_)
            return generator.generate(conversations, params)

        first = draw([p.messages for p in problems], 0, config.population)
        populations = [[{"text": s.text, "parents": []} for s in samples] for samples in first]
        by_round = [_pass_at_1(problems, populations, grade)]
        for round_ in range(1, config.iterations + 1):
            rng = random.Random(seed + round_)
            asks, lineage = [], []
            for problem, members in zip(problems, populations, strict=True):
                for _ in range(config.population):
                    parents = sorted(rng.sample(range(len(members)), config.subset))
                    candidates = [members[i]["text"] for i in parents]
                    asks.append([{"role": "user", "content": aggregation_prompt(problem, candidates, config.prompt)}])
                    lineage.append(parents)
            children = draw(asks, round_, 1)
            populations = [
                [
                    {"text": children[p * config.population + j][0].text, "parents": lineage[p * config.population + j]}
                    for j in range(config.population)
                ]
                for p in range(len(problems))
            ]
            by_round.append(_pass_at_1(problems, populations, grade))
        runs.append({"pass@1_by_round": by_round, "pass@1": by_round[-1], "populations": populations})
    return {
        "config": config.to_json(),
        "pass@1": sum(run["pass@1"] for run in runs) / len(runs),
        "runs": runs,
    }


def _pass_at_1(
    problems: Sequence[Problem], populations: list[list[dict[str, Any]]], grade: Callable[..., list[bool]]
) -> float:
    """Percentage of correct members, averaged over problems (marks each member's ``correct``)."""
    pairs = [(member["text"], problem.reference) for problem, members in zip(problems, populations, strict=True)
             for member in members]  # fmt: skip
    verdicts = iter(grade(pairs))
    shares = []
    for members in populations:
        for member in members:
            member["correct"] = bool(next(verdicts))
        shares.append(sum(1 for member in members if member["correct"]) / len(members))
    return 100.0 * sum(shares) / len(shares)


__all__ = ["RSAConfig", "aggregation_prompt", "run_rsa"]
