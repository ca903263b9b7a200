"""The run report: ``runs/<id>/report.html`` (self-contained HTML with matplotlib figures) and its data.

``report_data`` / ``summary_rows`` read a run directory into plain dataclasses (the end-of-run
table reuses them); ``write_report`` renders the HTML. Names resolve on first use, so the CLI can
register ``ade report`` without importing the Harness or matplotlib on every command.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ade_core.report.data import ReportData, SummaryRow, metric_label, report_data, summary_rows
    from ade_core.report.html import REPORT_FILE, render_report, write_report

_HOMES = {
    "ReportData": "data",
    "SummaryRow": "data",
    "metric_label": "data",
    "report_data": "data",
    "summary_rows": "data",
    "REPORT_FILE": "html",
    "render_report": "html",
    "write_report": "html",
}


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f"ade_core.report.{_HOMES[name]}"), name)


__all__ = [
    "REPORT_FILE",
    "ReportData",
    "SummaryRow",
    "metric_label",
    "render_report",
    "report_data",
    "summary_rows",
    "write_report",
]
