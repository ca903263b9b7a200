"""Typed errors: every failure a user can act on names the value and the fix."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class AdeError(Exception):
    """Base of every error ADE raises on purpose; the CLI prints these without a traceback."""


class ConfigError(AdeError):
    """A configuration file or override is invalid."""


class PluginError(AdeError):
    """A plugin failed to load, broke a hook contract, or raised inside a hook."""


class PluginLoadError(PluginError):
    """An entry point in group ``ade`` could not be imported or registered."""


class DuplicateTaskError(PluginError):
    """Two distributions claim the same task name."""


class MissingHookError(PluginError):
    """The plugin that owns a task does not implement a hook the caller needs."""


class UnknownTaskError(AdeError):
    """A task name that no installed plugin registers."""


class UnknownSchemaError(AdeError):
    """A schema name that ``ade schema`` does not export."""


class ScaffoldError(AdeError):
    """``ade new-task`` cannot render the requested package."""


def did_you_mean(value: str, known: Iterable[str]) -> str:
    """Return a " (did you mean 'x'?)" suffix for the closest known name, or ""."""
    matches = difflib.get_close_matches(value, list(known), n=1, cutoff=0.5)
    return f" (did you mean {matches[0]!r}?)" if matches else ""
