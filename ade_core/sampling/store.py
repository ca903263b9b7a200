"""Where a sampling run keeps its records, so that an interrupted run resumes where it stopped.

``<out>/sampling.json`` holds the settings (sampler, budget, decoding, seed, model, input digest);
``<out>/samples.jsonl`` one ``ProblemSamples`` per line, a chunk's lines in one write, flushed and
synced before the next chunk starts. On resume, a torn last line is cut off, chunks whose problems
are all recorded are skipped, and a chunk recorded only in part is drawn again in full (same seed)
with only its missing problems appended. Resuming with other settings is refused, naming them.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from ade_core.sampling.samplers import ProblemSamples, SamplingError

SETTINGS_FILE = "sampling.json"
RECORDS_FILE = "samples.jsonl"


class SampleStore:
    """The records of one sampling run in ``out``."""

    def __init__(self, out: Path | str):
        self.out = Path(out)
        self.records_path = self.out / RECORDS_FILE

    def open(self, settings: dict[str, Any]) -> set[str]:
        """Start or resume with ``settings``; returns the ids of the problems already recorded."""
        self.out.mkdir(parents=True, exist_ok=True)
        path = self.out / SETTINGS_FILE
        if path.is_file():
            before = json.loads(path.read_text(encoding="utf-8"))
            changed = sorted(key for key in set(before) | set(settings) if before.get(key) != settings.get(key))
            if changed:
                shown = ", ".join(f"{key}: {before.get(key)!r} -> {settings.get(key)!r}" for key in changed)
                raise SamplingError(
                    f"{self.out} holds a sampling run with other settings ({shown}); resume it with the same "
                    "settings, or sample into a new --out directory"
                )
        else:
            staging = path.with_suffix(".tmp")
            staging.write_text(json.dumps(settings, indent=2, sort_keys=True) + "\n", encoding="utf-8")
            staging.replace(path)
        self._cut_torn_line()
        return {record.problem_id for record in self.records()}

    def _cut_torn_line(self) -> None:
        if not self.records_path.is_file():
            return
        data = self.records_path.read_bytes()
        if data and not data.endswith(b"\n"):
            with self.records_path.open("r+b") as handle:
                handle.truncate(data.rfind(b"\n") + 1)

    def append(self, results: Sequence[ProblemSamples]) -> None:
        """Record a chunk's problems in one write, durable before this returns."""
        if not results:
            return
        text = "".join(json.dumps(result.to_json(), sort_keys=True) + "\n" for result in results)
        with self.records_path.open("a", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())

    def records(self) -> list[ProblemSamples]:
        if not self.records_path.is_file():
            return []
        lines = self.records_path.read_text(encoding="utf-8").splitlines()
        return [ProblemSamples.from_json(json.loads(line)) for line in lines if line.strip()]


def chunks(count: int, size: int) -> Iterator[tuple[int, range]]:
    """``(chunk index, problem indices)`` in input order."""
    for index, start in enumerate(range(0, count, size)):
        yield index, range(start, min(start + size, count))


def run_chunks(
    ids: Sequence[str],
    size: int,
    done: set[str],
    draw: Callable[[int, range], list[ProblemSamples]],
    store: SampleStore,
    progress: Callable[[int, int], None] | None = None,
) -> int:
    """Draw every chunk not yet fully recorded and append its missing problems; returns how many were drawn."""
    drawn = 0
    finished = sum(1 for problem_id in ids if problem_id in done)
    if progress is not None:
        progress(finished, len(ids))
    for index, members in chunks(len(ids), size):
        if all(ids[i] in done for i in members):
            continue
        results = [r for r in draw(index, members) if r.problem_id not in done]
        store.append(results)
        done.update(r.problem_id for r in results)
        drawn += len(results)
        finished += len(results)
        if progress is not None:
            progress(finished, len(ids))
    return drawn
