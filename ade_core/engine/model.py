"""Loading the target model and preparing its tokenizer (special tokens, chat template)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ade_core.errors import AdeError, EnvironmentProblem


class EngineError(AdeError):
    """The Engine cannot run a command as given (bad command, data, model or settings)."""


class EngineInputMissing(EngineError, EnvironmentProblem):
    """A model or data file the command names is not on this machine (exit 3: the machine's, not the command's)."""


@dataclass(frozen=True)
class PreparedModel:
    """A model and tokenizer ready for training, and what preparing them changed."""

    model: Any
    tokenizer: Any
    added_tokens: tuple[str, ...]


def load_for_training(path: str | Path, special_tokens: tuple[str, ...], dtype: str = "float32") -> PreparedModel:
    """Load the base model; add missing special tokens and resize the embeddings (paper Appendix D.3)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = Path(path)
    if not (path / "config.json").is_file():
        raise EngineInputMissing(
            f"no model at {path} (config.json missing); point [model].target at a local model directory"
        )
    tokenizer = AutoTokenizer.from_pretrained(path)
    if tokenizer.chat_template is None:
        raise EngineError(f"tokenizer at {path} has no chat template; ADE renders every example with it")
    vocab = tokenizer.get_vocab()
    missing = tuple(token for token in special_tokens if token not in vocab)
    if missing:
        tokenizer.add_tokens(list(missing), special_tokens=True)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=getattr(torch, dtype))
    rows = model.get_input_embeddings().weight.shape[0]  # type: ignore[index]  # torch types a Module attribute as Tensor | Module
    if missing or rows < len(tokenizer):
        model.resize_token_embeddings(len(tokenizer))
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return PreparedModel(model, tokenizer, missing)
