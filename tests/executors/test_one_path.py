"""Every Engine run goes through an executor: no module outside ``ade_core/executors/`` starts a process, pins
cores or devices, or runs an Engine entry point, and the Harness never imports a concrete executor.

The scan reads the source (AST), so a new launch path fails here before it can drift from the executors.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "ade_core"

# Process launches and the pinning that goes with them.
LAUNCH_MODULES = {"subprocess", "multiprocessing", "concurrent.futures.process"}
LAUNCH_CALLS = {
    ("asyncio", "create_subprocess_exec"),
    ("asyncio", "create_subprocess_shell"),
    ("os", "fork"),
    ("os", "forkpty"),
    ("os", "posix_spawn"),
    ("os", "posix_spawnp"),
    ("os", "system"),
    ("os", "popen"),
    ("os", "sched_setaffinity"),
    ("concurrent.futures", "ProcessPoolExecutor"),
}
LAUNCH_PREFIXES = ("execv", "execl", "spawnv", "spawnl")
# Where a launch belongs although it lies outside executors/, and why.
ALLOWED = {
    # The Engine's grader workers: started inside an Engine process the executor launched, never by a controller.
    "engine/grading/pool.py": "grader worker processes inside the Engine",
    # The test kit: a plugin's tests run `ade` commands and give each a hang detector (run_command).
    "testing.py": "commands a test runs, never an Engine run of its own",
}
# The Engine's entry points: only the ``ade engine`` commands (run by an executor) and the Engine itself call them.
ENTRY_POINTS = {"run_attempt", "evaluate_base_model", "score_heldout", "evaluate_heldout", "run_sampling"}
ENTRY_CALLERS = {"engine_commands.py"}
CONCRETE = {"ade_core.executors.local", "ade_core.executors.simulated", "ade_core.executors.slots"}
HARNESS_MAY_IMPORT = {"ade_core.executors.base", "ade_core.executors.requests", "ade_core.executors.factory"}


def modules() -> list[tuple[str, ast.Module]]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE).as_posix()
        if relative.startswith(("executors/", "scaffold/templates/")):
            continue
        found.append((relative, ast.parse(path.read_text(encoding="utf-8"))))
    return found


def imported(tree: ast.Module) -> list[tuple[str, str | None]]:
    """(module, name) of every import: ``import m`` gives (m, None), ``from m import n`` gives (m, n)."""
    names: list[tuple[str, str | None]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [(alias.name, None) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names += [(node.module, alias.name) for alias in node.names]
    return names


def attribute_calls(tree: ast.Module) -> set[tuple[str, str]]:
    """(owner, attribute) of every ``owner.attribute`` expression, owner a plain or dotted name."""
    calls = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            owner = ast.unparse(node.value)
            calls.add((owner, node.attr))
    return calls


def launches(relative: str, tree: ast.Module) -> list[str]:
    found = []
    for module, name in imported(tree):
        if module in LAUNCH_MODULES or (module == "concurrent.futures" and name == "ProcessPoolExecutor"):
            found.append(f"imports {module}{'.' + name if name else ''}")
        if module == "os" and name and (name in {n for _, n in LAUNCH_CALLS} or name.startswith(LAUNCH_PREFIXES)):
            found.append(f"imports os.{name}")
    for owner, attribute in attribute_calls(tree):
        if (owner, attribute) in LAUNCH_CALLS or (owner == "os" and attribute.startswith(LAUNCH_PREFIXES)):
            found.append(f"uses {owner}.{attribute}")
    for node in ast.walk(tree):  # pinning a device by hand: os.environ["CUDA_VISIBLE_DEVICES"] = ...
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store):
            if "CUDA_VISIBLE_DEVICES" in ast.unparse(node.slice):
                found.append("sets CUDA_VISIBLE_DEVICES")
    return found


def test_no_process_launch_or_pinning_outside_the_executors():
    offenders = {
        relative: found
        for relative, tree in modules()
        if relative not in ALLOWED and (found := launches(relative, tree))
    }
    assert not offenders, f"launch Engine work through an executor (ade_core/executors/), not here: {offenders}"


def test_the_allowed_exceptions_still_launch_what_they_are_allowed_for():
    trees = dict(modules())
    for relative in ALLOWED:
        assert launches(relative, trees[relative]), f"{relative} no longer launches anything: drop it from ALLOWED"


def test_torch_threads_are_set_only_where_the_engine_applies_the_executors_grant():
    setters = [
        relative
        for relative, tree in modules()
        if any(attribute == "set_num_threads" for _, attribute in attribute_calls(tree))
    ]
    assert setters == ["engine/threads.py"]


def test_engine_entry_points_run_only_under_ade_engine():
    callers = {}
    for relative, tree in modules():
        if relative.startswith("engine/") or relative in ENTRY_CALLERS:
            continue
        names = {name for _, name in imported(tree)} | {attribute for _, attribute in attribute_calls(tree)}
        if names & ENTRY_POINTS:
            callers[relative] = sorted(names & ENTRY_POINTS)
    assert not callers, f"an Engine entry point runs outside an executor's `ade engine` process: {callers}"


def test_the_harness_never_imports_a_concrete_executor():
    harness = [(r, t) for r, t in modules() if r.startswith("harness/")]
    assert len(harness) > 20
    for relative, tree in harness:
        executors = {module for module, _ in imported(tree) if module.startswith("ade_core.executors")}
        assert not executors & CONCRETE, f"{relative} imports {sorted(executors & CONCRETE)}"
        assert executors <= HARNESS_MAY_IMPORT, f"{relative} imports {sorted(executors - HARNESS_MAY_IMPORT)}"


def test_the_scan_finds_a_launch_when_there_is_one():
    planted = ast.parse(
        "import asyncio, os\n"
        "from concurrent.futures import ProcessPoolExecutor\n"
        "async def f():\n"
        "    os.environ['CUDA_VISIBLE_DEVICES'] = '0'\n"
        "    os.sched_setaffinity(0, {0})\n"
        "    await asyncio.create_subprocess_exec('ade')\n"
        "    os.execvp('ade', ['ade'])\n"
    )
    found = launches("planted.py", planted)
    assert {
        "imports concurrent.futures.ProcessPoolExecutor",
        "sets CUDA_VISIBLE_DEVICES",
        "uses os.sched_setaffinity",
        "uses asyncio.create_subprocess_exec",
        "uses os.execvp",
    } <= set(found)
