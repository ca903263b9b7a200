"""``ade fork RUN@REV``: a new run continuing from an earlier revision of another; the source is untouched."""

from __future__ import annotations

import shutil
from pathlib import Path

from ade_core.errors import AdeError
from ade_core.harness.heldout import lineage_seen
from ade_core.harness.run import RUN_FILE
from ade_core.store import RunStore, fork_store


def parse_target(text: str) -> tuple[Path, int]:
    """``RUN@REV`` -> (run directory, revision)."""
    run, sep, rev = text.rpartition("@")
    if not sep or not run or not rev.isdigit():
        raise AdeError(f"expected RUN@REV, e.g. runs/my-run@42 (got {text!r})")
    return Path(run), int(rev)


def fork_run(source_dir: Path | str, revision: int, target_dir: Path | str) -> Path:
    """Fork the run in ``source_dir`` at ``revision`` into ``target_dir``; resume it with ``ade resume``.

    The fork's run record names its origin (``forked_from``) and the held-out evaluations its
    lineage had made by now (``held_out_seen``: its own held-out results will not be fresh); its
    Trials' packages stay in the source run directory, which they reference. The held-out store
    is never copied.
    """
    source_dir, target_dir = Path(source_dir), Path(target_dir)
    if not (source_dir / RUN_FILE).is_file():
        raise AdeError(f"{source_dir} is not an ADE run directory (no {RUN_FILE})")
    with RunStore.open_read_only(source_dir) as source, fork_store(source, revision, target_dir) as target:
        record = target.get_model("run", "run")
        if record is None:
            raise AdeError(f"revision {revision} of {source_dir} is before the run was initialized")
        shutil.copyfile(source_dir / RUN_FILE, target_dir / RUN_FILE)
        origin = f"{source_dir.name}@{revision}"
        source_record = source.get_model("run", "run")
        assert source_record is not None
        # Sec 3.4: a fork made after held-out evaluation carries what its lineage had seen, at any revision.
        seen = lineage_seen(source_dir, source_record)
        with target.transition(
            "run_forked", actor="harness", subject="run", payload={"from": str(source_dir), "held_out_seen": len(seen)}
        ) as tx:
            tx.put("run", "run", record.model_copy(update={"forked_from": origin, "held_out_seen": seen}))
    return target_dir
