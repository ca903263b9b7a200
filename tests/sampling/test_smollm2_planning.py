"""A real small model plans: one Verbalized Sampling and one Groot planning call with SmolLM2-135M, end to end.

A 135M model rarely writes a well-formed plan, and 64 tokens (at about 7 decode steps a second on
2 cores) cut most plans short; whatever it writes must come back as a recorded outcome with its raw
text (ok, shortfall or malformed), its usable approaches executed, never an exception.
"""

from __future__ import annotations

import pytest

from ade_core.engine import bundled
from ade_core.engine.generation import make_generator
from ade_core.sampling.samplers import Problem, SamplingConfig, sample_chunk

PROBLEM = Problem(
    "smoke-1",
    "A rectangle is 5 by 23. What is its perimeter?",
    "56",
    [{"role": "user", "content": "A rectangle is 5 by 23. What is its perimeter?"}],
)


@pytest.fixture(scope="module")
def smollm2():
    generator = make_generator("hf", bundled.materialize("smollm2"))
    yield generator
    generator.close()


@pytest.mark.parametrize("sampler", ["verbalized", "groot"])
def test_smollm2_plans_and_every_outcome_is_typed(sampler, smollm2):
    config = SamplingConfig(sampler=sampler, budget=2, max_new_tokens=8, plan_max_new_tokens=64, seed=1)
    (result,) = sample_chunk([PROBLEM], smollm2, config, 0, grade=lambda pairs: [False] * len(pairs))
    plan = result.plan
    assert plan is not None and plan["status"] in ("ok", "shortfall", "malformed")
    assert plan["raw"] and plan["tokens"] > 0  # the model's own text, kept whatever it is
    assert (plan["status"] == "malformed") == (plan["approaches"] == 0)
    assert len(result.samples) == plan["approaches"] <= 2
    assert all(s["tokens"] > 0 and (s["leak"] is not None or s["correct"] is False) for s in result.samples)
