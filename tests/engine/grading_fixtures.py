"""Module-level graders for the grading-pool tests: workers import them by reference."""

from __future__ import annotations

import os
import time
from typing import Any


def slow_when_asked(response: str, reference: Any) -> bool:
    """Correct when response equals reference; sleeps far past any test timeout when the response is 'sleep'."""
    if response == "sleep":
        time.sleep(60)
    return response == reference


def raise_when_asked(response: str, reference: Any) -> bool:
    """Correct when response equals reference; raises when the response is 'raise'."""
    if response == "raise":
        raise RuntimeError("grader exploded on purpose")
    return response == reference


def exit_when_asked(response: str, reference: Any) -> bool:
    """Correct when response equals reference; ends its own process when the response is 'exit'."""
    if response == "exit":
        os._exit(3)
    return response == reference
