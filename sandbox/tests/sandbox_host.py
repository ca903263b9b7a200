"""The host a sandboxed strategy must not touch: canaries, loopback listeners, a secret, survivors.

Every adversarial test gets the ``host`` fixture; after the test it asserts that the canary files are
unchanged, that no listener received anything, that the secret env var stayed unseen and
that no process of the strategy survives.
"""

from __future__ import annotations

import hashlib
import os
import socket
import threading
import time
from pathlib import Path

import pytest

from ade_sandbox import LEVELS, probe
from ade_sandbox.layers import is_sandbox_uid
from ade_sandbox.limits import level_rank

REQUIRE_ENV = "ADE_SANDBOX_REQUIRE_LEVEL"  # set by CI: a needed level up to this one may not skip
SECRET = "ADE_TEST_SECRET"


def require_level(level: str) -> str:
    """The level to run at (the best here); skip when below ``level`` — or fail where CI requires it."""
    report = probe()
    if level_rank(report.best_level) >= level_rank(level):
        return report.best_level
    reason = f"needs isolation {level!r}, this machine reaches {report.best_level!r}: {report.missing_for(level)}"
    required = os.environ.get(REQUIRE_ENV)
    if required in LEVELS and level_rank(level) <= level_rank(required):
        pytest.fail(f"{REQUIRE_ENV}={required}: " + reason)
    pytest.skip(reason)


class Listener:
    """A loopback listener (TCP, UDP or pathname Unix socket) that counts what reaches it."""

    def __init__(self, kind: str, path: Path | None = None) -> None:
        self.received = 0
        self.connections = 0
        family = socket.AF_UNIX if kind == "unix" else socket.AF_INET
        sock_type = socket.SOCK_DGRAM if kind == "udp" else socket.SOCK_STREAM
        self.sock = socket.socket(family, sock_type)
        if kind == "unix":
            assert path is not None
            self.sock.bind(str(path))
            os.chmod(path, 0o777)  # permissions are not what stops the strategy
            self.address: object = str(path)
        else:
            self.sock.bind(("127.0.0.1", 0))
            self.address = self.sock.getsockname()
        if sock_type == socket.SOCK_STREAM:
            self.sock.listen(16)
        self.sock.settimeout(0.1)
        self.kind, self._stop = kind, False
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self._stop:
            try:
                if self.kind == "udp":
                    data, _ = self.sock.recvfrom(65536)
                    self.received += len(data)
                    continue
                conn, _ = self.sock.accept()
            except (TimeoutError, OSError):
                continue
            self.connections += 1
            conn.settimeout(0.5)
            try:
                self.received += len(conn.recv(65536))
            except OSError:
                pass
            conn.close()

    def close(self) -> None:
        self._stop = True
        self.thread.join(2)
        self.sock.close()


def _parent(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def _ours_or_orphaned(pid: int, sandboxed: set[int]) -> bool:
    """Whether ``pid`` descends from this test process, or from an orphaned sandbox process (one that
    escaped its run and was re-parented to init). Sandboxes that another test process runs at the same time
    (a parallel worker, a Run beside the suite) descend from that live process instead, and are not this
    test's survivors."""
    me, chain = os.getpid(), pid
    while chain not in (None, 0, 1):
        if chain == me:
            return True
        parent = _parent(chain)
        if parent == 1:
            return chain in sandboxed  # the top of the tree is a sandbox process nobody waits for
        chain = parent
    return False


def _sandbox_processes() -> list[int]:
    """Live sandbox processes of this test (``_ours_or_orphaned``): a sandbox uid, or the sandbox's environment
    marker."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            status = (entry / "status").read_text()
            uid = int(status.split("Uid:")[1].split()[0])
            state = status.split("State:")[1].split()[0]
            environ = (entry / "environ").read_bytes()
        except (OSError, IndexError, ValueError):
            continue
        if state == "Z":
            continue
        if is_sandbox_uid(uid) or b"HOME=/scratch" in environ or b"/ade-sandbox-" in environ:
            found.append(int(entry.name))
    sandboxed = set(found)
    return [pid for pid in found if _ours_or_orphaned(pid, sandboxed)]


def _describe(pid: int) -> str:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return f"{pid} (gone)"
    fields = {k: v.strip() for k, v in (line.split(":", 1) for line in status.splitlines() if ":" in line)}
    return f"{pid} state={fields.get('State')} uid={fields.get('Uid')} ppid={fields.get('PPid')} {cmdline[:120]}"


class Host:
    """What the strategy must leave alone."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.canary = root / "held_out" / "canary.jsonl"
        self.canary.parent.mkdir()
        self.canary.write_text('{"problem": "held-out canary 7f3a", "answer": "42"}\n')
        self.input = root / "inputs" / "inventory.json"
        self.input.parent.mkdir()
        self.input.write_text('[{"id": "a"}, {"id": "b"}]')
        self.outside = root / "outside-written.txt"
        self.tcp = Listener("tcp")
        self.udp = Listener("udp")
        self.unix = Listener("unix", root / "harness.sock")
        self.digests = self._digests()

    def _digests(self) -> dict[Path, str]:
        return {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in (self.canary, self.input)}

    def assert_untouched(self) -> None:
        assert self._digests() == self.digests, "a canary or input file changed"
        assert not self.outside.exists(), "the strategy wrote outside its scratch"
        for listener in (self.tcp, self.udp, self.unix):
            assert (listener.connections, listener.received) == (0, 0), f"{listener.kind} listener was reached"
        deadline = time.monotonic() + 3
        while _sandbox_processes() and time.monotonic() < deadline:
            time.sleep(0.05)
        survivors = _sandbox_processes()
        assert survivors == [], "a process of the strategy survived: " + "; ".join(map(_describe, survivors))

    def close(self) -> None:
        for listener in (self.tcp, self.udp, self.unix):
            listener.close()
