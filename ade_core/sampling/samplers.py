"""IID, Verbalized Sampling and Groot over any generation backend (seed 001, Sec 3).

Every sampler returns, per problem, ``budget`` responses to the original problem:

- ``iid``: ``budget`` independent samples of the plain prompt at the configured temperature;
- ``verbalized``: one planning call lists ``budget`` approaches with probabilities;
- ``groot``: one planning call writes a decision tree and ``budget`` root-to-leaf paths.

The two strategic samplers then execute each approach as a hidden instruction in its own call,
and drop (and count) a response that refers to its approach. Planning calls are counted apart and
do not spend the response budget, as in the seed. A malformed plan is a recorded outcome with its
raw text, never an error; a plan with fewer approaches than asked is a recorded ``shortfall`` whose
usable approaches are still executed.

Problems run in fixed chunks of the input order, one generation call per stage and chunk, each
with a seed drawn from the configured seed and the chunk's index, so a resumed run draws what an
uninterrupted one would.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from ade_core.engine.generation.base import Generator, Sample, SamplingParams
from ade_core.errors import AdeError
from ade_core.sampling import prompts
from ade_core.sampling.leakage import leak
from ade_core.sampling.plans import PlanReading, read_groot, read_verbalized

SamplerName = Literal["iid", "verbalized", "groot"]
SAMPLERS: tuple[SamplerName, ...] = ("iid", "verbalized", "groot")
Messages = list[dict[str, str]]


class SamplingError(AdeError):
    """Sampling cannot run as asked (an unknown sampler, a budget below 1, settings that changed on resume)."""


@dataclass(frozen=True)
class SamplingConfig:
    """How to sample. Values the seed does not state are ADE's defaults (see docs/strategic-sampling.md)."""

    sampler: SamplerName
    budget: int  # responses per problem (the seed's n: 4 or 8 for code)
    temperature: float = 1.0
    top_p: float = 1.0
    max_new_tokens: int = 512
    plan_temperature: float = 1.0
    plan_max_new_tokens: int = 1024
    seed: int = 0
    chunk: int = 8  # problems per generation call

    def __post_init__(self) -> None:
        if self.sampler not in SAMPLERS:
            raise SamplingError(f"unknown sampler {self.sampler!r}; choose one of {list(SAMPLERS)}")
        for name in ("budget", "max_new_tokens", "plan_max_new_tokens", "chunk"):
            if getattr(self, name) < 1:
                raise SamplingError(f"{name} = {getattr(self, name)} must be >= 1")
        for name in ("temperature", "plan_temperature"):
            if getattr(self, name) < 0:
                raise SamplingError(f"{name} = {getattr(self, name)} must be >= 0 (0: greedy)")
        if not 0 < self.top_p <= 1:
            raise SamplingError(f"top_p = {self.top_p} must be in (0, 1]")
        if self.seed < 0:
            raise SamplingError(f"seed = {self.seed} must be >= 0")

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Problem:
    """A problem to sample: its id, the text the planner and executor see, the reference answer, the
    original conversation (what a trained model is asked), and its domain (``math``, ``code``, ...)."""

    problem_id: str
    text: str
    reference: Any
    messages: Messages
    domain: str = "math"


@dataclass
class ProblemSamples:
    """One problem's outcome: its plan (strategic samplers), its responses and their grades."""

    problem_id: str
    sampler: SamplerName
    plan: dict[str, Any] | None
    samples: list[dict[str, Any]] = field(default_factory=list)

    @property
    def leaked(self) -> int:
        return sum(1 for sample in self.samples if sample["leak"] is not None)

    def kept(self) -> list[dict[str, Any]]:
        """The responses that may be trained on (none that refers to its approach)."""
        return [sample for sample in self.samples if sample["leak"] is None]

    def to_json(self) -> dict[str, Any]:
        return {"problem_id": self.problem_id, "sampler": self.sampler, "plan": self.plan, "samples": self.samples}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ProblemSamples:
        return cls(data["problem_id"], data["sampler"], data["plan"], list(data["samples"]))


def chunk_seed(seed: int, chunk_index: int) -> int:
    """The generation seed of one chunk: fixed by the configured seed and the chunk's place in the input."""
    return (seed * 1_000_003 + chunk_index) % 2**31


def _params(config: SamplingConfig, *, k: int, seed: int, plan: bool = False) -> SamplingParams:
    return SamplingParams(
        temperature=config.plan_temperature if plan else config.temperature,
        top_p=config.top_p,
        max_new_tokens=config.plan_max_new_tokens if plan else config.max_new_tokens,
        k=k,
        seed=seed,
    )


def _sample_record(index: int, sample: Sample, approach: Any = None) -> dict[str, Any]:
    return {
        "index": index,
        "approach": approach.text if approach is not None else None,  # hidden: never part of a training row
        "path": list(approach.path) if approach is not None else None,
        "probability": approach.probability if approach is not None else None,
        "response": sample.text,
        "tokens": sample.num_tokens,
        "finish_reason": sample.finish_reason,
        "leak": leak(sample.text) if approach is not None else None,
        "correct": None,
    }


def _plan_record(reading: PlanReading, sample: Sample) -> dict[str, Any]:
    return {
        "status": reading.status,
        "reason": reading.reason,
        "raw": reading.raw,
        "dropped": list(reading.dropped),
        "approaches": len(reading.approaches),
        "tokens": sample.num_tokens,  # planning tokens: counted apart from the response budget
        "finish_reason": sample.finish_reason,
    }


def sample_chunk(
    problems: Sequence[Problem],
    generator: Generator,
    config: SamplingConfig,
    chunk_index: int,
    grade: Callable[[list[tuple[str, Any]]], list[bool]] | None = None,
) -> list[ProblemSamples]:
    """Sample every problem of one chunk with ``config``'s sampler; grade the kept responses with ``grade``
    (``(response, reference)`` pairs in, correctness out) when given."""
    seed = chunk_seed(config.seed, chunk_index)
    if config.sampler == "iid":
        drawn = generator.generate([p.messages for p in problems], _params(config, k=config.budget, seed=seed))
        results = [
            ProblemSamples(p.problem_id, "iid", None, [_sample_record(i, s) for i, s in enumerate(samples)])
            for p, samples in zip(problems, drawn, strict=True)
        ]
    else:
        results = _strategic(problems, generator, config, seed)
    if grade is not None:
        _grade(problems, results, grade)
    return results


def _strategic(
    problems: Sequence[Problem], generator: Generator, config: SamplingConfig, seed: int
) -> list[ProblemSamples]:
    template = prompts.VERBALIZED_PLANNER if config.sampler == "verbalized" else prompts.GROOT_PLANNER
    read = read_verbalized if config.sampler == "verbalized" else read_groot
    planning = [
        [{"role": "user", "content": template.replace("{problem}", p.text).replace("{n}", str(config.budget))}]
        for p in problems
    ]
    plans = generator.generate(planning, _params(config, k=1, seed=seed, plan=True))
    readings = [read(samples[0].text, config.budget) for samples in plans]
    execute: list[Messages] = []
    owners: list[tuple[int, int]] = []  # (problem index, approach index) of each execution call
    for p_index, (problem, reading) in enumerate(zip(problems, readings, strict=True)):
        for a_index, approach in enumerate(reading.approaches):
            text = (
                prompts.EXECUTOR.replace("{problem}", problem.text)
                .replace("{approach}", approach.text)
                .replace("{answer_format}", prompts.answer_format(problem.domain))
            )
            execute.append([{"role": "user", "content": text}])
            owners.append((p_index, a_index))
    results = [
        ProblemSamples(p.problem_id, config.sampler, _plan_record(r, s[0]))
        for p, r, s in zip(problems, readings, plans, strict=True)
    ]
    if execute:
        drawn = generator.generate(execute, _params(config, k=1, seed=seed))
        for (p_index, a_index), samples in zip(owners, drawn, strict=True):
            approach = readings[p_index].approaches[a_index]
            results[p_index].samples.append(_sample_record(a_index, samples[0], approach))
    return results


def _grade(
    problems: Sequence[Problem],
    results: list[ProblemSamples],
    grade: Callable[[list[tuple[str, Any]]], list[bool]],
) -> None:
    pairs, where = [], []
    for problem, result in zip(problems, results, strict=True):
        for sample in result.samples:
            if sample["leak"] is None:
                pairs.append((sample["response"], problem.reference))
                where.append(sample)
    for sample, correct in zip(where, grade(pairs) if pairs else [], strict=True):
        sample["correct"] = bool(correct)


__all__ = [
    "SAMPLERS",
    "Problem",
    "ProblemSamples",
    "SamplerName",
    "SamplingConfig",
    "SamplingError",
    "chunk_seed",
    "sample_chunk",
]
