"""The ``ade`` command line. Only implemented commands exist."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from ade_core import __version__
from ade_core.cli_support import load_checked as _load_checked
from ade_core.errors import UnknownSchemaError, did_you_mean
from ade_core.executors.interpreter import isolate_import_path


class _AdeGroup(click.Group):
    """Prints typed errors as one line (no traceback) and exits with their code (ade_core.exit_codes)."""

    def invoke(self, ctx: click.Context) -> Any:
        from ade_core.exit_codes import as_typed, exit_code_for

        try:
            return super().invoke(ctx)
        except Exception as exc:
            typed = as_typed(exc)
            if typed is None:
                raise
            click.echo(f"{type(typed).__name__}: {typed}", err=True)
            sys.exit(exit_code_for(typed))


@click.group(cls=_AdeGroup)
@click.version_option(__version__, prog_name="ade")
def main() -> None:
    """ADE: agentic data engineering for LLMs."""
    # A researcher's random.py beside the config must not shadow the standard library in the Engine,
    # its grading workers or the held-out workers this process starts.
    isolate_import_path()


# --- ade plugins ---------------------------------------------------------------
@main.command("plugins")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def plugins_command(as_json: bool) -> None:
    """List installed plugins, the tasks they register and the hooks they implement."""
    from ade_core.plugins import load_plugins

    registry = load_plugins()
    task_of: dict[str, list[str]] = {}
    for name, (_, info) in registry.tasks.items():
        task_of.setdefault(info.name, []).append(name)
    rows: list[dict[str, Any]] = []
    for info in registry.plugins:
        conflicted = sorted(t for t, owners in registry.conflicts.items() if info in owners)
        # a task lacking a required hook loads, but no Run of it can start
        missing = sorted({h for t in task_of.get(info.name, []) for h in registry.task(t).missing_hooks()})
        status = "conflict" if conflicted else "incomplete" if missing else info.status
        error = info.error or (f"task(s) {conflicted} also registered by another distribution" if conflicted else None)
        if missing and error is None:
            from ade_core.harness.preflight import NOT_NEEDED_DRY

            which = "no real Run" if set(missing) <= set(NOT_NEEDED_DRY) else "no Run"
            error = f"{which} of its task can start until {info.module} implements {', '.join(missing)}"
        rows.append(
            {
                "plugin": info.name,
                "tasks": sorted(task_of.get(info.name, [])) + conflicted,
                "distribution": info.distribution,
                "version": info.version,
                "hooks": list(info.hooks),
                "status": status,
                "missing_hooks": missing,
                "error": error,
            }
        )
    if as_json:
        click.echo(json.dumps({"plugins": rows}, indent=2))
    else:
        header = ("TASK", "DISTRIBUTION", "VERSION", "STATUS", "HOOKS")
        table = [header] + [
            (", ".join(r["tasks"]) or "-", r["distribution"], r["version"], _status_cell(r), str(len(r["hooks"])))
            for r in rows
        ]
        widths = [max(len(row[i]) for row in table) for i in range(len(header))]
        for row in table:
            click.echo("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
        for r in rows:
            if r["error"]:
                click.echo(f"! {r['distribution']} ({r['plugin']}): {r['error']}", err=True)
    if registry.conflicts:  # the same DuplicateTaskError every command naming the task meets: fix the installation
        from ade_core.exit_codes import USAGE

        sys.exit(USAGE)


def _status_cell(row: dict[str, Any]) -> str:
    missing = row["missing_hooks"]
    return f"{row['status']} (missing: {', '.join(missing)})" if row["status"] == "incomplete" else row["status"]


# --- ade schema ----------------------------------------------------------------
@main.command("schema")
@click.argument("name", required=False)
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), help="Write NAME.json files here.")
def schema_command(name: str | None, out_dir: Path | None) -> None:
    """Export JSON Schema for NAME (or list the names; with --out, write them all)."""
    from ade_core.docs import schema_files

    files = {file[: -len(".json")]: text for file, text in schema_files().items()}
    if name is not None and name not in files:
        raise UnknownSchemaError(f"unknown schema {name!r}{did_you_mean(name, files)}; known: {', '.join(files)}")
    selected = {name: files[name]} if name else files
    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
        for key, text in selected.items():
            (out_dir / f"{key}.json").write_text(text, encoding="utf-8")
        click.echo(f"wrote {len(selected)} schema(s) to {out_dir}")
    elif name:
        click.echo(files[name], nl=False)
    else:
        click.echo("\n".join(files))


# --- ade config ----------------------------------------------------------------
@main.group("config")
def config_group() -> None:
    """Inspect and validate experiment configurations."""


def _without_none(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_none(v) for v in value]
    return value


_set_option = click.option(
    "--set", "overrides", multiple=True, metavar="SECTION.KEY=VALUE", help="Override a value (repeatable)."
)


@config_group.command("show")
@click.argument("source")
@_set_option
@click.option("--format", "fmt", type=click.Choice(["toml", "json"]), default="toml", show_default=True)
def config_show(source: str, overrides: tuple[str, ...], fmt: str) -> None:
    """Print the resolved configuration of FILE (or a preset name) and its digest."""
    import tomli_w

    loaded = _load_checked(source, overrides)
    if fmt == "json":
        click.echo(json.dumps({"digest": loaded.digest, "config": loaded.resolved()}, indent=2))
        return
    click.echo(f"# digest: {loaded.digest}")
    click.echo(f"# sources: {', '.join(str(p) for p in loaded.sources)}")
    for override in loaded.overrides:
        click.echo(f"# --set {override}")
    click.echo("# unset optional values are omitted; --format json shows them as null")
    click.echo(tomli_w.dumps(_without_none(loaded.resolved())).rstrip())


@config_group.command("validate")
@click.argument("source")
@_set_option
@click.option(
    "--schema-only",
    is_flag=True,
    help="Check the schema and plugins only, not that the local paths it names exist or its generation backends "
    "are installed.",
)
def config_validate(source: str, overrides: tuple[str, ...], schema_only: bool) -> None:
    """Validate FILE (or a preset name) against the schema and the installed plugins, and check that every
    local path it names (model, data, benchmarks) exists: exit 3 names a missing one and how to provide it. The
    generation backends it asks for must be installed too (vLLM for backend 'vllm' or GRPO's vllm_mode)."""
    loaded = _load_checked(source, overrides, local_paths=not schema_only)
    checked = "schema" if schema_only else "schema, local paths and generation backends"
    click.echo(f"valid: {source} (task {loaded.experiment.task}, digest {loaded.digest}; checked {checked})")


# --- ade presets ----------------------------------------------------------------
@main.command("presets")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def presets_command(as_json: bool) -> None:
    """List the named configurations installed plugins ship; any command taking CONFIG accepts the name."""
    from ade_core.plugins import load_plugins

    rows = [
        {"name": p.name, "task": p.task, "plugin": info.label, "description": p.description, "path": str(p.path)}
        for p, info in sorted(load_plugins().presets(), key=lambda pair: (pair[0].task, pair[0].name))
    ]
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    for row in rows:
        click.echo(f"{row['name']:28} {row['task']:15} {row['description']}")
    example = rows[0]["name"] if rows else "NAME"
    click.echo(f"\n{len(rows)} presets; a name works wherever a CONFIG file does, e.g. `ade config show {example}`")


# --- ade catalog ---------------------------------------------------------------
@main.command("catalog")
@click.argument("task_name", metavar="TASK")
@click.argument("family_name", metavar="[FAMILY]", required=False)
@click.option(
    "-p", "--param", "params", multiple=True, help="A parameter value: -p window=4 (default: the first allowed)."
)
def catalog_command(task_name: str, family_name: str | None, params: tuple[str, ...]) -> None:
    """List TASK's strategy catalog, or print the source of one FAMILY member (a strategy file)."""
    from ade_core.errors import ConfigError, MissingHookError
    from ade_core.plugins import load_plugins

    task = load_plugins().task(task_name)
    families = {f.name: f for f in task.strategy_catalog()}
    if not families:
        raise MissingHookError(
            f"task {task_name!r} (from {task.owner.label}) has no strategy catalog: no installed plugin "
            f"implements ade_strategy_catalog for it (the offline agent needs one; add it to {task.owner.module})"
        )
    if family_name is None:
        for family in families.values():
            allowed = "; ".join(f"{k}: {', '.join(map(repr, v))}" for k, v in family.parameters.items())
            click.echo(f"{family.name:20} {family.description}\n{'':20} targets {', '.join(family.targets)}")
            click.echo(f"{'':20} parameters {allowed or '(none)'}")
        return
    if family_name not in families:
        raise ConfigError(
            f"task {task_name!r} has no strategy family {family_name!r}{did_you_mean(family_name, families)}"
        )
    family = families[family_name]
    values = {name: allowed[0] for name, allowed in family.parameters.items()}
    for item in params:
        name, sep, raw = item.partition("=")
        if not sep or name not in family.parameters:
            raise ConfigError(f"-p {item!r}: expected NAME=VALUE with NAME one of {sorted(family.parameters)}")
        try:
            value = json.loads(raw)
        except ValueError:
            value = raw
        if value not in family.parameters[name]:
            raise ConfigError(f"-p {item!r}: {name} must be one of {list(family.parameters[name])}")
        values[name] = value
    click.echo(family.render(**values), nl=False)


# --- ade sandbox ---------------------------------------------------------------
@main.group("sandbox")
def sandbox_group() -> None:
    """Run strategy code in isolation, or check which isolation layers work here (also: ade-sandbox)."""


@sandbox_group.command("run")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--entrypoint", required=True, help="Function to call.")
@click.option("--args-json", type=click.Path(dir_okay=False, path_type=Path), help="JSON object of keyword arguments.")
@click.option("--input", "inputs", multiple=True, metavar="NAME=PATH", help="A JSON file passed as argument NAME.")
@click.option("--allow-import", "allowed", multiple=True, metavar="MODULE", help="Restrict imports to these modules.")
@click.option("--timeout", type=float, default=60.0, show_default=True, help="Wall-clock seconds.")
@click.option("--cpu", type=float, default=60.0, show_default=True, help="CPU seconds.")
@click.option("--memory", type=int, default=2048, show_default=True, help="Memory limit in MB.")
@click.option("--limit", "limits", multiple=True, metavar="NAME=VALUE", help="Override one sandbox limit.")
@click.option("--min-isolation", default="process", show_default=True, help="Refuse to run below this level.")
@click.option("--json", "as_json", is_flag=True, help="Print the SandboxResult as JSON.")
def sandbox_run(
    file: Path,
    entrypoint: str,
    args_json: Path | None,
    inputs: tuple[str, ...],
    allowed: tuple[str, ...],
    timeout: float,
    cpu: float,
    memory: int,
    limits: tuple[str, ...],
    min_isolation: str,
    as_json: bool,
) -> None:
    """Run one entry point of the strategy FILE in the sandbox and print its typed result."""
    from ade_sandbox.cli import main as sandbox_main

    argv = ["run", str(file), "--entrypoint", entrypoint, "--timeout", str(timeout), "--cpu", str(cpu)]
    argv += ["--memory", str(memory), "--min-isolation", min_isolation]
    argv += ["--args-json", str(args_json)] if args_json else []
    argv += [arg for item in inputs for arg in ("--input", item)]
    argv += [arg for item in allowed for arg in ("--allow-import", item)]
    argv += [arg for item in limits for arg in ("--limit", item)]
    sys.exit(sandbox_main(argv + (["--json"] if as_json else [])))


@sandbox_group.command("doctor")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def sandbox_doctor(as_json: bool) -> None:
    """Show which isolation layers work on this machine and, per level, what is enforced."""
    from ade_sandbox.cli import main as sandbox_main

    sys.exit(sandbox_main(["doctor", *(["--json"] if as_json else [])]))


# --- ade doctor ----------------------------------------------------------------
@main.command("doctor")
@click.argument("source", metavar="[CONFIG]", required=False)
@_set_option
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def doctor_command(source: str | None, overrides: tuple[str, ...], as_json: bool) -> None:
    """Report the executor and its resources, torch and CUDA GPUs, vLLM, DeepSpeed and flash-attention, and
    the sandbox level reached here; with CONFIG (a file or a preset name), also what it will use and each
    requirement met or missing with its fix: exit 3 names everything missing. Writes no file of its own (the
    sandbox probe builds the sandbox runtime on first use, as `ade sandbox doctor` does)."""
    from ade_core.doctor import check_config, probe_machine, render_config, render_machine
    from ade_core.exit_codes import ENVIRONMENT

    if overrides and source is None:
        raise click.UsageError("--set needs a CONFIG")
    loaded = _load_checked(source, overrides) if source is not None else None  # a bad config fails as usual
    machine = probe_machine()
    report = check_config(source, loaded, machine) if source is not None and loaded is not None else None
    if as_json:
        data: dict[str, Any] = {"machine": machine.to_json()}
        if report is not None:
            data["config"] = report.to_json()
        click.echo(json.dumps(data, indent=2))
    else:
        click.echo("\n".join(render_machine(machine)))
        if report is not None:
            click.echo("\n".join(["", *render_config(report)]))
    if report is not None and report.missing:
        sys.exit(ENVIRONMENT)


# --- ade new-task --------------------------------------------------------------
@main.command("new-task")
@click.argument("name")
@click.option(
    "--dir",
    "parent",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("."),
    show_default=True,
    help="Directory to create the package in.",
)
def new_task_command(name: str, parent: Path) -> None:
    """Scaffold a working task-plugin package ade-task-NAME."""
    from ade_core.scaffold import render_task_package

    target = render_task_package(name, parent)
    click.echo(f"created {target}")
    click.echo(f"next: pip install -e {target} && pytest {target}")


def _add_run_commands() -> None:
    from ade_core.engine_commands import engine_group
    from ade_core.report.command import report_command
    from ade_core.run_commands import COMMANDS
    from ade_core.sampling_commands import eval_command, sample_command
    from ade_core.tiny.commands import tiny_group
    from ade_core.trial_commands import admit_command, trial_command

    for command in (
        *COMMANDS,
        admit_command,
        trial_command,
        sample_command,
        eval_command,
        report_command,
        engine_group,
        tiny_group,
    ):
        main.add_command(command)


_add_run_commands()

if __name__ == "__main__":
    main()
