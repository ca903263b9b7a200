"""Fixtures of the sandbox tests (helpers live in sandbox_host.py)."""

from __future__ import annotations

import os

import pytest

from sandbox_host import SECRET, Host


@pytest.fixture
def host(tmp_path, monkeypatch):
    """The host a strategy must leave untouched; checked after the test."""
    monkeypatch.setenv(SECRET, "s3cr3t-value-that-must-not-leak")
    os.chmod(tmp_path, 0o755)
    host = Host(tmp_path)
    try:
        yield host
        host.assert_untouched()
    finally:
        host.close()
