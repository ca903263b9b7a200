"""What a strategy may hold and reach: never root or a capability, AF_UNIX sockets only, its own
process budget and keyring, a bounded scratch, and no Python package but the standard library.

Each case runs at every level it names (exactly that level, not the best one), skipping below
what this machine reaches — or failing where CI requires the level.
"""

from __future__ import annotations

import ctypes
import json
import os
import resource
import site
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ade_sandbox import LEVELS, Limits, open_worker, run_strategy
from ade_sandbox.results import SandboxResult

from sandbox_host import require_level

FAST = Limits(wall_s=10, cpu_s=5, memory_mb=256)
HARDENED = ("process+lsm", "namespaces", "strict")
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="privilege drops matter only when started as root")


def at(level: str) -> str:
    """Run at exactly ``level``: skip (or fail in CI) when this machine does not reach it."""
    require_level(level)
    return level


def run(source: str, level: str, args: dict | None = None, limits: Limits = FAST, **kw) -> SandboxResult:
    return run_strategy(textwrap.dedent(source), "main", args or {}, limits=limits, level=level, **kw)


def value(result: SandboxResult):
    assert result.status == "ok", (result.status, result.error, result.traceback, result.stderr[-800:])
    return result.value


ATTEMPTS = """
import ctypes, errno, os, resource, socket, time
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long

def attempt(fn):
    try:
        result = fn()
    except OSError as exc:
        return errno.errorcode.get(exc.errno, str(exc.errno))
    if isinstance(result, int) and result == -1:
        return errno.errorcode.get(ctypes.get_errno(), "failed")
    return "ok"
"""

PRIVILEGED = (
    ATTEMPTS
    + """
def main(harness_pid, host_file):
    now = time.clock_gettime(time.CLOCK_REALTIME)
    return {
        "uid": os.getuid(),
        "euid": os.geteuid(),
        "setuid_root": attempt(lambda: os.setuid(0)),
        "chown_own_file": attempt(lambda: (open("mine", "w").close(), os.chown("mine", 0, 0))),
        "chmod_host_file": attempt(lambda: os.chmod(host_file, 0o666)),
        "utime_host_file": attempt(lambda: os.utime(host_file, (0, 0))),
        "set_clock": attempt(lambda: time.clock_settime(time.CLOCK_REALTIME, now)),
        "sethostname": attempt(lambda: socket.sethostname(socket.gethostname())),
        # wrong second magic: EINVAL if the call were allowed, never a reboot
        "reboot": attempt(lambda: libc.syscall(ctypes.c_long(169), 0xFEE1DEAD, 1, 0, 0)),
        "syslog": attempt(lambda: libc.klogctl(10, None, 0)),
        "renice_harness": attempt(lambda: os.setpriority(os.PRIO_PROCESS, harness_pid, 19)),
        "prlimit_harness": attempt(lambda: resource.prlimit(harness_pid, resource.RLIMIT_NOFILE, (4, 4))),
        "pin_harness": attempt(lambda: os.sched_setaffinity(harness_pid, {0})),
        "renice_own_user": attempt(lambda: os.setpriority(os.PRIO_USER, 0, 19)),
    }
"""
)


@as_root
@pytest.mark.parametrize("level", LEVELS)
def test_a_strategy_started_by_root_holds_no_privilege(host, level):
    before = (
        os.getpriority(os.PRIO_PROCESS, 0),
        resource.prlimit(os.getpid(), resource.RLIMIT_NOFILE),
        os.sched_getaffinity(0),
        os.stat(host.canary),
    )
    out = value(run(PRIVILEGED, at(level), {"harness_pid": os.getpid(), "host_file": str(host.canary)}))
    assert out.pop("uid") != 0 and out.pop("euid") != 0
    allowed = {"renice_own_user"} if level in ("process", "namespaces") else set()  # its own uid's processes only
    assert {name: result for name, result in out.items() if result == "ok" and name not in allowed} == {}
    after = (
        os.getpriority(os.PRIO_PROCESS, 0),
        resource.prlimit(os.getpid(), resource.RLIMIT_NOFILE),
        os.sched_getaffinity(0),
        os.stat(host.canary),
    )
    assert after == before


@pytest.mark.parametrize("level", ("namespaces",))
def test_no_capability_and_no_new_privileges_reach_user_code(host, level):
    source = """
    def main():
        with open("/proc/self/status") as handle:
            return {k: v.strip() for k, v in (line.split(":", 1) for line in handle) if k.startswith(("Cap", "NoNew"))}
    """
    status = value(run(source, at(level)))
    assert status == {
        "CapInh": "0" * 16,
        "CapPrm": "0" * 16,
        "CapEff": "0" * 16,
        "CapBnd": "0" * 16 if os.geteuid() == 0 else status["CapBnd"],
        "CapAmb": "0" * 16,
        "NoNewPrivs": "1",
    }


@as_root
def test_root_is_refused_where_no_unprivileged_uid_can_reach_the_runtime(tmp_path):
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    script = textwrap.dedent(
        """
        import json, sys
        from ade_sandbox import IsolationUnavailable, run_strategy
        out = {}
        for level in ("process", "process+lsm", "namespaces", "strict"):
            try:
                result = run_strategy("import os\\ndef main():\\n    return os.geteuid()\\n", "main", level=level)
                out[level] = result.value
            except IsolationUnavailable as exc:
                out[level] = str(exc)
        print(json.dumps(out))
        """
    )
    env = {**os.environ, "ADE_SANDBOX_RUNTIME_DIR": str(private / "runtime")}
    proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert "would keep root" in out["process+lsm"] and "ADE_SANDBOX_RUNTIME_DIR" in out["process+lsm"]
    assert out["namespaces"] not in (0, None) and out["strict"] not in (0, None)  # the view holds the runtime
    assert out["process"] == 0  # the weakest level keeps root there, and the doctor says so:
    doctor = subprocess.run(
        [sys.executable, "-m", "ade_sandbox.cli", "doctor"], env=env, capture_output=True, text=True, timeout=120
    )
    assert doctor.returncode == 0, doctor.stderr
    assert "keeps root" in doctor.stdout and "refused" in doctor.stdout


def test_an_unsafe_runtime_directory_is_refused_not_used(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)  # anyone could plant an interpreter here
    env = {**os.environ, "ADE_SANDBOX_RUNTIME_DIR": str(shared)}
    script = "from ade_sandbox import layers\ntry:\n    layers.runtime()\nexcept OSError as exc:\n    print(exc)\n"
    proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60)
    assert "not writable by group or others" in proc.stdout and str(shared) in proc.stdout
    assert list(shared.iterdir()) == []


# --- socket families --------------------------------------------------------------------------
FAMILIES = (
    ATTEMPTS
    + """
FAMILIES = {"inet": 2, "inet6": 10, "netlink": 16, "packet": 17, "vsock": 40, "xdp": 44, "alg": 38, "tipc": 30,
            "can": 29, "bluetooth": 31, "rds": 21, "key": 15, "unknown": 45}

def create(family):
    last = None
    for kind in (socket.SOCK_STREAM, socket.SOCK_DGRAM, socket.SOCK_SEQPACKET, socket.SOCK_RAW):
        try:
            socket.socket(family, kind).close()
            return "ok"
        except OSError as exc:
            last = errno.errorcode.get(exc.errno, str(exc.errno))
            if exc.errno == errno.EPERM:
                return last
    return last

def main():
    return {name: create(family) for name, family in FAMILIES.items()}
"""
)


@pytest.mark.parametrize("level", HARDENED)
def test_every_socket_family_but_unix_is_refused(host, level):
    out = value(run(FAMILIES, at(level)))
    assert out == dict.fromkeys(out, "EPERM")


@pytest.mark.parametrize("level", HARDENED)
def test_a_pathname_unix_socket_of_the_host_is_unreachable(host, level):
    source = (
        ATTEMPTS
        + """
def main(address):
    def connect():
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(address)
        s.sendall(b"leak")
    def datagram():
        a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
        a.sendto(b"leak", address)
    return {"connect": attempt(connect), "datagram": attempt(datagram)}
"""
    )
    out = value(run(source, at(level), {"address": host.unix.address}))
    assert "ok" not in out.values()  # the host fixture also checks that the listener heard nothing


@pytest.mark.parametrize("level", LEVELS)
def test_asyncio_and_socketpairs_still_work(host, level):
    source = """
    import asyncio, socket
    async def echo():
        await asyncio.sleep(0.01)  # a real event loop, whose self-pipe is a socketpair
        a, b = socket.socketpair()
        a.sendall(b"x")
        return b.recv(1).decode()
    def main():
        return asyncio.run(echo())
    """
    assert value(run(source, at(level))) == "x"


# --- one process budget and one keyring per sandbox -----------------------------------------------
FORK_UNTIL_REFUSED = """
import os, signal, time
def main(limit):
    count = 0
    while count < limit:
        try:
            pid = os.fork()
        except OSError:
            break
        if pid == 0:
            time.sleep(60)
            os._exit(0)
        count += 1
    return {"forked": count, "uid": os.getuid()}
"""

FORK_AND_REAP = """
import os
def main(limit):
    count = 0
    for _ in range(limit):
        try:
            pid = os.fork()
        except OSError:
            break
        if pid == 0:
            os._exit(0)
        os.waitpid(pid, 0)
        count += 1
    return {"forked": count, "uid": os.getuid()}
"""


@as_root
@pytest.mark.parametrize("level", LEVELS)
def test_one_sandbox_cannot_starve_another_of_processes(host, level):
    limits = Limits(wall_s=20, cpu_s=10, memory_mb=256, max_processes=8)
    with open_worker(textwrap.dedent(FORK_UNTIL_REFUSED), limits=limits, level=at(level)) as hog:
        held = value(hog.call("main", {"limit": 100}))
        assert held["forked"] < 100  # its own cap stopped it; its children are still alive
        other = value(run(FORK_AND_REAP, level, {"limit": 4}, limits=limits))
    assert other["forked"] == 4 and other["uid"] != held["uid"]


KEYRING = (
    ATTEMPTS
    + """
def main():
    libc.syscall.restype = ctypes.c_long
    found = libc.syscall(ctypes.c_long(250), 0, -3, 0)  # KEYCTL_GET_KEYRING_ID of the session keyring
    return found if found != -1 else errno.errorcode.get(ctypes.get_errno())
"""
)


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="the probe uses the x86_64 keyctl number")
@pytest.mark.parametrize("level", ("process", "namespaces"))
def test_every_run_gets_a_fresh_session_keyring(host, level):
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    ours = libc.syscall(ctypes.c_long(250), 0, -3, 0)
    first, second = (value(run(KEYRING, at(level))) for _ in range(2))
    if first == "EPERM":  # where seccomp refuses keyctl altogether, no keyring can be reached at all
        assert second == "EPERM"
    else:
        assert isinstance(first, int) and len({ours, first, second}) == 3


# --- the scratch and the view ---------------------------------------------------------------------
@pytest.mark.parametrize("level", ("namespaces", "strict"))
def test_the_scratch_runs_out_of_inodes_at_its_limit(host, level):
    source = """
    import errno, os
    def main(limit):
        for count in range(limit):
            try:
                open(f"f{count}", "w").close()
            except OSError as exc:
                return {"files": count, "error": errno.errorcode.get(exc.errno)}
        return {"files": limit, "error": None}
    """
    limits = Limits(wall_s=20, cpu_s=10, memory_mb=256, scratch_files=500)
    out = value(run(source, at(level), {"limit": 5000}, limits=limits))
    assert out["files"] < 500 and out["error"] == "ENOSPC"


def _package_dirs() -> list[str]:
    """Where this machine keeps third-party Python packages, and one package that is certainly there."""
    candidates = [*site.getsitepackages(), site.getusersitepackages(), str(Path(pytest.__file__).parent)]
    candidates += [str(p) for p in Path("/usr/lib").glob("python3*/dist-packages")]
    candidates += [str(p) for p in Path("/usr/local/lib").glob("python3*/dist-packages")]
    version = f"python{sys.version_info[0]}.{sys.version_info[1]}"
    candidates.append(str(Path(os.path.realpath(sys.base_prefix), "lib", version)))  # the real stdlib
    return sorted({c for c in candidates if os.path.isdir(c)})


@pytest.mark.parametrize("level", HARDENED)
def test_third_party_packages_are_out_of_view(host, level):
    source = """
    import os, sys
    def main(paths):
        seen = {}
        for path in paths:
            try:
                seen[path] = len(os.listdir(path))
            except OSError as exc:
                seen[path] = type(exc).__name__
        sys.path[:0] = paths
        imported = []
        for name in ("pytest", "yaml", "numpy", "pydantic", "_pytest"):
            try:
                __import__(name)
                imported.append(name)
            except ImportError:
                pass
        return {"seen": seen, "imported": imported, "prefix": sys.prefix, "path": sys.path[len(paths):]}
    """
    paths = _package_dirs()
    assert paths, "no package directory found to check"
    out = value(run(source, at(level), {"paths": paths}))
    assert out["imported"] == []
    assert {p: n for p, n in out["seen"].items() if isinstance(n, int) and n > 0} == {}
    assert not any("site-packages" in p or "dist-packages" in p for p in out["path"])
    stdlib = Path(out["prefix"], "lib", f"python{sys.version_info[0]}.{sys.version_info[1]}")
    assert stdlib.name in {Path(p).name for p in out["path"]}


def test_the_child_interpreter_has_no_site_packages_directory():
    from ade_sandbox import layers

    found = layers.runtime()
    stdlib = Path(found.prefix, "lib", f"python{sys.version_info[0]}.{sys.version_info[1]}")
    assert (stdlib / "os.py").is_file() and (stdlib / "json" / "__init__.py").is_file()
    assert not (stdlib / "site-packages").exists() and not (stdlib / "test").exists()
    assert Path(found.python).is_file() and Path(found.bootstrap).is_file()  # the child runs this bootstrap
    assert Path(found.bootstrap).read_bytes() == (layers.SANDBOX_DIR / "bootstrap.py").read_bytes()
