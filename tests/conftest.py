"""Shared fixtures: fake installed distributions with real entry points, and one local Ray cluster per session."""

from __future__ import annotations

import importlib
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples"


@pytest.fixture
def install_fake_plugin(tmp_path, monkeypatch):
    """Install a throwaway distribution: a module plus dist-info with an `ade` entry point.

    importlib.metadata finds it on sys.path exactly as it finds a pip-installed one.
    """
    root = tmp_path / "site"
    root.mkdir()
    monkeypatch.syspath_prepend(str(root))
    created: list[str] = []

    def install(dist: str, module: str, source: str, version: str = "1.2.3", ep_name: str | None = None) -> None:
        (root / f"{module}.py").write_text(textwrap.dedent(source))
        info = root / f"{dist.replace('-', '_')}-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
        (info / "entry_points.txt").write_text(f"[ade]\n{ep_name or module} = {module}\n")
        created.append(module)
        importlib.invalidate_caches()

    yield install
    for module in created:
        sys.modules.pop(module, None)


@pytest.fixture(scope="session")
def ray_cluster():
    """A head and a second node process on loopback, started once per session for every Ray test and stopped
    after (``executors.ray.local_cluster``; docs/scale-out.md gives the same commands)."""
    from ade_core.executors.ray import local_cluster

    with local_cluster(cpus=2, second_node={"second_node": 1}) as cluster:
        yield cluster
