"""Live progress of a Run: read from its store and its attempts' heartbeats, shown while it runs.

The display never talks to the controller: a background thread polls the run store (a
second read-only SQLite connection; WAL lets it read while the controller writes) and each
running attempt's ``heartbeat.json`` (training step, evaluation phase). So it shows the same
thing for ``ade run`` and ``ade resume``, and a crashed display cannot hurt a Run.

Modes: ``rich`` (a live table on a terminal), ``plain`` (one line per change, for logs),
``json`` (one JSON object per change, for scripts), ``none``.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TextIO

MODES = ("rich", "plain", "json", "none")


@dataclass(frozen=True)
class TrialProgress:
    """Where one Trial stands: its status, the running attempt's stage and a short detail."""

    trial_id: str
    plan_id: str
    status: str
    stage: str
    detail: str = ""
    scores: dict[str, float] | None = None

    def key(self) -> tuple[str, str, str]:
        """What counts as a change for line-per-change modes (not every training step)."""
        return (self.status, self.stage, "" if self.stage == "train" else self.detail)


@dataclass(frozen=True)
class RunProgress:
    """A snapshot of the whole Run for one refresh of the display."""

    run_id: str
    phase: str
    elapsed_s: float
    trials_done: int
    trials_planned: int
    eta_s: float | None
    base: dict[str, float] | None
    best: tuple[str, dict[str, float]] | None
    trials: list[TrialProgress] = field(default_factory=list)
    note: str = ""
    simulated: bool = False  # a dry run: every score is simulated


def _heartbeat(run_dir: Path, attempt_id: str) -> dict[str, Any]:
    path = run_dir / "attempts" / attempt_id.replace("/", "_") / "heartbeat.json"
    try:
        return dict(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError):
        return {}


def _stage(beat: dict[str, Any]) -> tuple[str, str]:
    phase, detail = str(beat.get("phase", "starting")), beat.get("detail") or {}
    if phase == "train" and "total" in detail:
        return "train", f"step {detail['step']}/{detail['total']}"
    if phase == "online_eval" and "total" in detail:
        return "online eval", f"checkpoint {int(detail.get('done', 0)) + 1}/{detail['total']}"
    if phase == "offline_eval":
        return "offline eval", f"step {detail.get('checkpoint', '?')}"
    return phase.replace("_", " "), ""


def metric_order(task_name: str) -> Any:
    """The task's ranking order of metrics (the same one final selection uses)."""
    from ade_core.harness.ranking import MetricOrder
    from ade_core.plugins import load_plugins

    task = load_plugins().task(task_name)
    return MetricOrder(task.spec.metric_order, {n: m.higher_is_better for n, m in task.metrics().items()})


def read_progress(run_dir: Path, store: Any, started: float, note: str = "", metrics: Any = None) -> RunProgress:
    """The Run's progress as its store and heartbeats show it now (``metrics``: the task's metric order)."""
    from ade_core.harness.run import frozen_config
    from ade_core.harness.snapshot import Snapshot
    from ade_core.schemas.trial import Unavailable

    record = store.get_model("run", "run")
    elapsed = time.monotonic() - started
    if record is None:
        return RunProgress("?", "initializing", elapsed, 0, 0, None, None, None, note=note)
    config = frozen_config(store, record)
    snap = Snapshot.read(store)
    attempts = {d.model().trial_id: d.model() for d in store.list("attempt")}
    trials: list[TrialProgress] = []
    for trial in snap.trials:
        scores = None if isinstance(trial.scores, Unavailable) else dict(trial.scores)
        stage: str = trial.status
        detail = ""
        attempt = attempts.get(trial.trial_id)
        if trial.status == "running" and attempt is not None and attempt.status == "running":
            stage, detail = _stage(_heartbeat(run_dir, attempt.attempt_id))
        elif trial.terminal and not snap.trial_done(trial):
            stage = "memory update"
        trials.append(TrialProgress(trial.trial_id, trial.plan_id, trial.status, stage, detail, scores))
    budget = config.budget
    planned = 1 + budget.coordinators * budget.plans_per_coordinator * budget.trials_per_plan
    done = sum(snap.trial_done(t) for t in snap.trials)
    eta = elapsed / done * max(0, planned - done) if done and record.phase in ("bootstrap", "search") else None
    ranking = snap.ranking(metrics or metric_order(config.task))
    best = (ranking[0].plan_id, dict(ranking[0].scores)) if ranking else None
    base = None if record.base_model is None or isinstance(record.base_model, Unavailable) else record.base_model
    if record.phase == "bootstrap" and record.base_model is None:
        note = note or "evaluating the base model"
    return RunProgress(
        record.run_id, record.phase, elapsed, done, planned, eta, base, best, trials, note, simulated=record.dry_run
    )


def _scores(scores: dict[str, float] | None) -> str:
    from ade_core.report.data import metric_label

    return " / ".join(f"{metric_label(k)} {v:.1f}" for k, v in scores.items()) if scores else "-"


def _clock(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes}:{secs:02d}"


def headline(p: RunProgress) -> str:
    """One line: run, phase, Trials done, elapsed and estimated time left, base and best scores."""
    best = f"{p.best[0]} {_scores(p.best[1])}" if p.best else "-"
    line = (
        f"{p.run_id} {p.phase}: {p.trials_done}/{p.trials_planned} Trials, elapsed {_clock(p.elapsed_s)}, "
        f"left ~{_clock(p.eta_s)}; base {_scores(p.base)}; best {best}"
        + (" (dry run: simulated scores)" if p.simulated else "")
    )
    return f"{line}; {p.note}" if p.note else line


def rich_table(p: RunProgress) -> Any:
    """The live display: a headline over one row per Trial."""
    from rich.table import Table

    table = Table(title=headline(p), title_justify="left", expand=False)
    for column in ("Plan", "Trial", "Status", "Stage", "Progress", "Simulated scores" if p.simulated else "Scores"):
        table.add_column(column)
    for t in p.trials:
        table.add_row(t.plan_id, t.trial_id, t.status, t.stage, t.detail, _scores(t.scores))
    return table


class ProgressDisplay:
    """Polls a Run every ``interval_s`` and renders it in one of :data:`MODES`."""

    def __init__(self, run_dir: Path, mode: str, *, interval_s: float = 0.5, stream: TextIO | None = None):
        if mode not in MODES:
            raise ValueError(f"unknown progress mode {mode!r}; choose one of {MODES}")
        self.run_dir, self.mode, self.interval_s = Path(run_dir), mode, interval_s
        self.stream = stream or sys.stderr
        self.started = time.monotonic()
        self.note = ""
        self._stop = threading.Event()
        self._seen: dict[str, tuple[str, str, str]] = {}
        self._phase = ""
        self._note = ""
        self._thread: threading.Thread | None = None
        self._metrics: Any = None

    def start(self) -> None:
        if self.mode != "none":
            self._thread = threading.Thread(target=self._loop, name="ade-progress", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def _loop(self) -> None:
        from ade_core.store import RunStore

        with RunStore.open(self.run_dir) as store:
            if self.mode == "rich":
                from rich.console import Console
                from rich.live import Live

                console = Console(file=self.stream)
                with Live(console=console, refresh_per_second=4, transient=False) as live:
                    while not self._stop.is_set():
                        live.update(rich_table(self._read(store)))
                        self._stop.wait(self.interval_s)
                    live.update(rich_table(self._read(store)))
                return
            while True:
                self._emit_changes(self._read(store))
                if self._stop.wait(self.interval_s):
                    self._emit_changes(self._read(store))
                    return

    def _read(self, store: Any) -> RunProgress:
        try:
            if self._metrics is None:
                record = store.get_model("run", "run")
                self._metrics = metric_order(record.task) if record is not None else None
            return read_progress(self.run_dir, store, self.started, self.note, self._metrics)
        except Exception as exc:  # a display glitch (a row mid-write) must never stop the Run
            return RunProgress("?", f"(progress unavailable: {type(exc).__name__})", 0.0, 0, 0, None, None, None)

    def _emit_changes(self, p: RunProgress) -> None:
        lines: list[str] = []
        if (p.phase, p.note) != (self._phase, self._note):  # a new phase, or a step inside one (held-out i/n)
            self._phase, self._note = p.phase, p.note
            lines.append(self._line(p, None))
        for t in p.trials:
            if self._seen.get(t.trial_id) != t.key():
                self._seen[t.trial_id] = t.key()
                lines.append(self._line(p, t))
        for line in lines:
            print(line, file=self.stream, flush=True)

    def _line(self, p: RunProgress, t: TrialProgress | None) -> str:
        if self.mode == "json":
            event: dict[str, Any] = {
                "elapsed_s": round(p.elapsed_s, 2),
                "run_id": p.run_id,
                "phase": p.phase,
                "trials_done": p.trials_done,
                "trials_planned": p.trials_planned,
                "eta_s": None if p.eta_s is None else round(p.eta_s, 1),
                "simulated": p.simulated,
            }
            if p.note:
                event["note"] = p.note
            if t is not None:
                event["trial"] = asdict(t)
            return json.dumps(event, sort_keys=True)
        if t is None:
            return f"[{_clock(p.elapsed_s)}] {headline(p)}"
        detail = f" {t.detail}" if t.detail else ""
        scores = _scores(t.scores) + (" (simulated)" if p.simulated and t.scores else "")
        return f"[{_clock(p.elapsed_s)}] {t.trial_id}: {t.status} ({t.stage}{detail}) {scores}"


@contextmanager
def progress(run_dir: Path, mode: str, **options: Any) -> Iterator[ProgressDisplay]:
    """Show the Run's progress while the ``with`` body drives it."""
    display = ProgressDisplay(run_dir, mode, **options)
    display.start()
    try:
        yield display
    finally:
        display.stop()


def default_mode(stream: TextIO | None = None) -> str:
    """``rich`` on a terminal, ``plain`` otherwise (logs, CI, pipes)."""
    stream = stream or sys.stderr
    return "rich" if stream.isatty() else "plain"
