"""Generated reference docs: the config reference, the hook reference, the exit codes and the JSON Schemas.

Written once from the code (``python -m ade_core.docs``); tests fail when the committed
files are stale, so the docs never drift from the models and hookspecs.
"""

from __future__ import annotations

import inspect
import json
import sys
import typing
from pathlib import Path

from pydantic import BaseModel

from ade_core import hookspecs
from ade_core.schemas import EXPORTED
from ade_core.schemas.config import ExperimentConfig, OperationalSettings

HOOKS_BEGIN = "<!-- BEGIN GENERATED HOOK REFERENCE -->"
HOOKS_END = "<!-- END GENERATED HOOK REFERENCE -->"
EXIT_CODES_BEGIN = "<!-- BEGIN GENERATED EXIT CODES -->"
EXIT_CODES_END = "<!-- END GENERATED EXIT CODES -->"


def hook_names() -> list[str]:
    """Every hookspec, in declaration order."""
    source = inspect.getsource(hookspecs)
    names = [n for n in dir(hookspecs) if n.startswith("ade_") and callable(getattr(hookspecs, n))]
    return sorted(names, key=lambda n: source.index(f"def {n}("))


def _kind(name: str) -> str:
    if name in hookspecs.REGISTRATION_HOOKS:
        return "registration"
    if name in hookspecs.COLLECTING_HOOKS:
        return "collecting"
    required = " (required of a complete task)" if name in hookspecs.REQUIRED_TASK_HOOKS else ""
    return "task-specific" + required


def render_hook_reference() -> str:
    parts = [HOOKS_BEGIN, ""]
    for name in hook_names():
        function = getattr(hookspecs, name)
        signature = inspect.signature(function)
        parts += [f"### `{name}{signature}`", "", f"*Kind: {_kind(name)}.*", ""]
        doc = inspect.getdoc(function) or ""
        summary, _, rest = doc.partition("Example::")
        parts += [summary.strip(), "", "```python", inspect.cleandoc(rest).strip(), "```", ""]
    parts.append(HOOKS_END)
    return "\n".join(parts)


def _type_name(annotation: object) -> str:
    if isinstance(annotation, type):
        return annotation.__name__
    text = str(annotation).replace("typing.", "")
    for module in ("ade_core.schemas.config.", "ade_core.specs."):
        text = text.replace(module, "")
    return text


def _render_model(model: type[BaseModel], table: str, lines: list[str], seen: set[str]) -> None:
    nested: list[tuple[type[BaseModel], str]] = []
    lines += [f"### `[{table}]`" if table else "### top level", "", inspect.getdoc(model) or "", ""]
    lines += ["| key | type | default | description |", "|---|---|---|---|"]
    for key, field in model.model_fields.items():
        annotation = field.annotation
        members = [annotation, *typing.get_args(annotation)]
        sub = next((m for m in members if isinstance(m, type) and issubclass(m, BaseModel)), None)
        if sub is not None:
            origin = typing.get_origin(annotation)
            path = f"{table}.{key}" if table else key
            nested.append((sub, f"{path}.<name>" if origin is dict else path))
            kind = "array of tables" if origin is tuple else "tables by name" if origin is dict else "table"
        else:
            kind = _type_name(annotation)
        if field.is_required():
            default = "required"
        elif field.default_factory is not None:
            default = "(table defaults)" if sub else f"`{field.get_default(call_default_factory=True)!r}`"
        else:
            default = f"`{field.default!r}`"
        description = (field.description or "").replace("|", "\\|")
        lines.append(f"| `{key}` | {kind.replace('|', 'or')} | {default} | {description} |")
    lines.append("")
    for sub, path in nested:
        if path not in seen:
            seen.add(path)
            _render_model(sub, path, lines, seen)


def render_config_reference() -> str:
    lines = [
        "# Configuration reference",
        "",
        "Generated from `ade_core/schemas/config.py` by `python -m ade_core.docs`; do not edit by hand.",
        "",
        "A config file is TOML. Top-level tables form `ExperimentConfig` (𝓑): frozen at Run",
        "initialization and digested (sha256 over canonical JSON). `[operational]` holds settings",
        'that may change between resumes; they are not digested. `extends = "base.toml"` layers',
        "files (relative to the extending file; tables merge key by key, the extending file wins).",
        "`ade config show FILE --set section.key=value` overrides single values.",
        "",
        "## ExperimentConfig",
        "",
    ]
    _render_model(ExperimentConfig, "", lines, set())
    lines += ["## OperationalSettings (`[operational]`)", ""]
    _render_model(OperationalSettings, "operational", lines, set())
    return "\n".join(lines).rstrip() + "\n"


def render_exit_codes() -> str:
    """The exit-code table of docs/cli.md, from ``ade_core.exit_codes.TABLE``."""
    from ade_core.exit_codes import TABLE

    rows = [f"| {code} | {meaning} |" for code, meaning in TABLE]
    return "\n".join([EXIT_CODES_BEGIN, "| exit | meaning |", "|---|---|", *rows, EXIT_CODES_END])


def _replace_between(path: Path, begin: str, end: str, generated: str) -> None:
    text = path.read_text(encoding="utf-8")
    head, _, rest = text.partition(begin)
    _, _, tail = rest.partition(end)
    path.write_text(head + generated + tail, encoding="utf-8")


def schema_files() -> dict[str, str]:
    """File name -> JSON text of every exported schema."""
    return {
        f"{name}.json": json.dumps(model.model_json_schema(), indent=2, sort_keys=True) + "\n"
        for name, model in EXPORTED.items()
    }


def write_all(docs_dir: Path) -> None:
    (docs_dir / "config.md").write_text(render_config_reference(), encoding="utf-8")
    _replace_between(docs_dir / "plugin-api.md", HOOKS_BEGIN, HOOKS_END, render_hook_reference())
    _replace_between(docs_dir / "cli.md", EXIT_CODES_BEGIN, EXIT_CODES_END, render_exit_codes())
    schemas = docs_dir / "schemas"
    schemas.mkdir(exist_ok=True)
    for stale in schemas.glob("*.json"):
        stale.unlink()
    for name, text in schema_files().items():
        (schemas / name).write_text(text, encoding="utf-8")


if __name__ == "__main__":
    write_all(Path(sys.argv[1]) if len(sys.argv) > 1 else Path("docs"))
