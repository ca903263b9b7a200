"""The ``ade`` command line. Only implemented commands exist."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from ade_core import __version__
from ade_core.errors import UnknownSchemaError, did_you_mean
from ade_core.executors.interpreter import isolate_import_path
from ade_core.quiet import quiet_libraries


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
    rows = []
    for info in registry.plugins:
        conflicted = sorted(t for t, owners in registry.conflicts.items() if info in owners)
        # a task lacking a required hook loads, but no Run of it can start
        missing = sorted({h for t in task_of.get(info.name, []) for h in registry.task(t).missing_hooks()})
        status = "conflict" if conflicted else "incomplete" if missing else info.status
        error = info.error or (f"task(s) {conflicted} also registered by another distribution" if conflicted else None)
        if missing and error is None:
            error = f"no Run of its task can start until {info.module} implements {', '.join(missing)}"
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


def _load_checked(source: str, overrides: tuple[str, ...]):  # type: ignore[no-untyped-def]
    from ade_core.config import check_against_plugins, load_config
    from ade_core.plugins import load_plugins

    registry = load_plugins()
    path = Path(source)
    if not path.exists():
        presets = {preset.name: preset.path for preset, _ in registry.presets()}
        if source in presets:
            path = presets[source]
    loaded = load_config(path, overrides)
    check_against_plugins(loaded, registry)
    return loaded


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
def config_validate(source: str, overrides: tuple[str, ...]) -> None:
    """Validate FILE (or a preset name) against the schema and the installed plugins."""
    loaded = _load_checked(source, overrides)
    click.echo(f"valid: {source} (task {loaded.experiment.task}, digest {loaded.digest})")


def _quiet_libraries() -> None:
    quiet_libraries()


# --- ade admit / ade trial -------------------------------------------------------
_claim_option = click.option(
    "--claim",
    "claims",
    multiple=True,
    help="A declared account the realization is checked against, e.g. --claim 'over_cap == 0'.",
)


def _claims(claims: tuple[str, ...]) -> list[dict[str, Any]]:
    from ade_core.errors import ConfigError
    from ade_core.realization import parse_claim

    try:
        return [parse_claim(claim) for claim in claims]
    except ValueError as exc:
        raise ConfigError(f"--claim: {exc}") from None


def _print_admission(admission: Any) -> None:
    verdict = "admitted" if admission.admitted else "INADMISSIBLE"
    click.echo(f"{verdict}: {admission.task} strategy {admission.strategy_digest[:19]} ({admission.seconds:.1f} s)")
    for check in admission.checks:
        click.echo(f"  {check.status:7} {check.name}" + (f": {check.reason}" if check.reason else ""))


def _print_statistics(statistics: dict[str, Any]) -> None:
    for key, value in statistics.items():
        shown = f"{value:.2f}" if isinstance(value, float) else value
        click.echo(f"  {key:24} {shown}")


@main.command("admit")
@click.argument("config_path", metavar="CONFIG")
@click.argument("strategy", type=click.Path(dir_okay=False, exists=True, path_type=Path))
@click.option("--set", "overrides", multiple=True, help="Override a config value: --set data.select_size=100.")
@_claim_option
@click.option("--json", "as_json", is_flag=True, help="Print the typed results as JSON.")
def admit_command(
    config_path: str, strategy: Path, overrides: tuple[str, ...], claims: tuple[str, ...], as_json: bool
) -> None:
    """Run the admission pipeline on STRATEGY, then realize it on CONFIG's frozen inputs.

    Exits 1 when the strategy is inadmissible (every check is still listed)."""
    _quiet_libraries()
    from ade_core.harness.standalone import admit_and_realize

    loaded = _load_checked(config_path, overrides)
    declared = _claims(claims)
    admission, realization = admit_and_realize(loaded, strategy.read_text(encoding="utf-8"), declared=declared)
    if as_json:
        payload = {"admission": admission.model_dump(), "realization": realization and realization.model_dump()}
        click.echo(json.dumps(payload, indent=2, default=str))
    else:
        _print_admission(admission)
        if realization is not None:
            click.echo(
                f"realization on the frozen inputs ({realization.inputs}): {realization.verdict}, "
                f"{realization.seconds:.1f} s, isolation {realization.isolation}"
            )
            for reason in realization.reasons:
                click.echo(f"  reason: {reason}")
            if realization.duplicate_of_reference:
                from ade_core.harness.admission import DUPLICATE_OF_REFERENCE

                click.echo(f"  note: {DUPLICATE_OF_REFERENCE}")
            calls = sum(len(c.service_calls) for c in realization.calls)
            click.echo(f"  service calls          {calls}")
            _print_statistics(realization.statistics)
    if not admission.admitted:
        sys.exit(1)


@main.command("trial")
@click.argument("config_path", metavar="CONFIG")
@click.argument("strategy", type=click.Path(dir_okay=False, exists=True, path_type=Path))
@click.option("--set", "overrides", multiple=True, help="Override a config value.")
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Trial directory (default: <run_dir>/trials/<strategy>-<digest>).",
)
@_claim_option
@click.option("--json", "as_json", is_flag=True, help="Print the summaries as JSON.")
def trial_command(
    config_path: str,
    strategy: Path,
    overrides: tuple[str, ...],
    out_dir: Path | None,
    claims: tuple[str, ...],
    as_json: bool,
) -> None:
    """One complete Trial of STRATEGY (admission, realization, Engine, package), outside any agent
    loop, printed next to the generic reference's Trial under the same config (cached per digest)."""
    _quiet_libraries()
    from ade_core.harness.admission import DUPLICATE_OF_REFERENCE, strategy_digest
    from ade_core.harness.standalone import admission_only, missing_reason, reference_trial, run_trial

    loaded = _load_checked(config_path, overrides)
    source = strategy.read_text(encoding="utf-8")
    log = (lambda _: None) if as_json else (lambda line: click.echo(f"[trial] {line}", err=True))
    target = out_dir or Path(loaded.operational.run_dir) / "trials" / (
        f"{strategy.stem}-{strategy_digest(source).split(':')[1][:8]}"
    )
    log("admission: static check, sandbox run on development inputs, validation, probes")
    admission = admission_only(loaded, source)
    if not admission.admitted:
        if as_json:
            trial = {"status": "inadmissible", "admission": admission.model_dump(mode="json")}
            click.echo(json.dumps({"trial": trial}, indent=2, default=str))
        else:
            _print_admission(admission)
        sys.exit(1)
    # The reference first (cached per config): the strategy's realization is compared with it.
    reference = reference_trial(loaded, log=log)
    mine = run_trial(loaded, source, target, declared=_claims(claims), admission=admission, log=log)
    if as_json:
        click.echo(json.dumps({"trial": mine, "reference": reference}, indent=2, default=str))
        return
    click.echo(f"Trial of {strategy} -> {mine['package']}")
    if mine["realization"]["duplicate_of_reference"]:
        click.echo(f"note: {DUPLICATE_OF_REFERENCE}")
    click.echo(f"realization: {mine['realization']['verdict']}; selected checkpoint step {mine['selected_step']}")
    for reason in mine["realization"]["reasons"]:
        click.echo(f"  reason: {reason}")
    for name, summary in (("strategy", mine), ("reference", reference)):
        if summary["in_loop_scores"] is None:
            click.echo(f"the {name}'s in-loop evaluation is missing (not zero): {missing_reason(summary)}")
    click.echo(f"{'metric':16} {'strategy':>10} {'reference':>10} {'delta':>8}")
    for metric in mine["metric_order"]:
        a, b = ((s["in_loop_scores"] or {}).get(metric) for s in (mine, reference))
        delta = f"{a - b:+8.1f}" if a is not None and b is not None else ""
        click.echo(f"{metric:16} {_score(a):>10} {_score(b):>10} {delta}")
    click.echo(f"({mine['seconds']:.0f} s; reference package {reference['package']})")


def _score(value: float | None) -> str:
    return "missing" if value is None else f"{value:.1f}"


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
@main.command(
    "sandbox",
    context_settings={"ignore_unknown_options": True, "allow_extra_args": True, "help_option_names": []},
    add_help_option=False,
)
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def sandbox_command(args: tuple[str, ...]) -> None:
    """Run strategy code in isolation, or check the layers: ade sandbox run|doctor (see ade-sandbox)."""
    from ade_sandbox.cli import main as sandbox_main

    sys.exit(sandbox_main(list(args) or ["--help"]))


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
    from ade_core.tiny.commands import tiny_group

    for command in (*COMMANDS, report_command, engine_group, tiny_group):
        main.add_command(command)


_add_run_commands()

if __name__ == "__main__":
    main()
