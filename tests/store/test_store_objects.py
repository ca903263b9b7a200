"""The content-addressed object store: fan-out layout, atomic idempotent puts, verified reads."""

from __future__ import annotations

import hashlib
import os

import pytest

from ade_core.errors import ObjectCorrupt, ObjectMissing, ObjectStoreError
from ade_core.schemas import sha256_digest
from ade_core.store import ObjectStore, RunStore


@pytest.fixture
def objects(tmp_path):
    return ObjectStore(tmp_path)


def files_under(root):
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())


def test_put_bytes_names_the_object_by_its_sha256_in_a_fan_out_directory(objects, tmp_path):
    data = b"selected examples\n" * 100
    hex_digest = hashlib.sha256(data).hexdigest()
    digest = objects.put_bytes(data)
    assert digest == f"sha256:{hex_digest}"
    assert objects.path(digest) == tmp_path / "objects" / hex_digest[:2] / hex_digest[2:]
    assert files_under(tmp_path) == [f"objects/{hex_digest[:2]}/{hex_digest[2:]}"]  # no temp file left behind
    assert not os.access(objects.path(digest), os.W_OK) or os.geteuid() == 0  # stored read-only
    assert objects.read(digest) == data
    with objects.open(digest) as handle:
        assert handle.read() == data
    assert digest in objects and list(objects.digests()) == [digest]


def test_puts_are_idempotent(objects, tmp_path):
    first = objects.put_bytes(b"same")
    stat = objects.path(first).stat()
    assert objects.put_bytes(b"same") == first
    source = tmp_path / "same.bin"
    source.write_bytes(b"same")
    assert objects.put_file(source) == first
    assert objects.path(first).stat().st_mtime_ns == stat.st_mtime_ns
    assert len(list(objects.digests())) == 1
    assert not any((tmp_path / "objects" / ".tmp").iterdir())


def test_put_json_uses_the_schema_digest_and_put_file_streams(objects, tmp_path):
    value = {"b": [1, 2], "a": "ü"}
    digest = objects.put_json(value)
    assert digest == sha256_digest(value)
    assert objects.read_json(digest) == value
    big = tmp_path / "big.bin"
    big.write_bytes(os.urandom(3 * (1 << 20) + 17))
    assert objects.read(objects.put_file(big)) == big.read_bytes()


def test_a_tampered_object_raises_on_every_read_path(objects):
    digest = objects.put_bytes(b"original evidence")
    path = objects.path(digest)
    os.chmod(path, 0o644)
    path.write_bytes(b"altered evidence")
    for read in (objects.read, objects.open, objects.path, objects.read_json):
        with pytest.raises(ObjectCorrupt, match=rf"object {digest} .* hashes to sha256:"):
            read(digest)
    assert objects.verify_all() == [digest]
    # Storing the original again repairs it.
    os.remove(path)
    assert objects.put_bytes(b"original evidence") == digest
    assert objects.verify_all() == []


def test_missing_and_invalid_digests_are_typed_errors(objects):
    with pytest.raises(ObjectMissing, match="is not in"):
        objects.read("sha256:" + "0" * 64)
    for bad in ("sha256:XYZ", "md5:" + "0" * 64, "sha256:" + "A" * 64, 42):
        with pytest.raises(ObjectStoreError, match="not an object digest"):
            objects.read(bad)  # type: ignore[arg-type]
        assert bad not in objects


def test_leftover_temp_files_are_never_objects(objects, tmp_path):
    objects.put_bytes(b"kept")
    tmp_dir = tmp_path / "objects" / ".tmp"
    (tmp_dir / "put-interrupted").write_bytes(b"half a wri")
    assert len(list(objects.digests())) == 1
    assert objects.clear_temporary() == 1
    assert not tmp_dir.exists()


def test_a_run_store_carries_its_object_store(tmp_path):
    with RunStore.open(tmp_path) as store:
        digest = store.objects.put_bytes(b"package")
    assert (tmp_path / "objects" / digest[7:9] / digest[9:]).is_file()
