"""The contract every generation backend meets: sampling settings in, k samples per conversation out.

Evaluation (paper Appendix D.5) draws k samples per problem at temperature 0.6 and top-p 0.95;
the backends (Hugging Face, vLLM, an OpenAI-compatible server) differ only in where the model
runs, so the Engine talks to them through :class:`Generator`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

from ade_core.errors import AdeError

if TYPE_CHECKING:
    from ade_core.schemas.config import DecodingConfig

FinishReason = Literal["stop", "length"]
Conversation = Sequence[dict[str, str]]


class GenerationError(AdeError):
    """A backend could not produce the requested samples."""


@dataclass(frozen=True)
class SamplingParams:
    """How to sample: the decoding settings plus how many samples per prompt and the seed."""

    temperature: float
    top_p: float
    max_new_tokens: int
    k: int
    seed: int

    def __post_init__(self) -> None:
        if self.temperature < 0:
            raise ValueError(f"temperature must be >= 0 (0 means greedy), got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {self.max_new_tokens}")
        if self.k < 1:
            raise ValueError(f"k (samples per prompt) must be >= 1, got {self.k}")
        if self.seed < 0:
            raise ValueError(f"seed must be >= 0, got {self.seed}")

    @property
    def greedy(self) -> bool:
        """True when decoding is deterministic argmax (temperature 0), so all k samples are equal."""
        return self.temperature == 0

    @classmethod
    def from_decoding(cls, decoding: DecodingConfig, *, k: int, seed: int) -> SamplingParams:
        """Sampling settings of the frozen configuration's [evaluation.decoding] table."""
        return cls(
            temperature=decoding.temperature,
            top_p=decoding.top_p,
            max_new_tokens=decoding.max_new_tokens,
            k=k,
            seed=seed,
        )


@dataclass(frozen=True)
class Sample:
    """One generated response: its text, how many tokens it took, and why it ended."""

    text: str
    num_tokens: int
    finish_reason: FinishReason


@runtime_checkable
class Generator(Protocol):
    """A loaded model that turns chat conversations into k sampled responses each."""

    def generate(self, conversations: Sequence[Conversation], params: SamplingParams) -> list[list[Sample]]:
        """Sample ``params.k`` responses per conversation, returned in input order.

        Each conversation is a list of ``{"role", "content"}`` messages, rendered with the
        model's chat template and ``add_generation_prompt=True``.
        """
        ...

    def close(self) -> None:
        """Release the model (memory, GPU, worker threads); the generator is unusable afterwards."""
        ...


def strip_suffix(text: str, suffixes: Sequence[str]) -> str:
    """Drop one trailing stop-token text (e.g. ``<|im_end|>``) that a backend left in a response."""
    for suffix in suffixes:
        if suffix and text.endswith(suffix):
            return text[: -len(suffix)]
    return text


def render_conversation(
    tokenizer: object, conversation: Conversation, template_kwargs: Mapping[str, Any] | None = None
) -> str:
    """Render chat messages into the prompt text the model continues, with the tokenizer's own template
    (``template_kwargs``, [model].chat_template_kwargs, are passed to it as template variables)."""
    if not getattr(tokenizer, "chat_template", None):
        name = getattr(tokenizer, "name_or_path", "") or type(tokenizer).__name__
        raise GenerationError(
            f"tokenizer {name!r} has no chat template; set tokenizer.chat_template (e.g. from "
            "ade_core.engine.tiny_lm.CHAT_TEMPLATE) and save it with the model"
        )
    rendered = tokenizer.apply_chat_template(  # type: ignore[attr-defined]  # the tokenizer protocol leaves chat templates out
        [dict(message) for message in conversation],
        tokenize=False,
        add_generation_prompt=True,
        **(template_kwargs or {}),
    )
    return str(rendered)
