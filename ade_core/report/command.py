"""``ade report RUN``: (re)generate a run's self-contained HTML report from its store."""

from __future__ import annotations

from pathlib import Path

import click

from ade_core.errors import NotARunError
from ade_core.harness.locate import RUN_HELP, locate_run


@click.command("report", epilog=RUN_HELP)
@click.argument("run_ref", metavar="RUN")
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the report here instead of RUN/report.html.",
)
def report_command(run_ref: str, out: Path | None) -> None:
    """Write RUN/report.html: scores over time, Plan lineage, time per stage, tokens, every Trial.

    The store is only read."""
    from ade_core.report.html import write_report

    try:
        path = write_report(locate_run(run_ref), out)
    except LookupError as exc:  # a run store without an initialized run
        raise NotARunError(str(exc)) from None
    click.echo(f"report: {path}")
