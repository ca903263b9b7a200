"""The exit codes every ``ade`` command uses (documented in docs/cli.md, whose table a test checks against TABLE)."""

from __future__ import annotations

from ade_core.errors import AdeError, EnvironmentProblem, StrategyFailure

OK = 0  # admitted, completed, valid
FAILED = 1  # an inadmissible or failing strategy, a failed Run or Trial
USAGE = 2  # a usage or configuration error: fix the command line or 𝓑
ENVIRONMENT = 3  # the machine lacks something: a local model or data folder, a system tool, a GPU or package
INTERRUPTED = 130  # 128 + SIGINT: Ctrl-C stopped a Run (SIGTERM gives 128 + 15 = 143); `ade resume` continues it

TABLE = (
    (OK, "success: admitted, completed, valid"),
    (FAILED, "the strategy is inadmissible or failed, or the Run/Trial failed"),
    (USAGE, "usage or configuration error (a bad option, a config that does not validate, not a run)"),
    (
        ENVIRONMENT,
        "environment: a missing local model, data folder or system tool, or a GPU, package or sandbox layer the "
        "config needs (`ade doctor CONFIG` lists them all)",
    ),
    (INTERRUPTED, "interrupted by Ctrl-C (SIGINT; SIGTERM exits 143): `ade resume RUN` continues the Run"),
)


def exit_code_for(error: AdeError) -> int:
    """The exit code of a typed error."""
    if isinstance(error, EnvironmentProblem):
        return ENVIRONMENT
    if isinstance(error, StrategyFailure):
        return FAILED
    return USAGE


def as_typed(error: Exception) -> AdeError | None:
    """``error`` as the typed error a command reports, or None for a bug (which keeps its traceback).

    ade-sandbox is stdlib-only and raises its own errors; the one a user meets at the command line,
    an isolation level this machine cannot reach (no bubblewrap, no Landlock), is the machine's.
    """
    from ade_sandbox import IsolationUnavailable

    if isinstance(error, AdeError):
        return error
    if isinstance(error, IsolationUnavailable):
        return EnvironmentProblem(f"{error} (`ade sandbox doctor` shows each layer)")
    return None
