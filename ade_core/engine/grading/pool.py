"""Grading a batch of responses in worker processes, each sample under the grader's time limit.

Paper Appendix D.5: a grader that times out or raises scores 0 and the sample stays in the
denominator. The limit is enforced from the parent: a worker that does not answer within
``timeout_s`` (plus a little slack) is killed and replaced, whatever the grader is doing.
Graders run in each worker's main thread, so math-verify's SIGALRM timeouts work as well.

Graders must be picklable by reference: module-level functions of an importable module
(not lambdas, closures or functions defined in ``__main__``), since workers are started by a
fork server and import the grader afresh. Starting a worker costs that import (math-verify pulls
in sympy: about 0.4 s), so an Engine attempt holds one pool for all of its evaluations. The fork
server never imports from the working directory (``executors.interpreter``).
"""

from __future__ import annotations

import multiprocessing
import signal
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from typing import Any, Literal

from ade_core.errors import AdeError
from ade_core.executors.interpreter import safe_path_children
from ade_core.specs import GraderSpec

Status = Literal["graded", "timeout", "error"]
Grade = Callable[[str, Any], bool]
Score = Callable[[str, Any], float]

SLACK_S = 0.5  # IPC and scheduling jitter on top of the grader's own limit ...
SLACK_FRACTION = 0.05  # ... or this share of it, for long limits whose runner overshoots by a launch or two
STARTUP_S = 60.0  # a worker that cannot even import the grader within this is a broken installation
MAX_CHUNK = 32  # samples sent per message: amortizes IPC, small enough to balance the tail of a batch
DETAIL_CHARS = 500


class GradingPoolError(AdeError):
    """The grading pool could not run at all, so the evaluation is missing rather than scored."""


@dataclass(frozen=True)
class GradeOutcome:
    """The verdict on one sample: correct only when status is 'graded' and the grader said so."""

    correct: bool
    status: Status
    detail: str = ""
    score: float | None = None  # the grader's continuous score, where it has one and grading finished


def _serve(conn: Connection, grade: Grade, score: Score | None = None) -> None:
    """Worker loop: grade (and score) every sample of each chunk received, answering one sample at a time."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    conn.send(("ready",))
    while True:
        chunk = conn.recv()
        if chunk is None:
            return
        for index, response, reference in chunk:
            try:
                value = None if score is None else float(score(response, reference))
                conn.send((index, "graded", bool(grade(response, reference)), "", value))
            except Exception as exc:
                conn.send((index, "error", False, f"{type(exc).__name__}: {exc}"[:DETAIL_CHARS], None))


@dataclass
class _Worker:
    """The parent's view of one worker: its process, its pipe, and the samples it owes."""

    process: multiprocessing.process.BaseProcess
    conn: Connection
    ready: bool = False
    owed: deque[int] = field(default_factory=deque)
    deadline: float = 0.0

    def stop(self, *, kill: bool) -> None:
        """End the worker: ask it to exit when it is idle, kill it when it is busy or does not listen."""
        if not kill:
            try:
                self.conn.send(None)
                self.process.join(timeout=1.0)
            except OSError:
                pass
        if self.process.is_alive():
            self.process.kill()
            self.process.join()
        self.conn.close()


class GradingPool:
    """Worker processes for one grader, kept alive across batches until closed.

    Starting a worker costs an interpreter fork plus the grader's imports (math-verify pulls in
    sympy), so an evaluation that grades several batches should hold one pool for all of them.
    """

    def __init__(self, grader: GraderSpec, workers: int = 2) -> None:
        if workers < 1:
            raise ValueError(f"a grading pool needs at least 1 worker (got workers={workers})")
        self.grader = grader
        self.size = workers
        self.limit = grader.timeout_s + max(SLACK_S, SLACK_FRACTION * grader.timeout_s)
        self.context = multiprocessing.get_context("forkserver")
        self.workers: list[_Worker] = []
        self.pairs: Sequence[tuple[str, Any]] = ()
        self.outcomes: list[GradeOutcome | None] = []
        self.pending: deque[list[int]] = deque()

    def __enter__(self) -> GradingPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop every worker; the pool can still grade afterwards, starting fresh ones."""
        for worker in self.workers:
            worker.stop(kill=bool(worker.owed))
        self.workers = []

    def grade(self, pairs: Sequence[tuple[str, Any]]) -> list[GradeOutcome]:
        """Grade ``(response, reference)`` pairs; outcomes come back in input order."""
        if not pairs:
            return []
        self.pairs, self.outcomes = pairs, [None] * len(pairs)
        count = min(self.size, len(pairs))
        size = max(1, min(MAX_CHUNK, len(pairs) // (count * 8)))
        self.pending = deque(list(range(start, min(start + size, len(pairs)))) for start in range(0, len(pairs), size))
        try:
            while len(self.workers) < count:
                self.workers.append(self._start())
            self._run()
        finally:
            # Workers still owing verdicts (the batch was interrupted) would answer into the next batch.
            for worker in [worker for worker in self.workers if worker.owed]:
                worker.stop(kill=True)
                self.workers.remove(worker)
            self.pairs, self.pending = (), deque()
        return [outcome for outcome in self.outcomes if outcome is not None]

    def _start(self) -> _Worker:
        parent, child = self.context.Pipe()
        process = self.context.Process(target=_serve, args=(child, self.grader.grade, self.grader.score), daemon=True)
        with safe_path_children():  # the fork server starts with `python -c`: keep the working directory out
            process.start()
        child.close()
        return _Worker(process, parent, deadline=time.monotonic() + STARTUP_S)

    def _assign(self, worker: _Worker) -> None:
        indices = self.pending.popleft()
        try:
            worker.conn.send([(i, *self.pairs[i]) for i in indices])
        except OSError:  # it died while idle: no sample of this chunk was started, so none is charged
            self.pending.appendleft(indices)
            worker.stop(kill=True)
            self.workers[self.workers.index(worker)] = self._start()
            return
        worker.owed.extend(indices)
        worker.deadline = time.monotonic() + self.limit

    def _replace(self, worker: _Worker, status: Status, detail: str) -> None:
        """Settle the sample ``worker`` was on, hand its unstarted samples back, and start a successor."""
        worker.stop(kill=True)
        self.workers.remove(worker)
        if not worker.ready:
            raise GradingPoolError(
                f"a worker for grader {self.grader.name!r} failed to start ({detail}); check that "
                f"{self.grader.grade.__module__}.{self.grader.grade.__qualname__} imports in a fresh interpreter"
            )
        if worker.owed:
            self.outcomes[worker.owed.popleft()] = GradeOutcome(False, status, detail)
        if worker.owed:
            self.pending.appendleft(list(worker.owed))
        if self.pending:
            self.workers.append(self._start())

    def _receive(self, worker: _Worker) -> None:
        while worker.conn.poll():
            message = worker.conn.recv()
            if message[0] == "ready":
                worker.ready = True
            else:
                index, status, correct, detail, value = message
                self.outcomes[index] = GradeOutcome(correct, status, detail, value)
                worker.owed.popleft()
                worker.deadline = time.monotonic() + self.limit

    def _run(self) -> None:
        while self.pending or any(worker.owed for worker in self.workers):
            for worker in list(self.workers):
                if worker.ready and not worker.owed and self.pending:
                    self._assign(worker)
            clocks = [worker.deadline for worker in self.workers if worker.owed or not worker.ready]
            timeout = max(0.0, min(clocks) - time.monotonic()) if clocks else None
            ready = wait([worker.conn for worker in self.workers], timeout=timeout)
            for worker in list(self.workers):
                if worker.conn in ready:
                    try:
                        self._receive(worker)
                    except (EOFError, OSError):
                        worker.process.join(timeout=1.0)  # reap it, so the exit code is known
                        self._replace(worker, "error", f"grader worker died (exit code {worker.process.exitcode})")
                elif (worker.owed or not worker.ready) and time.monotonic() >= worker.deadline:
                    what = f"no verdict within {self.grader.timeout_s:g} s" if worker.ready else "no start-up"
                    self._replace(worker, "timeout", f"{what}; worker killed and replaced")


def grade_batch(grader: GraderSpec, pairs: Sequence[tuple[str, Any]], workers: int = 2) -> list[GradeOutcome]:
    """Grade ``(response, reference)`` pairs in ``workers`` fresh processes; outcomes come back in input order.

    Each sample gets ``grader.timeout_s``: a worker that overruns it is killed and replaced and the
    sample is a ``timeout``; a grader that raises gives an ``error``. Both are incorrect. Raises
    ``GradingPoolError`` only when no worker can start, which makes the evaluation missing.
    Several batches in a row are cheaper through one ``GradingPool``.
    """
    with GradingPool(grader, max(1, workers)) as pool:
        return pool.grade(pairs)
