"""Experiment Packages: immutable, content-addressed directories of a Trial's evidence (paper Table 8).

Files are written once, made read-only, and listed with their sha256 in ``manifest.json``;
the directory is named after the manifest's digest. Every read verifies the digests, so a
tampered package is a typed error, never silently used. Held-out results never go here.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ade_core.errors import AdeError
from ade_core.schemas.common import canonical_json, sha256_digest
from ade_core.schemas.package import ExperimentPackage, RecordRef
from ade_core.specs import RecordSpec

MANIFEST = "manifest.json"
CATALOG = "catalog.json"


class PackageTamperedError(AdeError):
    """A package file no longer matches the digest recorded when it was written."""


def _file_digest(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return "sha256:" + digest.hexdigest()


def _write_jsonl(path: Path, records: Iterable[Mapping[str, Any]]) -> int:
    count = 0
    with path.open("w", encoding="utf-8") as handle:
        for record in records:
            handle.write(canonical_json(record) + "\n")
            count += 1
    return count


def write_package(
    root: Path,
    manifest_fields: Mapping[str, Any],
    records: Mapping[str, Iterable[Mapping[str, Any]]],
    schema: Iterable[RecordSpec],
    references: Mapping[str, Path] | None = None,
) -> Path:
    """Write records (JSONL) and large references (copied files), then seal the package.

    ``schema`` says which role may read each record family; every written family must be in it.
    """
    readable = {spec.name: spec.readable_by for spec in schema}
    unknown = sorted(set(records) - set(readable))
    if unknown:
        raise AdeError(f"records {unknown} are not declared in the task's package schema; declare them first")
    root.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".package-", dir=root))
    refs: list[RecordRef] = []
    files: dict[str, str] = {}
    for name, rows in sorted(records.items()):
        path = staging / f"{name}.jsonl"
        count = _write_jsonl(path, rows)
        files[path.name] = _file_digest(path)
        refs.append(RecordRef(name=name, content_digest=files[path.name], count=count, readable_by=readable[name]))
    for name, source in sorted((references or {}).items()):
        target = staging / "refs" / name
        target.parent.mkdir(exist_ok=True)
        shutil.copyfile(source, target)
        files[f"refs/{name}"] = _file_digest(target)
    package = ExperimentPackage(**manifest_fields, records=tuple(refs))
    catalog = {
        "records": [{"name": r.name, "count": r.count, "readable_by": list(r.readable_by)} for r in refs],
        "references": sorted(references or {}),
    }
    (staging / CATALOG).write_text(canonical_json(catalog) + "\n", encoding="utf-8")
    files[CATALOG] = _file_digest(staging / CATALOG)
    manifest = {"package": package.model_dump(mode="json"), "files": files}
    (staging / MANIFEST).write_text(canonical_json(manifest) + "\n", encoding="utf-8")
    digest = sha256_digest(manifest)
    final = root / f"package-{digest.split(':')[1][:16]}"
    for path in sorted(staging.rglob("*"), reverse=True):
        os.chmod(path, 0o555 if path.is_dir() else 0o444)
    os.chmod(staging, 0o555)
    if final.exists():  # the same evidence was packaged before: identical content, keep the first
        _make_writable(staging)
        shutil.rmtree(staging)
    else:
        staging.rename(final)
    return final


def _make_writable(path: Path) -> None:
    for item in [path, *path.rglob("*")]:
        os.chmod(item, 0o755 if item.is_dir() else 0o644)


@dataclass(frozen=True)
class OpenedPackage:
    """A verified package: the manifest and access to its records."""

    path: Path
    manifest: ExperimentPackage
    files: dict[str, str]

    def records(self, name: str) -> list[dict[str, Any]]:
        """All records of one family, verified against the manifest digest."""
        relative = f"{name}.jsonl"
        if relative not in self.files:
            raise KeyError(f"package has no record family {name!r}; it has {sorted(self.files)}")
        self._verify(relative)
        with (self.path / relative).open(encoding="utf-8") as handle:
            return [json.loads(line) for line in handle]

    def reference(self, name: str) -> Path:
        relative = f"refs/{name}"
        self._verify(relative)
        return self.path / relative

    def _verify(self, relative: str) -> None:
        path = self.path / relative
        if not path.is_file() or _file_digest(path) != self.files[relative]:
            raise PackageTamperedError(f"{path} does not match its recorded digest; the package was modified")


def open_package(path: Path) -> OpenedPackage:
    """Open and verify a package: manifest digest against the directory name, every file digest."""
    manifest_path = Path(path) / MANIFEST
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise PackageTamperedError(f"{manifest_path}: unreadable manifest ({exc})") from None
    digest = sha256_digest(manifest)
    if Path(path).name != f"package-{digest.split(':')[1][:16]}":
        raise PackageTamperedError(f"{manifest_path} does not match the package's content address")
    opened = OpenedPackage(Path(path), ExperimentPackage.model_validate(manifest["package"]), dict(manifest["files"]))
    for relative in opened.files:
        opened._verify(relative)
    return opened
