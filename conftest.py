"""How the whole suite is scheduled: the cost markers, the pytest-xdist work units and the order they start in.

``make test`` runs the suite on every core (``pytest -n auto --dist loadscope --no-loadscope-reorder``). Tests
that share an expensive fixture must run on one worker, or each worker builds the fixture again, so a work unit
is a whole module (its module-scoped fixtures), and modules whose tests share one of this repository's
session-scoped fixtures (an end-to-end Run, the local Ray cluster) form one unit, named in ``SHARED_UNITS``.
Every worker checks that table against the fixtures its tests really use and stops the session, naming the
module and the fixture, when a new test would make a unit build a session fixture that another one builds too.

Units that hold end-to-end Runs start first, then those with whole Trials and benchmarks, so that no long
unit is left to run alone at the end: each worker sorts its collection by unit cost, and the controller's
scheduler hands units out in that order.

Markers (``make test-fast`` deselects all three):

- ``e2e``: a whole Run through ``ade run`` (minutes each);
- ``trial``: a whole Trial or Engine attempt that trains and evaluates (tens of seconds);
- ``benchmark``: a script in ``benchmarks/`` run in its quick mode.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from typing import Any

import pytest

# Two Engines (or an Engine and a test that trains in-process) on two cores: GNU OpenMP threads that spin
# while they wait take the core the other process needs. Measured on the 2-core machine with one tiny-world
# Data Selection attempt: alone 44 s; two at once 468 s each when threads spin, 69 s for both when waiting
# threads sleep. Set before torch is imported anywhere in the session; workers and Engines inherit it.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

COST_MARKERS = {"e2e": 100, "trial": 10, "benchmark": 10}  # rough weight of one test, for ordering only

# Modules that share a session-scoped fixture run as one unit, on one worker.
SHARED_UNITS = {
    # the local CI Run (killed and resumed), its fork, and the Ray Run compared with it on the session's cluster
    "tests/e2e/test_tiny_run.py": "tiny-run-and-ray",
    "tests/e2e/test_ray_run.py": "tiny-run-and-ray",
    "tests/executors/test_ray_executor.py": "tiny-run-and-ray",
}


def unit_of(nodeid: str) -> str:
    """The work unit of a test: its module, or the shared unit its module belongs to."""
    module = nodeid.split("::", 1)[0]
    return SHARED_UNITS.get(module, module)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "e2e: a whole Run through `ade run` (deselected by `make test-fast`)")
    config.addinivalue_line("markers", "trial: a whole Trial or Engine attempt (deselected by `make test-fast`)")
    config.addinivalue_line("markers", "benchmark: a benchmarks/ script in quick mode (deselected by `make test-fast`)")


@pytest.fixture(autouse=True)
def _process_state_restored() -> Iterator[None]:
    """Each test leaves the worker's environment and import path as it found them. A command invoked in
    process (click's CliRunner) sets ``PYTHONSAFEPATH`` for the Pythons it starts; left behind, it made a later
    test's helper script, run on the same worker, unable to import the module beside it."""
    environ, path = dict(os.environ), list(sys.path)
    yield
    if dict(os.environ) != environ:
        os.environ.clear()
        os.environ.update(environ)
    sys.path[:] = path


def _shared_session_fixtures(item: pytest.Item) -> set[str]:
    """The session-scoped fixtures of this repository's conftests that ``item`` uses (pytest's own, such as
    ``tmp_path_factory``, hold nothing expensive and are left out)."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return set()
    return {
        name
        for name, definitions in info.name2fixturedefs.items()
        if any(d.scope == "session" and d.baseid for d in definitions)
    }


def check_units(items: list[pytest.Item]) -> None:
    """Refuse a collection in which two units use one session-scoped fixture (each would build it)."""
    users: dict[str, dict[str, str]] = {}
    for item in items:
        for fixture in _shared_session_fixtures(item):
            users.setdefault(fixture, {})[unit_of(item.nodeid)] = item.nodeid.split("::", 1)[0]
    for fixture, units in users.items():
        if len(units) > 1:
            modules = ", ".join(sorted(units.values()))
            raise pytest.UsageError(
                f"the session fixture {fixture!r} is used by tests in {len(units)} work units ({modules}): "
                "each would build it on its own worker; give these modules one unit in SHARED_UNITS (conftest.py)"
            )


def _cost(item: pytest.Item) -> int:
    return max((weight for name, weight in COST_MARKERS.items() if item.get_closest_marker(name)), default=1)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    check_units(items)
    if not hasattr(config, "workerinput"):
        return  # a run in one process keeps the collection order
    cost: dict[str, int] = {}
    first: dict[str, int] = {}
    for index, item in enumerate(items):
        unit = unit_of(item.nodeid)
        cost[unit] = cost.get(unit, 0) + _cost(item)
        first.setdefault(unit, index)
    position = {id(item): index for index, item in enumerate(items)}

    def key(item: pytest.Item) -> tuple[int, int, int]:
        unit = unit_of(item.nodeid)
        return (-cost[unit], first[unit], position[id(item)])

    items.sort(key=key)


@pytest.hookimpl(optionalhook=True)  # a pytest-xdist hook: unknown when xdist is not loaded
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """With ``--dist loadscope``: whole units (``unit_of``), handed out in the workers' collection order."""
    if config.getvalue("dist") != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class UnitScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return unit_of(nodeid)

    return UnitScheduling(config, log)
