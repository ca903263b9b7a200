"""Training backends (TRL): SFT for data selection, GRPO for reward design and curricula."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def skip_uninitialized_fill() -> None:
    """Keep deterministic algorithms on, but stop torch filling every fresh buffer with NaN.

    ``full_determinism`` (reproducible re-runs of a killed attempt on CPU) turns on
    ``torch.use_deterministic_algorithms``, which also fills each ``torch.empty`` result. TRL's
    chunked log-probability kernel allocates a 4,096-token scratch tile per step, so on the tiny
    world the fill alone took about 40% of SFT training time. The fill only changes results for
    code that reads memory it never wrote, which neither TRL's kernels nor ours do; re-runs stay
    bit-identical (tested).
    """
    import torch

    torch.utils.deterministic.fill_uninitialized_memory = False  # type: ignore[attr-defined]  # a torch setting its stubs do not declare


def step_reporter(report: Callable[[int, int], None]) -> Any:
    """A trainer callback calling ``report(step, total_steps)`` after every optimizer step (live progress)."""
    from transformers import TrainerCallback

    class StepReporter(TrainerCallback):
        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            report(int(state.global_step), int(state.max_steps))

    return StepReporter()
