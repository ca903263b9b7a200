"""Opening a run store: WAL pragmas, the schema version and its ordered migrations."""

from __future__ import annotations

import sqlite3

import pytest

from ade_core.errors import SchemaVersionError, StoreError
from ade_core.store import MIGRATIONS, SCHEMA_VERSION, Migration, RunStore, check_store, migrate


def test_open_creates_a_wal_store_with_durable_pragmas(tmp_path):
    with RunStore.open(tmp_path / "run", busy_timeout_s=2.5) as store:
        assert store.path == tmp_path / "run" / "state.sqlite"
        assert store.path.is_file()
        with store.snapshot() as conn:
            assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
            assert conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
            assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
            assert conn.execute("PRAGMA busy_timeout").fetchone()[0] == 2500
        assert store.schema_version == SCHEMA_VERSION
        assert store.revision == 0
    # WAL is a property of the file: a plain connection sees it too.
    raw = sqlite3.connect(tmp_path / "run" / "state.sqlite")
    assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert raw.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() == (str(SCHEMA_VERSION),)
    raw.close()


def test_reopening_keeps_committed_state(tmp_path):
    with RunStore.open(tmp_path) as store:
        with store.transition("run_started", actor="harness", subject="run", payload={"seed": 7}):
            pass
    with RunStore.open(tmp_path) as store:
        assert store.revision == 1
        assert store.events()[0].payload == {"seed": 7}
        assert check_store(store) == []


def test_a_newer_schema_is_refused_naming_both_versions_and_the_fix(tmp_path):
    RunStore.open(tmp_path).close()
    raw = sqlite3.connect(tmp_path / "state.sqlite")
    raw.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION + 5),))
    raw.commit()
    raw.close()
    with pytest.raises(SchemaVersionError) as info:
        RunStore.open(tmp_path)
    message = str(info.value)
    assert f"schema version {SCHEMA_VERSION + 5}" in message
    assert f"up to {SCHEMA_VERSION}" in message
    assert "upgrade ADE" in message


def _conn(path):
    return sqlite3.connect(path, isolation_level=None)


def test_migrations_run_in_order_each_in_its_own_transaction(tmp_path):
    path = tmp_path / "m.sqlite"
    conn = _conn(path)
    added_column = Migration(len(MIGRATIONS) + 1, "add a column", ("ALTER TABLE operations ADD COLUMN note TEXT",))
    backfill = Migration(
        len(MIGRATIONS) + 2,
        "a callable step",
        lambda c: c.execute("INSERT INTO meta (key, value) VALUES ('backfilled', 'yes')"),
    )
    assert migrate(conn, path, (*MIGRATIONS, added_column, backfill)) == SCHEMA_VERSION + 2
    assert "note" in [row[1] for row in conn.execute("PRAGMA table_info(operations)")]
    assert conn.execute("SELECT value FROM meta WHERE key = 'backfilled'").fetchone() == ("yes",)

    # A failing migration leaves the store at the previous version, without any of its statements.
    broken = Migration(
        SCHEMA_VERSION + 3,
        "half a migration",
        ("CREATE TABLE half_done (x INTEGER)", "INSERT INTO no_such_table VALUES (1)"),
    )
    with pytest.raises(
        StoreError, match=rf"migration {SCHEMA_VERSION + 3} \(half a migration\).*version {SCHEMA_VERSION + 2}"
    ):
        migrate(conn, path, (*MIGRATIONS, added_column, backfill, broken))
    assert not conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'half_done'").fetchone()
    assert conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() == (str(SCHEMA_VERSION + 2),)
    # Migrating again is a no-op at the latest version.
    assert migrate(conn, path, (*MIGRATIONS, added_column, backfill)) == SCHEMA_VERSION + 2
    conn.close()


def test_migrations_must_be_numbered_from_one_without_gaps(tmp_path):
    conn = _conn(tmp_path / "m.sqlite")
    with pytest.raises(StoreError, match=r"numbered 1, 2, 3"):
        migrate(conn, "m.sqlite", (*MIGRATIONS, Migration(SCHEMA_VERSION + 2, "skips one", ())))
    conn.close()


def test_a_file_that_is_not_a_database_is_refused(tmp_path):
    (tmp_path / "state.sqlite").write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(StoreError, match=r"cannot open run store .*state\.sqlite"):
        RunStore.open(tmp_path)
