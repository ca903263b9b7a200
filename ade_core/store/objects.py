"""Content-addressed object store: immutable blobs named by ``sha256:<hex>`` under ``<root>/objects/``.

Layout: ``objects/ab/cdef…`` (the first two hex digits fan out into 256 directories so no
directory grows huge). Writes go to ``objects/.tmp/`` and are fsynced, then renamed into place
with ``os.replace``, so a reader (or a crash) never sees a partial object under its final name.
Every read re-hashes the bytes: an object that no longer matches its digest raises
``ObjectCorrupt`` instead of feeding wrong evidence into a run.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any, BinaryIO

from ade_core.errors import ObjectCorrupt, ObjectMissing, ObjectStoreError
from ade_core.schemas.common import canonical_json

_DIGEST = re.compile(r"^sha256:([0-9a-f]{64})$")
_FAN = re.compile(r"^[0-9a-f]{2}$")
_REST = re.compile(r"^[0-9a-f]{62}$")
_CHUNK = 1 << 20


def _hex(digest: str) -> str:
    match = _DIGEST.match(digest) if isinstance(digest, str) else None
    if match is None:
        raise ObjectStoreError(
            f"not an object digest: {digest!r}; expected 'sha256:' followed by 64 lowercase hex digits"
        )
    return match.group(1)


def _fsync_dir(path: Path) -> None:
    """Make a rename in ``path`` durable (best effort where directories cannot be opened)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


class ObjectStore:
    """Immutable blobs addressed by their SHA-256; puts are atomic and idempotent, reads are verified."""

    def __init__(self, root: Path | str):
        self.root = Path(root)
        self.objects_dir = self.root / "objects"
        self._tmp_dir = self.objects_dir / ".tmp"

    def path_for(self, digest: str) -> Path:
        """Where the object ``digest`` lives (whether or not it is stored)."""
        hex_digest = _hex(digest)
        return self.objects_dir / hex_digest[:2] / hex_digest[2:]

    def __contains__(self, digest: object) -> bool:
        return isinstance(digest, str) and _DIGEST.match(digest) is not None and self.path_for(digest).is_file()

    # -- writes --------------------------------------------------------------------------------

    def _publish(self, tmp: Path, hex_digest: str) -> str:
        """Move the fsynced temp file into place (or drop it if the object is already stored)."""
        digest = f"sha256:{hex_digest}"
        final = self.path_for(digest)
        if final.is_file():
            tmp.unlink()
            return digest
        final.parent.mkdir(parents=True, exist_ok=True)
        os.chmod(tmp, 0o444)
        os.replace(tmp, final)
        _fsync_dir(final.parent)
        return digest

    def _write_stream(self, source: IO[bytes]) -> str:
        self._tmp_dir.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(dir=self._tmp_dir, prefix="put-")
        tmp = Path(name)
        hasher = hashlib.sha256()
        try:
            with os.fdopen(fd, "wb") as out:
                while chunk := source.read(_CHUNK):
                    hasher.update(chunk)
                    out.write(chunk)
                out.flush()
                os.fsync(out.fileno())
            return self._publish(tmp, hasher.hexdigest())
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise

    def put_bytes(self, data: bytes) -> str:
        """Store ``data``; return its digest. Storing bytes already present writes nothing."""
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        if digest in self:
            return digest
        return self._write_stream(io.BytesIO(data))

    def put_file(self, path: Path | str) -> str:
        """Store a copy of the file at ``path`` (streamed, any size); return its digest."""
        with open(path, "rb") as source:
            return self._write_stream(source)

    def put_json(self, value: Any) -> str:
        """Store the canonical JSON of ``value``; the digest equals ``sha256_digest(value)`` of the schemas."""
        return self.put_bytes(canonical_json(value).encode("utf-8"))

    # -- reads ---------------------------------------------------------------------------------

    def _existing(self, digest: str) -> Path:
        path = self.path_for(digest)
        if not path.is_file():
            raise ObjectMissing(f"object {digest} is not in {self.objects_dir}; store it with put_* first")
        return path

    def _verify_handle(self, digest: str, handle: BinaryIO) -> None:
        hasher = hashlib.sha256()
        while chunk := handle.read(_CHUNK):
            hasher.update(chunk)
        actual = "sha256:" + hasher.hexdigest()
        if actual != digest:
            raise ObjectCorrupt(
                f"object {digest} at {self.path_for(digest)} hashes to {actual}; the file was altered — "
                "delete it and store the original again"
            )

    def open(self, digest: str) -> BinaryIO:
        """A binary read handle on a verified object, positioned at its start."""
        handle = open(self._existing(digest), "rb")  # noqa: SIM115 - returned to the caller
        try:
            self._verify_handle(digest, handle)
        except BaseException:
            handle.close()
            raise
        handle.seek(0)
        return handle

    def read(self, digest: str) -> bytes:
        """The verified bytes of an object."""
        data = self._existing(digest).read_bytes()
        actual = "sha256:" + hashlib.sha256(data).hexdigest()
        if actual != digest:
            raise ObjectCorrupt(
                f"object {digest} at {self.path_for(digest)} hashes to {actual}; the file was altered — "
                "delete it and store the original again"
            )
        return data

    def read_json(self, digest: str) -> Any:
        """The verified object parsed as JSON."""
        return json.loads(self.read(digest))

    def path(self, digest: str, *, verify: bool = True) -> Path:
        """The on-disk path of an object (read-only), after verifying it unless ``verify=False``."""
        path = self._existing(digest)
        if verify:
            with open(path, "rb") as handle:
                self._verify_handle(digest, handle)
        return path

    def digests(self) -> Iterator[str]:
        """Every stored object's digest (not verified), in no particular order."""
        if not self.objects_dir.is_dir():
            return
        for fan in sorted(self.objects_dir.iterdir()):
            if _FAN.match(fan.name) and fan.is_dir():
                for item in sorted(fan.iterdir()):
                    if _REST.match(item.name):
                        yield f"sha256:{fan.name}{item.name}"

    def verify_all(self) -> list[str]:
        """Digests of objects whose bytes no longer match; empty when the store is intact."""
        corrupt = []
        for digest in self.digests():
            try:
                self.path(digest)
            except ObjectCorrupt:
                corrupt.append(digest)
        return corrupt

    def clear_temporary(self) -> int:
        """Remove leftover temp files of interrupted puts; return how many. Call only when no put runs."""
        if not self._tmp_dir.is_dir():
            return 0
        count = sum(1 for _ in self._tmp_dir.iterdir())
        shutil.rmtree(self._tmp_dir)
        return count
