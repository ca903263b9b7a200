"""Fixtures: a real OpenAI-compatible server per test, and dry runs of the tiny config against it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from chat_server import ChatServer

from ade_core.config import LoadedConfig, load_config
from ade_core.harness.run import drive_run, init_run
from ade_core.harness.status import run_status
from ade_core.store import RunStore

CONFIG = Path(__file__).resolve().parents[2] / "examples" / "tiny-data-selection.toml"


@pytest.fixture
def chat_server() -> Iterator[Any]:
    """``chat_server(**options)`` starts a server (see ``ServerState``); all stop after the test."""
    started: list[ChatServer] = []

    def start(**options: Any) -> ChatServer:
        server = ChatServer(**options).__enter__()
        started.append(server)
        return server

    yield start
    for server in started:
        server.__exit__(None, None, None)


def openai_config(url: str, *extra: str, coordinators: int = 1, plans: int = 1) -> LoadedConfig:
    """The tiny Data Selection config, every role on the test server, quick retries."""
    return load_config(
        CONFIG,
        [
            f"budget.coordinators={coordinators}",
            f"budget.plans_per_coordinator={plans}",
            "agents.backend='openai'",
            f"agents.base_url='{url}'",
            "agents.backoff_s=0.01",
            "agents.timeout_s=10",
            *extra,
        ],
    )


def dry_run(run_dir: Path, loaded: LoadedConfig) -> dict[str, Any]:
    """Initialize and drive a dry run; return its ``ade status --json`` data."""
    init_run(run_dir, loaded, dry_run=True)
    drive_run(run_dir)
    with RunStore.open(run_dir) as store:
        return run_status(store)
