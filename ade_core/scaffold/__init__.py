"""``ade new-task``: render a complete, installable task-plugin package from templates."""

from __future__ import annotations

import re
import shutil
import string
import tempfile
from importlib import resources
from pathlib import Path

from ade_core import __version__
from ade_core.errors import ScaffoldError

NAME_PATTERN = re.compile(r"^[a-z][a-z0-9]*([_-][a-z0-9]+)*$")
_TEMPLATE_SUFFIX = ".tmpl"


def _names(name: str) -> dict[str, str]:
    if not NAME_PATTERN.match(name):
        raise ScaffoldError(
            f"invalid task name {name!r}: use lowercase letters, digits and single '-' or '_' "
            "separators, starting with a letter (e.g. 'prompt-filter')"
        )
    task = name.replace("-", "_")
    return {
        "task": task,
        "package": f"ade_task_{task}",
        "dist": f"ade-task-{task.replace('_', '-')}",
        "title": task.replace("_", " ").title(),
        "core_version": __version__,
    }


def _templates() -> list[tuple[str, str]]:
    """(relative path, template text) of every shipped template file."""
    root = resources.files("ade_core.scaffold") / "templates"
    found: list[tuple[str, str]] = []

    def walk(node, prefix: str) -> None:
        for child in sorted(node.iterdir(), key=lambda c: c.name):
            if child.is_dir():
                if child.name != "__pycache__":
                    walk(child, f"{prefix}{child.name}/")
            elif child.name.endswith(_TEMPLATE_SUFFIX):
                found.append((prefix + child.name[: -len(_TEMPLATE_SUFFIX)], child.read_text(encoding="utf-8")))

    walk(root, "")
    return found


def _refuse_shadowing(values: dict[str, str]) -> None:
    """A new task may not take the name of an installed task, distribution or importable package."""
    import importlib.util
    from importlib import metadata

    from ade_core.plugins import load_plugins

    if values["task"] in load_plugins().tasks:
        raise ScaffoldError(
            f"task {values['task']!r} is already registered by an installed plugin; a package with that name would "
            f"shadow it: choose another name (e.g. {values['task']}_v2 or my_{values['task']})"
        )
    try:
        metadata.distribution(values["dist"])
    except metadata.PackageNotFoundError:
        pass
    else:
        raise ScaffoldError(f"distribution {values['dist']!r} is already installed; choose another task name")
    if importlib.util.find_spec(values["package"]) is not None:
        raise ScaffoldError(f"a package named {values['package']!r} is already importable; choose another task name")


def render_task_package(name: str, parent: Path) -> Path:
    """Create ``parent/ade-task-NAME`` atomically: complete, or nothing at all."""
    values = _names(name)
    _refuse_shadowing(values)
    target = Path(parent) / values["dist"]
    if target.exists():
        raise ScaffoldError(f"{target} already exists; choose another --dir or remove it first")
    if not Path(parent).is_dir():
        raise ScaffoldError(f"--dir {parent} is not an existing directory; create it first")
    staging = Path(tempfile.mkdtemp(prefix=".ade-new-task-", dir=parent))
    try:
        for relative, text in _templates():
            path = staging / relative.replace("PACKAGE", values["package"]).replace("TASK", values["task"])
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(string.Template(text).substitute(values), encoding="utf-8")
        staging.rename(target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return target
