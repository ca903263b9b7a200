"""The run commands of ``ade`` (added to ``ade_core.cli``): run, resume, status, pause, finish, cancel, fork,
heldout."""

from __future__ import annotations

import json
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import click

from ade_core import exit_codes
from ade_core.errors import AdeError, NotARunError
from ade_core.harness.locate import RUN_HELP, locate_run

if TYPE_CHECKING:
    from ade_core.store import RunStore


def _open_read_only(run_dir: Path) -> RunStore:
    """The run's store, read-only; a store without an initialized run is not a run."""
    from ade_core.store import RunStore

    store = RunStore.open_read_only(run_dir)
    if store.get("run", "run") is None:
        store.close()
        raise NotARunError(f"{run_dir} holds a run store but no initialized run; start one with `ade run CONFIG`")
    return store


def _summary(run_dir: Path) -> None:
    from ade_core.harness.status import run_status

    with _open_read_only(run_dir) as store:
        status = run_status(store)
    click.echo(f"run {status['run_id']} in {run_dir}: phase {status['phase']} (operator: {status['operator']})")
    selection = status["selection"]
    if isinstance(selection, dict) and "trial_id" in selection:
        simulated = " (simulated)" if status["simulated"] else ""
        click.echo(f"selected {selection['plan_id']} ({selection['trial_id']}): {selection['scores']}{simulated}")
    for role, failed in status["agent_failures"]["per_role"].items():
        click.echo(f"agent failures: {role} {failed['calls']} call(s) without an answer, {failed['seconds']:.0f} s")
    for switch in status["agent_failures"]["output_downgrades"]:
        click.echo(f"output mode of {switch['endpoint']} now {switch['mode']} (it answered {switch['status']})")
    click.echo(f"state_digest {status['state_digest']}")


PROGRESS_MODES = ("auto", "rich", "plain", "json", "none")
DEFAULT_CONFIG = "examples/tiny-data-selection.toml"


def default_config() -> Path:
    """The embedded tiny world's data-selection Run: from the working directory, else the source tree."""
    here = Path(DEFAULT_CONFIG)
    if here.is_file():
        return here
    source = Path(__file__).resolve().parents[1] / DEFAULT_CONFIG
    if source.is_file():
        return source
    raise AdeError(
        f"no CONFIG given and {DEFAULT_CONFIG} is not here or in ADE's source tree; pass a config file "
        "(`ade run path/to/config.toml`)"
    )


def _fresh_directory(base: Path) -> Path:
    """``base``, or ``base-2``, ``base-3``... when earlier runs of the same config already live there."""
    candidate, number = base, 1
    while (candidate / "state.sqlite").exists():
        number += 1
        candidate = base.with_name(f"{base.name}-{number}")
    return candidate


@contextmanager
def _interruptible(run_dir: Path) -> Iterator[None]:
    """Ctrl-C or SIGTERM stops the Run between transitions, prints how to continue it, and exits 128 + signal.

    SIGTERM takes Ctrl-C's path (asyncio cancels the controller at its next await, never inside a
    transition), so both leave the store at a whole revision that ``ade resume`` continues from.
    """
    received = [signal.SIGINT]

    def on_sigterm(signum: int, frame: object) -> None:
        received[0] = signal.SIGTERM
        signal.raise_signal(signal.SIGINT)

    # A process started with SIGINT ignored (a background job of a non-interactive shell, some test
    # runners) would otherwise ignore Ctrl-C and, through on_sigterm, SIGTERM as well.
    previous_int = signal.signal(signal.SIGINT, signal.default_int_handler)
    previous = signal.signal(signal.SIGTERM, on_sigterm)
    try:
        yield
    except KeyboardInterrupt:
        click.echo(
            f"\ninterrupted by {received[0].name}: the Run stopped at a committed revision (nothing committed is "
            f"lost); continue it with: ade resume {run_dir}",
            err=True,
        )
        sys.exit(exit_codes.INTERRUPTED + received[0] - signal.SIGINT)
    finally:
        signal.signal(signal.SIGTERM, previous)
        signal.signal(signal.SIGINT, previous_int)


def _outcome(run_dir: Path, phase: str) -> tuple[int, str]:
    """The exit code of a driven Run and, when it failed, why: it is suspended, or has no final selection."""
    from ade_core.harness.status import research_delivered
    from ade_core.schemas.run import FinalSelection

    if phase == "suspended":
        why = f"the Run is suspended: a Trial spent its recovery budget; fix the cause, then `ade resume {run_dir}`"
        return exit_codes.FAILED, why
    if phase == "completed":
        with _open_read_only(run_dir) as store:
            record = store.get_model("run", "run")
            researched = research_delivered(store)
        if record is None or not isinstance(record.selection, FinalSelection):
            return exit_codes.FAILED, f"the Run completed without a final selection; `ade status {run_dir}` shows why"
        if not researched:
            return exit_codes.FAILED, (
                "no research was delivered: every Coordinator and Builder call failed, so the selection can only "
                f"be the generic reference; `ade status {run_dir}` shows the failures per role"
            )
    return exit_codes.OK, ""  # completed with a selection, or paused or cancelled as the operator asked


def _drive(run_dir: Path, progress_mode: str) -> None:
    """Drive the Run with a live display, then held-out evaluations, the report, the summary; exit with its outcome."""
    from ade_core.harness.run import drive_run
    from ade_core.progress import ProgressDisplay, default_mode
    from ade_core.run_summary import finish

    mode = default_mode() if progress_mode == "auto" else progress_mode
    display = ProgressDisplay(run_dir, mode)
    with _interruptible(run_dir):
        display.start()
        try:
            phase = drive_run(run_dir)
            finish(run_dir, phase, mode, display)
        finally:
            display.stop()
    if mode != "json":
        _summary(run_dir)
    code, why = _outcome(run_dir, phase)
    if code != exit_codes.OK:
        click.echo(why, err=True)
        sys.exit(code)


_progress_option = click.option(
    "--progress",
    "progress_mode",
    type=click.Choice(PROGRESS_MODES),
    default="auto",
    show_default=True,
    help="Live display: rich (a table, the default on a terminal), plain (a line per change, the default "
    "otherwise), json (one object per change), none.",
)


@click.command("run")
@click.argument("config_path", metavar="[CONFIG]", required=False)
@click.option("--set", "overrides", multiple=True, metavar="SECTION.KEY=VALUE", help="Override a config value.")
@click.option("--dry-run", is_flag=True, help="Simulated Engine and sandbox on a virtual clock (no training).")
@click.option("--run-dir", type=click.Path(file_okay=False, path_type=Path), help="Run directory (default: new).")
@click.option(
    "--agent",
    type=click.Choice(["offline", "openai"]),
    help="Agent backend for every role (same as --set agents.backend=...); see docs/agents.md.",
)
@_progress_option
def run_command(
    config_path: str | None,
    overrides: tuple[str, ...],
    dry_run: bool,
    run_dir: Path | None,
    agent: str | None,
    progress_mode: str,
) -> None:
    """Start a Run of CONFIG: bootstrap, search, final selection, held-out evaluation, report.

    Without CONFIG it runs examples/tiny-data-selection.toml (the embedded tiny world, offline agent).
    """
    from ade_core.cli_support import load_checked as _load_checked
    from ade_core.harness.run import init_run, run_id_of
    from ade_core.quiet import quiet_libraries as _quiet_libraries

    _quiet_libraries()
    if agent:
        overrides = (f"agents.backend={agent!r}", *overrides)
    loaded = _load_checked(str(config_path or default_config()), overrides, local_paths=not dry_run)
    from ade_core.agents import check_endpoints

    check_endpoints(loaded.operational)
    target = run_dir or _fresh_directory(Path(loaded.operational.run_dir) / run_id_of(loaded.experiment))
    if (target / "state.sqlite").exists():
        raise AdeError(f"{target} already holds a run; continue it with `ade resume {target}` or pass --run-dir")
    init_run(target, loaded, dry_run=dry_run)
    click.echo(f"[run] {target}: {'dry run, ' if dry_run else ''}task {loaded.experiment.task}", err=True)
    _drive(target, progress_mode)


@click.command("resume", epilog=RUN_HELP)
@click.argument("run_ref", metavar="RUN")
@_progress_option
@click.option(
    "--set",
    "overrides",
    multiple=True,
    metavar="SECTION.KEY=VALUE",
    help="Change an operational setting first (agents.*, review.*, operational.*); 𝓑 stays frozen.",
)
def resume_command(run_ref: str, progress_mode: str, overrides: tuple[str, ...]) -> None:
    """Continue RUN from its store (after Ctrl-C, a crash, a pause or a fork); never re-asks a committed question."""
    from ade_core.agents.backends import check_endpoints
    from ade_core.harness.liveness import controlling
    from ade_core.harness.operator import append_action, operator_state
    from ade_core.harness.resume_settings import change_settings
    from ade_core.harness.run import read_settings
    from ade_core.quiet import quiet_libraries as _quiet_libraries
    from ade_core.store import RunStore

    _quiet_libraries()
    run_dir = locate_run(run_ref)
    read_settings(run_dir)  # a store without run.json (not made by `ade run`) is refused before it is written
    if overrides:
        with controlling(run_dir):  # never under a controller that is driving the Run
            changes = change_settings(run_dir, overrides, check_endpoints)
        with RunStore.open(run_dir) as store:
            for key, old, new in changes:
                click.echo(f"[resume] {key}: {old!r} -> {new!r}", err=True)
            if changes:
                details = {"changes": [{"key": k, "old": o, "new": n} for k, o, n in changes]}
                store.record_operation("settings_changed", subject="run", details=details)
    with RunStore.open(run_dir) as store:
        record = store.get_model("run", "run")
        if record is not None and record.phase == "suspended":
            assert record.suspended is not None  # set while the Run is suspended
            append_action(store, "resume", reason=f"continue after suspension ({record.suspended.trial_id})")
        elif record is not None and operator_state(store) == "paused":
            append_action(store, "resume")
    _drive(run_dir, progress_mode)


@click.command("status", epilog=RUN_HELP)
@click.argument("run_ref", metavar="RUN")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def status_command(run_ref: str, as_json: bool) -> None:
    """Phase, per-Plan/Trial phase, active attempts, budget used, time per stage and the state digest.

    Reads the store only (it never writes); says "interrupted" when no process is driving an unfinished Run.
    """
    from ade_core.harness.status import format_status, run_status

    with _open_read_only(locate_run(run_ref)) as store:
        status = run_status(store)
    click.echo(json.dumps(status, indent=2, default=str) if as_json else format_status(status))


def _operator_command(action: str, help_text: str) -> click.Command:
    @click.command(action, help=help_text, epilog=f"{RUN_HELP} A completed or cancelled Run is refused.")
    @click.argument("run_ref", metavar="RUN")
    @click.option("--reason", default="", help="Why (kept in the operator ledger).")
    def command(run_ref: str, reason: str) -> None:
        from ade_core.harness.operator import append_action
        from ade_core.store import RunStore

        run_dir = locate_run(run_ref)
        with RunStore.open(run_dir) as store:
            entry = append_action(store, action, reason=reason)
        click.echo(f"ledger #{entry.sequence}: {action} {run_dir}")

    return command


@click.command("fork", epilog=RUN_HELP)
@click.argument("target", metavar="RUN@REV")
@click.option("--run-dir", type=click.Path(file_okay=False, path_type=Path), help="New run directory.")
def fork_command(target: str, run_dir: Path | None) -> None:
    """A new run continuing from revision REV of RUN (RUN itself is untouched); continue it with `ade resume`."""
    from ade_core.harness.fork import fork_run, parse_target

    reference, revision = parse_target(target)
    source = locate_run(reference)
    destination = run_dir or source.with_name(f"{source.name}-fork{revision}")
    fork_run(source, revision, destination)
    click.echo(f"forked {source}@{revision} -> {destination}; continue with: ade resume {destination}")


@click.command("heldout", epilog=RUN_HELP)
@click.argument("run_ref", metavar="RUN")
@click.option("--reason", default="", help="Why (kept in the operator ledger).")
@click.option("--json", "as_json", is_flag=True, help="Print the evaluation record as JSON.")
def heldout_command(run_ref: str, reason: str, as_json: bool) -> None:
    """Evaluate RUN's frozen final selection on the held-out benchmarks (operator only; into RUN/heldout/)."""
    from ade_core.harness.heldout import format_evaluation, run_heldout
    from ade_core.quiet import quiet_libraries as _quiet_libraries

    _quiet_libraries()
    evaluation, path = run_heldout(locate_run(run_ref), reason=reason)
    click.echo(evaluation.model_dump_json(indent=2) if as_json else format_evaluation(evaluation))
    click.echo(f"recorded in {path}", err=True)


COMMANDS: tuple[click.Command, ...] = (
    run_command,
    resume_command,
    status_command,
    _operator_command("pause", "Pause RUN at its next step boundary (ade resume continues it)."),
    _operator_command("finish", "Finish RUN: no new Plans; in-flight work completes, then final selection."),
    _operator_command("cancel", "Cancel RUN: unfinished Trials end cancelled; no final selection."),
    fork_command,
    heldout_command,
)
