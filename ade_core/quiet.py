"""Keeps third-party chatter (progress bars, advisory warnings) out of ADE's command output."""

from __future__ import annotations


def quiet_libraries() -> None:
    """Silence Hugging Face progress bars and advisories (set only where the user has not chosen)."""
    import os

    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
