"""Which run a command means: a run directory, or a run id looked up under ``./runs``.

Run commands never create a store: one pointed at anything else is refused before it writes
(``RunStore.open`` would otherwise make an empty store there and report it as a run).
"""

from __future__ import annotations

from pathlib import Path

from ade_core.errors import NotARunError, did_you_mean

STATE_FILE = "state.sqlite"  # ade_core.store.STATE_FILE, not imported: every `ade` command loads this module

RUNS_DIR = Path("runs")  # operational.run_dir's default: where `ade run` puts runs, relative to where it ran
RUN_HELP = (
    "RUN is a run directory (as `ade run` printed it, e.g. runs/tiny-data-selection-0837c328) or a run id "
    "looked up under ./runs (e.g. tiny-data-selection-0837c328)."
)


def known_runs(root: Path = RUNS_DIR) -> list[str]:
    """The run ids under ``root``: its subdirectories holding a run store."""
    return sorted(p.parent.name for p in root.glob(f"*/{STATE_FILE}"))


def locate_run(reference: str | Path, root: Path = RUNS_DIR) -> Path:
    """The run directory ``reference`` names; ``NotARunError`` (naming where it looked) when there is none."""
    path = Path(reference)
    if (path / STATE_FILE).is_file():
        return path
    by_id = root / path
    bare = len(path.parts) == 1 and not path.is_absolute()
    if bare and (by_id / STATE_FILE).is_file():
        return by_id
    where = f"neither {path}/ nor {by_id}/ holds a" if bare else f"{path}/ holds no"
    runs = known_runs(root)
    listing = (
        f"runs under {root}/: {', '.join(runs[:5])}{', ...' if len(runs) > 5 else ''}"
        if runs
        else f"there are no runs under {root.resolve()}/ (start one with `ade run CONFIG`)"
    )
    raise NotARunError(
        f"{str(reference)!r} is not an ADE run: {where} run store ({STATE_FILE})"
        f"{did_you_mean(path.name, runs)}. Pass a run directory or a run id; {listing}"
    )
