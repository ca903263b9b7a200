"""A local Ray cluster for the Ray executor's tests: a head and a second node process on loopback, started once
per test session and stopped after (``executors.ray.local_cluster``; docs/scale-out.md gives the same commands)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def ray_cluster():
    from ade_core.executors.ray import local_cluster

    with local_cluster(cpus=2, second_node={"second_node": 1}) as cluster:
        yield cluster
