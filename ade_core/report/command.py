"""``ade report RUN``: (re)generate a run's self-contained HTML report from its store."""

from __future__ import annotations

from pathlib import Path

import click


@click.command("report")
@click.argument("run_dir", metavar="RUN", type=click.Path(file_okay=False, exists=True, path_type=Path))
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the report here instead of RUN/report.html.",
)
def report_command(run_dir: Path, out: Path | None) -> None:
    """Write RUN/report.html: scores over time, Plan lineage, time per stage, tokens, every Trial."""
    from ade_core.report.html import write_report

    try:
        path = write_report(run_dir, out)
    except LookupError as exc:  # no initialized run in RUN
        raise click.ClickException(str(exc)) from exc
    click.echo(f"report: {path}")
