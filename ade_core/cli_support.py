"""Helpers shared by the ``ade`` commands: loading 𝓑 (a file or a preset name), reading a strategy file."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from ade_core.errors import ConfigError, StrategyFailure


def load_checked(source: str, overrides: tuple[str, ...], *, local_paths: bool = False):
    """𝓑 from a file or a preset name, validated against the schema and the installed plugins; with
    ``local_paths`` it must also run here: every local path it names (model, data, benchmarks) exists,
    and the generation it asks for is installed (``check_generation``)."""
    from ade_core.config import check_against_plugins, check_generation, check_local_paths, load_config
    from ade_core.plugins import load_plugins

    registry = load_plugins()
    path = Path(source)
    if not path.exists():
        presets = {preset.name: preset.path for preset, _ in registry.presets()}
        if source in presets:
            path = Path(presets[source])
    loaded = load_config(path, overrides)
    check_against_plugins(loaded, registry)
    if local_paths:
        check_local_paths(loaded)
        check_generation(loaded.experiment, loaded.operational.generation)
    return loaded


def read_strategy(path: Path) -> str:
    """A strategy file's text; a file that is not UTF-8 is a typed error naming the byte offset
    (the sandbox's own reader, so `ade sandbox run` and `ade admit` say the same)."""
    from ade_sandbox import SandboxError
    from ade_sandbox.cli import read_source

    try:
        return read_source(path)
    except SandboxError as exc:
        raise StrategyFailure(str(exc)) from None


def claims(values: tuple[str, ...]) -> list[dict[str, Any]]:
    """--claim expressions parsed into declared accounts."""
    from ade_core.realization import parse_claim

    try:
        return [parse_claim(claim) for claim in values]
    except ValueError as exc:
        raise ConfigError(f"--claim: {exc}") from None


@contextlib.contextmanager
def ticking(what: str, limit_s: float, echo: Callable[[str], None], every_s: float = 5.0) -> Iterator[None]:
    """Print ``what: N s elapsed (limit L s per call)`` every ``every_s`` while the body runs silently."""
    done = threading.Event()
    started = time.monotonic()

    def tick() -> None:
        while not done.wait(every_s):
            echo(f"{what}: {time.monotonic() - started:.0f} s elapsed (limit {limit_s:g} s per call)")

    thread = threading.Thread(target=tick, daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()
