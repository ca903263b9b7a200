"""What ``ade run`` and ``ade resume`` do once search has ended: the operator's held-out evaluations,
the report, and the summary table.

All of it runs after final selection, in the operator tier: held-out scores are written only to
the operator-only held-out store and can no longer steer search (paper Sec 3.4).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import click

from ade_core.progress import ProgressDisplay


def operator_heldout(run_dir: Path, display: ProgressDisplay | None = None) -> list[str]:
    """The final selection's held-out evaluation, then one per Trial (as configured); returns one line each.

    Checkpoints the held-out store already holds are skipped, so a resumed Run does not evaluate
    twice; the per-Trial pass scores its checkpoints in parallel worker processes.
    """
    from ade_core.harness.heldout import heldout_per_trial
    from ade_core.harness.run import frozen_config, read_settings
    from ade_core.schemas.run import FinalSelection
    from ade_core.store import RunStore

    with RunStore.open(run_dir) as store:
        record = store.get_model("run", "run")
        config = frozen_config(store, record) if record is not None else None
    if record is None or config is None or record.phase != "completed" or not config.evaluation.held_out:
        return []
    settings = read_settings(run_dir).operational.report
    final = isinstance(record.selection, FinalSelection) and settings.heldout_final
    if not final and not settings.heldout_per_trial:
        return []

    def progress(done: int, total: int) -> None:
        if display is not None:
            display.note = f"held-out evaluation {done}/{total} (operator tier, after final selection)"

    evaluations = heldout_per_trial(run_dir, final=final, per_trial=settings.heldout_per_trial, progress=progress)
    if display is not None:
        display.note = ""
    return [_heldout_line(e) for e, _ in evaluations]


def _heldout_line(evaluation: Any) -> str:
    macro = ", ".join(f"{k} {v:.1f}" if v is not None else f"{k} -" for k, v in evaluation.macro_avg.items())
    simulated = " (simulated)" if evaluation.engine == "simulated" else ""
    return f"held-out ({evaluation.scope}) {evaluation.trial_id}: macro {macro}{simulated}"


SIMULATED_TITLE = "dry run: every score below is SIMULATED (no model was trained or evaluated)"


def summary_table(run_dir: Path) -> Any:
    """The end-of-run table (rich): Plan, relation and sources, in-loop scores, conclusions, best marked."""
    from rich.table import Table

    from ade_core.report import metric_label, report_data

    data = report_data(run_dir)
    title = f"Run {run_dir.name}" + (f" — {SIMULATED_TITLE}" if data.dry_run else "")
    table = Table(title=title, title_justify="left")
    metrics = [metric_label(m) + (" (simulated)" if data.dry_run else "") for m in data.shown_metrics]
    for column in ("", "Plan", "Strategy", "Relation / sources", *metrics):
        table.add_column(column)
    for column in ("Realization", "Hypothesis", "Portfolio"):
        table.add_column(column)
    base = data.base_scores or {}
    table.add_row("", "Base", "(no training)", "-", *(_number(base.get(m)) for m in data.shown_metrics), "", "", "")
    for row in data.rows:
        sources = f"{row.relation}" + (f" ({', '.join(row.sources)})" if row.sources else "")
        scores = row.scores or {}
        table.add_row(
            "★" if row.best else "",
            row.plan_id,
            _short(row.direction.split(":")[0], 44),
            sources,
            *(_number(scores.get(m)) for m in data.shown_metrics),
            *(_short(row.conclusions.get(k, "")) for k in ("realization", "hypothesis", "portfolio")),
        )
    return table


def _number(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def _short(text: str, width: int = 28) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def finish(run_dir: Path, phase: str, mode: str, display: ProgressDisplay | None) -> None:
    """After the controller returns: held-out evaluations, the report, the table (or a JSON summary)."""
    from rich.console import Console

    from ade_core.harness.run import read_settings
    from ade_core.report import write_report

    started = time.monotonic()
    heldout = operator_heldout(run_dir, display) if phase == "completed" else []
    heldout_s = time.monotonic() - started
    if display is not None:
        display.stop()
    report = write_report(run_dir)
    if mode == "json":
        summary = {"run_dir": str(run_dir), "phase": phase, "report": str(report), "heldout": heldout}
        click.echo(json.dumps({**summary, "simulated": read_settings(run_dir).dry_run}))
        return
    if mode != "none":
        console = Console() if sys.stdout.isatty() else Console(width=160)  # logs: no 80-column wrap
        console.print(summary_table(run_dir))
    for line in heldout:
        click.echo(line)
    if heldout:
        click.echo(f"held-out evaluation took {heldout_s:.0f} s")
    click.echo(f"report: {report}")
