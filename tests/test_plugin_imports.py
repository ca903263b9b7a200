"""Task plugins use only ADE's public API: ``ade_core`` itself (and the documented ``ade_core.testing``
kit), never ``ade_core``'s internals and never one another (STYLE: the public surface is what
``ade_core/__init__.py`` exports). import-linter enforces it in CI from pyproject.toml's contracts; the
AST check below keeps it without import-linter installed.
"""

from __future__ import annotations

import ast
import importlib.util
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PUBLIC = {"ade_core", "ade_core.testing"}
PACKAGES = sorted(p for p in (REPO / "plugins").glob("*/ade_task_*") if (p / "__init__.py").is_file())


def _imports(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every import in ``path``, function-level ones included."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append((node.lineno, node.module))
    return out


def test_every_plugin_package_imports_only_the_public_api_and_never_another_plugin():
    assert len(PACKAGES) == 3, PACKAGES
    violations = []
    for package in PACKAGES:
        for path in sorted(package.rglob("*.py")):
            for line, module in _imports(path):
                top = module.split(".")[0]
                internal = top == "ade_core" and module not in PUBLIC
                foreign = top.startswith("ade_task_") and top != package.name
                if internal or foreign:
                    violations.append(f"{path.relative_to(REPO)}:{line} imports {module}")
    allowed = ", ".join(sorted(PUBLIC))
    assert violations == [], f"plugins may import only {allowed}:\n" + "\n".join(violations)


def test_the_import_linter_contract_forbids_every_internal_module():
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["importlinter"]
    (forbidden,) = [c for c in config["contracts"] if c["type"] == "forbidden"]
    (independent,) = [c for c in config["contracts"] if c["type"] == "independence"]
    plugins = sorted(p.name for p in PACKAGES)
    assert sorted(forbidden["source_modules"]) == sorted(independent["modules"]) == plugins
    internal = {
        f"ade_core.{p.stem if p.suffix == '.py' else p.name}"
        for p in (REPO / "ade_core").iterdir()
        if (p.suffix == ".py" and p.stem != "__init__") or (p / "__init__.py").is_file()
    } - PUBLIC
    assert sorted(forbidden["forbidden_modules"]) == sorted(internal)


@pytest.mark.skipif(
    importlib.util.find_spec("importlinter") is None, reason="import-linter (the dev extra) is not installed"
)
def test_lint_imports_keeps_the_contracts():
    command = [
        sys.executable,
        "-c",
        "import sys; from importlinter.cli import lint_imports_command as c; sys.exit(c())",
    ]
    proc = subprocess.run([*command, "--no-cache"], cwd=REPO, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "2 kept, 0 broken" in proc.stdout
