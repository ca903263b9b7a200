"""``ade resume RUN --set KEY=VALUE``: change a Run's operational settings between resumes.

Only operational settings may change (agents, review, executor, generation, recovery, ...): they live
in the run directory's ``run.json``, outside 𝓑's digest. A 𝓑 key is refused, because 𝓑 is frozen
for the Run. The new settings are validated whole before ``run.json`` is replaced (atomically), and
every changed key goes to the operator's ledger.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ade_core.config import (
    OPERATIONAL_KEY,
    OPERATIONAL_SHORTCUTS,
    apply_overrides,
    deep_merge,
    operational_changes,
    parse_override,
)
from ade_core.errors import ConfigError
from ade_core.harness.run import RUN_FILE, read_settings
from ade_core.schemas.config import OperationalSettings


def change_settings(
    run_dir: Path, overrides: Sequence[str], check: Callable[[OperationalSettings], None] = lambda _: None
) -> list[tuple[str, Any, Any]]:
    """Apply ``overrides`` to the Run's operational settings, once ``check`` accepts the result; return the
    (key, old, new) changes."""
    for text in overrides:
        keys, _ = parse_override(text)
        if keys[0] != OPERATIONAL_KEY and keys[0] not in OPERATIONAL_SHORTCUTS:
            raise ConfigError(
                f"--set {text!r}: {'.'.join(keys)!r} belongs to 𝓑, which is frozen for this Run; between resumes "
                f"only operational settings may change ({', '.join(OPERATIONAL_SHORTCUTS)}.* or {OPERATIONAL_KEY}.*)"
            )
    settings = read_settings(run_dir)
    data = apply_overrides({OPERATIONAL_KEY: settings.operational.model_dump(mode="json")}, overrides)
    merged = data.pop(OPERATIONAL_KEY)
    for name in OPERATIONAL_SHORTCUTS:  # [agents] and [review] written at top level
        if name in data:
            merged = deep_merge(merged, {name: data.pop(name)})
    try:
        operational = OperationalSettings.model_validate(merged)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise ConfigError(f"--set {' '.join(overrides)}: the settings would be invalid ({problems})") from None
    check(operational)
    changes = operational_changes(settings.operational, operational)
    if changes:
        path = Path(run_dir) / RUN_FILE
        staging = path.with_suffix(".tmp")
        staging.write_text(settings.model_copy(update={"operational": operational}).model_dump_json(indent=2))
        os.replace(staging, path)
    return changes
