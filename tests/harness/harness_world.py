"""Dry runs of the tiny Data Selection config for Harness tests (the crash driver imports this file too)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ade_core.config import LoadedConfig, load_config
from ade_core.harness.roles import AgentReply
from ade_core.harness.run import SimulationSettings, drive_run, init_run
from ade_core.harness.scripted import ScriptedBackend
from ade_core.schemas.views import View
from ade_core.store import RunStore, state_digest

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "examples" / "tiny-data-selection.toml"


def config(coordinators: int = 3, plans: int = 2, trials: int = 1, extra: Iterable[str] = ()) -> LoadedConfig:
    """The tiny Data Selection config with a small research budget."""
    return load_config(
        CONFIG,
        [
            f"budget.coordinators={coordinators}",
            f"budget.plans_per_coordinator={plans}",
            f"budget.trials_per_plan={trials}",
            *extra,
        ],
    )


def dry_run(
    run_dir: Path,
    loaded: LoadedConfig | None = None,
    *,
    backend: Any = None,
    simulation: SimulationSettings | None = None,
    registry: Any = None,
) -> str:
    """Initialize and drive a dry run; return its final phase."""
    init_run(run_dir, loaded or config(), dry_run=True, simulation=simulation, registry=registry)
    return drive_run(run_dir, backend=backend, registry=registry)


def digest_of(run_dir: Path) -> str:
    with RunStore.open(run_dir) as store:
        return state_digest(store)


def models(run_dir: Path, kind: str) -> list[Any]:
    with RunStore.open(run_dir) as store:
        return [doc.model() for doc in store.list(kind)]  # type: ignore[arg-type]


class RecordingBackend(ScriptedBackend):
    """The scripted policy, keeping every view it was shown (as JSON text) by role."""

    def __init__(self, **kwargs: Any):
        super().__init__(**kwargs)
        self.views: dict[str, list[str]] = {}

    async def deliver(self, role: str, view: View) -> AgentReply:
        self.views.setdefault(role, []).append(view.model_dump_json())
        return await super().deliver(role, view)
