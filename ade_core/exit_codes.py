"""The exit codes every ``ade`` command uses (documented in docs/cli.md)."""

from __future__ import annotations

from ade_core.errors import AdeError, EnvironmentProblem, StrategyFailure

OK = 0  # admitted, completed, valid
FAILED = 1  # an inadmissible or failing strategy, a failed Run or Trial
USAGE = 2  # a usage or configuration error: fix the command line or 𝓑
ENVIRONMENT = 3  # the machine lacks something: a local model or data folder, a system tool

TABLE = (
    (OK, "success: admitted, completed, valid"),
    (FAILED, "the strategy is inadmissible or failed, or the Run/Trial failed"),
    (USAGE, "usage or configuration error (a bad option, a config that does not validate, not a run)"),
    (ENVIRONMENT, "environment: a missing local model, data folder or system tool"),
)


def exit_code_for(error: AdeError) -> int:
    """The exit code of a typed error."""
    if isinstance(error, EnvironmentProblem):
        return ENVIRONMENT
    if isinstance(error, StrategyFailure):
        return FAILED
    return USAGE
