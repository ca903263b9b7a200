"""A dry run with revisits and a held-out record, built through the CLI, for the report tests."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "examples" / "tiny-data-selection.toml"
# Three Coordinators with four Plans each: the offline policy revisits and cites earlier Plans by then.
BUDGET = ("budget.coordinators=3", "budget.plans_per_coordinator=4", "budget.trials_per_plan=1")
# The held-out evaluations `ade run` makes by itself are off: the tests add one with `ade heldout`.
NO_HELDOUT = ("operational.report.heldout_final=false", "operational.report.heldout_per_trial=false")


def ade(*args: str) -> str:
    """Run the ``ade`` CLI in a subprocess (as a user would); fail with its output if it fails."""
    done = subprocess.run([sys.executable, "-m", "ade_core.cli", *args], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, f"ade {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout


@dataclass(frozen=True)
class ReportRun:
    """The run directory, its report after ``ade heldout``, and a report written before it."""

    run_dir: Path
    report: Path
    before_heldout: Path


def build_report_run(root: Path) -> ReportRun:
    run_dir = root / "run"
    overrides = [arg for item in (*BUDGET, *NO_HELDOUT) for arg in ("--set", item)]
    ade("run", str(CONFIG), "--dry-run", "--run-dir", str(run_dir), *overrides)
    before = root / "before-heldout.html"
    ade("report", str(run_dir), "--out", str(before))
    ade("heldout", str(run_dir))
    ade("report", str(run_dir))
    return ReportRun(run_dir, run_dir / "report.html", before)


class Page(HTMLParser):
    """The parts of a report the tests check: images, summary rows, Trial sections, every URL-bearing attribute."""

    def __init__(self, text: str):
        super().__init__()
        self.images: dict[str, str] = {}
        self.urls: list[str] = []
        self.tags: set[str] = set()
        self.rows: dict[str, dict[str, str]] = {}  # summary table: plan -> metric -> data-value
        self.best: list[str] = []
        self.trials: list[str] = []
        self._table: str | None = None
        self._row: str | None = None
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        self.tags.add(tag)
        self.urls += [v for k, v in a.items() if k in {"src", "href", "srcset", "action", "poster", "data"}]
        if tag == "img":
            self.images[a.get("id", "")] = a.get("src", "")
        elif tag == "table":
            self._table = a.get("id")
        elif tag == "tr" and self._table == "summary":
            self._row = a.get("data-plan")
            if self._row:
                self.rows[self._row] = {}
                if "best" in a.get("class", "").split():
                    self.best.append(self._row)
        elif tag == "td" and self._row and "data-metric" in a:
            self.rows[self._row][a["data-metric"]] = a.get("data-value", "")
        elif tag == "section" and "data-trial" in a:
            self.trials.append(a["data-trial"])

    def handle_endtag(self, tag: str) -> None:
        if tag == "table":
            self._table = None
        elif tag == "tr":
            self._row = None


class HeldOutTable(HTMLParser):
    """The report's per-benchmark held-out table: groups (column key -> label), cells, columns not evaluated."""

    def __init__(self, text: str):
        super().__init__()
        self.inside = False
        self.simulated = ""
        self.groups: dict[str, str] = {}
        self.rows: list[str] = []
        self.cells: dict[tuple[str, str, str], str] = {}  # (benchmark, column, metric) -> data-value
        self.missing: list[str] = []
        self._group: str | None = None
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "table" and a.get("id") == "heldout-table":
            self.inside, self.simulated = True, a.get("data-simulated", "")
        elif not self.inside:
            return
        elif tag == "tr" and "data-benchmark" in a:
            self.rows.append(a["data-benchmark"])
        elif tag == "th" and "data-column" in a:
            self._group = a["data-column"]
            self.groups[self._group] = ""
        elif tag == "td" and "missing" in a.get("class", ""):
            self.missing.append(a["data-column"])
        elif tag == "td" and "data-metric" in a:
            self.cells[(self.rows[-1], a["data-column"], a["data-metric"])] = a["data-value"]

    def handle_data(self, data: str) -> None:
        if self._group is not None:
            self.groups[self._group] += data

    def handle_endtag(self, tag: str) -> None:
        if tag == "th":
            self._group = None
        elif tag == "table":
            self.inside = False
