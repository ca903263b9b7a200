"""Landlock and seccomp confinement from lsm.py, observed in child processes (both are irreversible)."""

from __future__ import annotations

import errno
import json
import os
import platform
import signal
import socket
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from ade_sandbox import lsm

# Children import lsm as a top-level module from its directory, exactly as the bootstrap does.
LSM_DIR = Path(lsm.__file__).resolve().parent

# Shared by every child: import lsm the bootstrap way and report outcomes as "ok" or an errno name.
PRELUDE = """
import ctypes, errno, json, os, socket, subprocess, sys, threading
sys.path.insert(0, {lsm_dir!r})
import lsm
ARGS = json.loads({args!r})
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long

def attempt(fn):
    try:
        fn()
    except OSError as exc:
        return errno.errorcode.get(exc.errno, str(exc.errno))
    return "ok"

def raw(nr, *args):
    ctypes.set_errno(0)
    res = libc.syscall(ctypes.c_long(nr), *(ctypes.c_long(a) for a in args))
    return "ok" if res != -1 else errno.errorcode[ctypes.get_errno()]
"""


def run_child(body: str, args: object = None, *, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run body in an isolated interpreter after PRELUDE; with check, insist it exited cleanly."""
    script = PRELUDE.format(lsm_dir=str(LSM_DIR), args=json.dumps(args)) + textwrap.dedent(body)
    proc = subprocess.run([sys.executable, "-I", "-c", script], capture_output=True, text=True, timeout=60)
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


def child_json(body: str, args: object = None) -> dict[str, object]:
    """Run body in a child and decode the JSON object it printed last."""
    return json.loads(run_child(body, args).stdout.strip().splitlines()[-1])


needs_landlock = pytest.mark.skipif(lsm.landlock_abi() == 0, reason="kernel offers no Landlock")
needs_seccomp = pytest.mark.skipif(
    not lsm.seccomp_available() or platform.machine() not in ("x86_64", "aarch64"),
    reason="no seccomp filter support, or an architecture lsm.py has no syscall table for",
)


def test_probes_report_plain_values() -> None:
    assert isinstance(lsm.landlock_abi(), int) and lsm.landlock_abi() >= 0
    assert isinstance(lsm.seccomp_available(), bool)


@needs_seccomp
def test_syscall_table_matches_the_architecture() -> None:
    table = lsm.syscall_table()
    assert {"socket", "clone", "clone3", "seccomp"} <= table.keys()
    expected = {"x86_64": (41, 56, 101), "aarch64": (198, 220, 117)}[platform.machine()]
    assert (table["socket"], table["clone"], table["ptrace"]) == expected
    assert set(lsm.SELF_ONLY_SYSCALLS) | {"setpriority", "ioprio_set", "socketpair"} <= table.keys()
    missing = set(lsm.DENIED_SYSCALLS) - table.keys()
    assert missing == ({"chown", "lchown", "iopl", "ioperm"} if platform.machine() == "aarch64" else set())


@pytest.mark.parametrize("arch", ["x86_64", "aarch64"])
@pytest.mark.parametrize("unix_sockets", [False, True])
def test_filter_jumps_resolve_forward_within_the_program(arch: str, unix_sockets: bool) -> None:
    program = lsm.build_seccomp_filter(arch, unix_sockets=unix_sockets)
    for index, (code, jt, jf, _k) in enumerate(program):
        if code & 0x07 == 0x05:  # BPF_JMP: both branches land on an instruction further down
            assert index + jt + 1 < len(program) and index + jf + 1 < len(program)
    assert program[-1] == (0x06, 0, 0, lsm.SECCOMP_RET_KILL_PROCESS)


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    """A non-blocking TCP listener on loopback in the test process, which outlives every child."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(4)
        sock.setblocking(False)
        yield sock


def accepted_anything(sock: socket.socket) -> bool:
    """Whether a connection reached the listener's backlog."""
    try:
        conn, _ = sock.accept()
    except BlockingIOError:
        return False
    conn.close()
    return True


@pytest.fixture
def tree(tmp_path: Path) -> dict[str, str]:
    """A read-only tree, a writable tree, a single granted file and canaries outside all grants."""
    (tmp_path / "ro").mkdir()
    (tmp_path / "ro" / "data.txt").write_text("ro-data")
    (tmp_path / "rw").mkdir()
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "canary.txt").write_text("secret")
    (tmp_path / "single.txt").write_text("single")
    (tmp_path / "sibling.txt").write_text("sibling")
    system_file = next(p for p in ("/etc/hostname", "/etc/passwd") if os.path.isfile(p))
    Path(system_file).read_text()  # readable without Landlock, so a denial below is Landlock's doing
    return {name: str(tmp_path / name) for name in ("ro", "rw", "outside", "single.txt", "sibling.txt")} | {
        "system": system_file
    }


def interpreter_paths() -> list[str]:
    """What the child interpreter itself needs to keep running once confined."""
    return [sys.prefix, sys.base_prefix, str(LSM_DIR)]


LANDLOCK_PROBE = """
P = ARGS["paths"]
abi = lsm.apply_landlock(ARGS["read"], ARGS["write"], **ARGS["options"])

def write(path, mode="w"):
    with open(path, mode) as fh:
        fh.write("x")

def make_tcp():
    socket.create_connection(("127.0.0.1", ARGS["port"]), timeout=5).close()

out = {
    "abi": abi,
    "read_ro": attempt(lambda: open(P["ro"] + "/data.txt").read()),
    "list_ro": attempt(lambda: os.listdir(P["ro"])),
    "read_single": attempt(lambda: open(P["single.txt"]).read()),
    "read_sibling": attempt(lambda: open(P["sibling.txt"]).read()),
    "read_canary": attempt(lambda: open(P["outside"] + "/canary.txt").read()),
    "list_outside": attempt(lambda: os.listdir(P["outside"])),
    "read_system": attempt(lambda: open(P["system"]).read()),
    "write_rw": attempt(lambda: write(P["rw"] + "/new.txt")),
    "mkdir_rw": attempt(lambda: os.mkdir(P["rw"] + "/sub")),
    "rename_rw": attempt(lambda: os.rename(P["rw"] + "/new.txt", P["rw"] + "/sub/moved.txt")),
    "unlink_rw": attempt(lambda: os.unlink(P["rw"] + "/sub/moved.txt")),
    "mknod_rw": attempt(lambda: os.mknod(P["rw"] + "/null", 0o20600, os.makedev(1, 3))),
    "append_ro": attempt(lambda: write(P["ro"] + "/data.txt", "a")),
    "create_ro": attempt(lambda: write(P["ro"] + "/new.txt")),
    "append_single": attempt(lambda: write(P["single.txt"], "a")),
    "create_outside": attempt(lambda: write(P["outside"] + "/new.txt")),
    "tcp_connect": attempt(make_tcp),
    "kill_parent": attempt(lambda: os.kill(os.getppid(), 0)),
    "kill_self": attempt(lambda: os.kill(os.getpid(), 0)),
}
print(json.dumps(out))
"""


def landlock_args(tree: dict[str, str], listener: socket.socket, **options: bool) -> dict[str, object]:
    """Arguments for LANDLOCK_PROBE: ro and one single file readable, rw writable, the rest out of reach."""
    return {
        "paths": tree,
        "read": [*interpreter_paths(), tree["ro"], tree["single.txt"], "/nonexistent/ade-lsm-test"],
        "write": [tree["rw"]],
        "options": options,
        "port": listener.getsockname()[1],
    }


@needs_landlock
def test_landlock_confines_filesystem_network_and_signals(tree: dict[str, str], listener: socket.socket) -> None:
    out = child_json(LANDLOCK_PROBE, landlock_args(tree, listener))
    abi = lsm.landlock_abi()
    assert out["abi"] == min(abi, lsm.MAX_KNOWN_ABI)
    for key in ("read_ro", "list_ro", "read_single", "write_rw", "mkdir_rw", "unlink_rw", "kill_self"):
        assert out[key] == "ok", key
    # Renaming across directories needs REFER, which ABI 1 can neither handle nor grant.
    assert out["rename_rw"] == ("ok" if abi >= 2 else "EXDEV")
    for key in ("read_sibling", "read_canary", "list_outside", "read_system", "mknod_rw"):
        assert out[key] == "EACCES", key
    for key in ("append_ro", "create_ro", "append_single", "create_outside"):
        assert out[key] == "EACCES", key
    assert Path(tree["outside"], "new.txt").exists() is False
    if abi >= 4:
        assert out["tcp_connect"] == "EACCES"
        assert not accepted_anything(listener)
    if abi >= 6:
        assert out["kill_parent"] == "EPERM"
    assert os.getpid() > 0  # still here: the probe could not signal the test process


@needs_landlock
def test_landlock_network_and_scope_can_be_left_open(tree: dict[str, str], listener: socket.socket) -> None:
    out = child_json(LANDLOCK_PROBE, landlock_args(tree, listener, restrict_tcp=False, scope=False))
    assert out["tcp_connect"] == "ok" and accepted_anything(listener)
    assert out["kill_parent"] == "ok"  # signal 0 only checks permission
    assert out["read_canary"] == "EACCES"


@needs_landlock
def test_landlock_missing_interpreter_paths_break_imports(tree: dict[str, str]) -> None:
    body = """
    lsm.apply_landlock([ARGS["lsm_dir"]], [])
    import decimal  # not imported yet; its source lies under base_prefix, which is not granted
    """
    proc = run_child(body, {"lsm_dir": str(LSM_DIR)}, check=False)
    assert proc.returncode != 0 and "PermissionError" in proc.stderr


SECCOMP_PROBE = """
me = os.getpid()  # a raw clone that wrongly succeeds must end its child, which is told apart by pid
table = lsm.syscall_table()
listed = {name: table[name] for name in (*lsm.DENIED_SYSCALLS, *lsm.UNSUPPORTED_SYSCALLS) if name in table}
# All-ones arguments are invalid for every listed call, so running them unfiltered is harmless.
before = {name: raw(nr, *[-1] * 6) for name, nr in listed.items()}
lsm.apply_seccomp(unix_sockets=ARGS["unix_sockets"])
after = {name: raw(nr, *[-1] * 6) for name, nr in listed.items()}

def fork_and_wait():
    pid = os.fork()
    if pid == 0:
        os._exit(7)
    assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 7

def clone_raw(flags):
    res = raw(table["clone"], flags | 17, 0, 0, 0, 0)  # 17 = SIGCHLD; a stack of 0 makes it behave like fork
    if res == "ok":
        if os.getpid() != me:
            os._exit(0)
        os.wait()
    return res

def sock(family, kind=socket.SOCK_STREAM):
    return attempt(lambda: socket.socket(family, kind).close())

def pair(kind):
    return attempt(lambda: [s.close() for s in socket.socketpair(socket.AF_UNIX, kind)])

ran = []
thread = threading.Thread(target=lambda: ran.append(1))
thread.start()
thread.join()
out = {
    "before": before,
    "after": after,
    "inet": sock(socket.AF_INET),
    "inet_dgram": sock(socket.AF_INET, socket.SOCK_DGRAM),
    "inet6": sock(socket.AF_INET6),
    "netlink": sock(socket.AF_NETLINK, socket.SOCK_RAW),
    "packet": sock(socket.AF_PACKET, socket.SOCK_RAW),
    "vsock": sock(40),
    "alg": sock(38, socket.SOCK_SEQPACKET),
    "unknown_family": sock(44),
    "unix": sock(socket.AF_UNIX),
    "unix_dgram": sock(socket.AF_UNIX, socket.SOCK_DGRAM),
    "pair_stream": pair(socket.SOCK_STREAM),
    "pair_stream_cloexec": pair(socket.SOCK_STREAM | socket.SOCK_CLOEXEC),
    "pair_dgram": pair(socket.SOCK_DGRAM),
    "pair_seqpacket": pair(socket.SOCK_SEQPACKET),
    "unshare_user": "ok" if libc.unshare(0x10000000) == 0 else errno.errorcode[ctypes.get_errno()],
    "traceme": "ok" if libc.ptrace(0, 0, 0, 0) == 0 else errno.errorcode[ctypes.get_errno()],
    "clone_newuser": clone_raw(0x10000000),
    "clone_newnet": clone_raw(0x40000000),
    "clone3": raw(table["clone3"], 0, 0),
    "true": subprocess.run(["/bin/true"]).returncode,
    "thread": ran,
    "fork": attempt(fork_and_wait),
}
print(json.dumps(out))
"""


def expected_denials() -> dict[str, str]:
    table = lsm.syscall_table()
    denied = {name: "EPERM" for name in lsm.DENIED_SYSCALLS if name in table}
    return {**denied, **{name: errno.errorcode[errno.EOPNOTSUPP] for name in lsm.UNSUPPORTED_SYSCALLS if name in table}}


@needs_seccomp
def test_seccomp_denies_machine_wide_calls_namespaces_and_introspection() -> None:
    out = child_json(SECCOMP_PROBE, {"unix_sockets": False})
    assert out["after"] == expected_denials()
    for key in ("unshare_user", "traceme"):
        assert out[key] == "EPERM", key
    assert out["clone_newuser"] == "EPERM" and out["clone_newnet"] == "EPERM"
    assert out["clone3"] == "ENOSYS"
    assert out["true"] == 0 and out["thread"] == [1] and out["fork"] == "ok"


@needs_seccomp
@pytest.mark.parametrize("unix_sockets", [False, True])
def test_seccomp_allows_unix_sockets_only(unix_sockets: bool) -> None:
    out = child_json(SECCOMP_PROBE, {"unix_sockets": unix_sockets})
    for key in ("inet", "inet_dgram", "inet6", "netlink", "packet", "vsock", "alg", "unknown_family"):
        assert out[key] == "EPERM", key
    # Connected stream pairs (asyncio's self-pipe, multiprocessing) always work; a socket that could be
    # pointed at a host address only where the sandbox has its own mount and network namespaces.
    assert out["pair_stream"] == out["pair_stream_cloexec"] == "ok"
    opened = "ok" if unix_sockets else "EPERM"
    assert (out["unix"], out["unix_dgram"], out["pair_dgram"], out["pair_seqpacket"]) == (opened,) * 4


@needs_seccomp
def test_seccomp_denials_are_the_filters_doing() -> None:
    body = SECCOMP_PROBE.split("lsm.apply_seccomp(")[0] + "print(json.dumps(before))"
    before = child_json(body, {"unix_sockets": False})
    # Unfiltered, the same invalid calls fail for their own reasons, not with the filter's errno.
    expected = expected_denials()
    assert [name for name, result in before.items() if result == expected[name]] == []


FOREIGN_PROCESS_PROBE = """
import resource
table = lsm.syscall_table()
target = subprocess.Popen(["/bin/sleep", "30"])  # a harmless other process to aim at
buf = ctypes.create_string_buffer(64)

def calls(pid):
    mask = os.sched_getaffinity(target.pid)
    return {
        "prlimit64": raw(table["prlimit64"], pid, resource.RLIMIT_NOFILE, 0, ctypes.addressof(buf)),
        "sched_setaffinity": attempt(lambda: os.sched_setaffinity(pid, mask)),
        "sched_setscheduler": attempt(lambda: os.sched_setscheduler(pid, os.SCHED_OTHER, os.sched_param(0))),
        "sched_setparam": attempt(lambda: os.sched_setparam(pid, os.sched_param(0))),
        "setpriority": attempt(lambda: os.setpriority(os.PRIO_PROCESS, pid, os.getpriority(os.PRIO_PROCESS, pid))),
        "ioprio_set": raw(table["ioprio_set"], 1, pid, 0),
        "move_pages": raw(table["move_pages"], pid, 0, 0, 0, 0, 0),
    }

try:
    before = calls(target.pid)
    lsm.apply_seccomp()
    out = {
        "before": before,
        "other": calls(target.pid),
        "self": calls(0),
        "pgrp": attempt(lambda: os.setpriority(os.PRIO_PGRP, 0, os.getpriority(os.PRIO_PGRP, 0))),
        "user": attempt(lambda: os.setpriority(os.PRIO_USER, 0, os.getpriority(os.PRIO_USER, 0))),
        "setrlimit": attempt(lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))),
        "nice": attempt(lambda: os.nice(1)),
    }
finally:
    target.kill()
print(json.dumps(out))
"""


@needs_seccomp
def test_seccomp_confines_process_scoped_calls_to_the_caller() -> None:
    out = child_json(FOREIGN_PROCESS_PROBE)
    assert set(out["before"].values()) == {"ok"}, out["before"]  # unfiltered, each works on another process
    assert out["other"] == dict.fromkeys(out["before"], "EPERM")
    assert set(out["self"].values()) == {"ok"}, out["self"]
    assert (out["pgrp"], out["user"]) == ("EPERM", "EPERM")
    assert out["setrlimit"] == out["nice"] == "ok"


@pytest.mark.skipif(platform.machine() != "x86_64", reason="x32 exists only on x86_64")
@needs_seccomp
def test_seccomp_kills_x32_syscalls() -> None:
    proc = run_child('lsm.apply_seccomp()\nraw(0x40000000 | 39)\nprint("survived")', check=False)  # x32 getpid
    assert proc.returncode == -signal.SIGSYS and "survived" not in proc.stdout
