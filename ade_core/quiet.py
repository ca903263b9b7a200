"""Keeps third-party chatter (progress bars, advisory and deprecation warnings) out of ADE's command output."""

from __future__ import annotations

import warnings

# Warnings raised from ADE's own modules stay visible; everything a library says about its own future does not.
_THIRD_PARTY = r"(?!ade_core|ade_sandbox|ade_task_)"


def quiet_libraries() -> None:
    """Silence Hugging Face progress bars and advisories (set only where the user has not chosen), and
    third-party deprecation, future and user warnings in this process and the processes it starts."""
    import os

    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("PYTHONWARNINGS", "ignore::DeprecationWarning,ignore::FutureWarning")
    for category in (DeprecationWarning, FutureWarning, PendingDeprecationWarning, UserWarning):
        warnings.filterwarnings("ignore", category=category, module=_THIRD_PARTY)
