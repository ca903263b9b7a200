"""The isolation layers: interpreter paths, the bubblewrap command line, cgroups."""

from __future__ import annotations

import functools
import glob
import hashlib
import os
import shutil
import signal
import stat
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

SANDBOX_DIR = Path(__file__).resolve().parent
CODE_FILES = ("bootstrap.py", "lsm.py")  # what the child runs: standard library only
START = "start.py"
# The script the child is started with: the bootstrap itself is imported, so its compiled form in the
# runtime's __pycache__ is used instead of compiling it at every spawn.
START_SOURCE = (
    "import sys\nsys.path.insert(0, __file__.rpartition('/')[0])\nimport bootstrap\ndel sys.path[0]\nbootstrap.main()\n"
)
INNER_SANDBOX_DIR = "/opt/ade-sandbox"
INNER_PYTHON_DIR = "/opt/ade-python"
INNER_SCRATCH = "/scratch"
RUNTIME_ENV = "ADE_SANDBOX_RUNTIME_DIR"
# Strategies never run as root: each sandbox gets its own uid, BASE_UID + the pid of its launched
# process (unique among live sandboxes), so per-uid limits (RLIMIT_NPROC, keyrings) are per sandbox.
BASE_UID = 1_500_000_000
MAX_PID = 1 << 22  # the kernel's largest pid_max
# The stdlib without what a strategy never needs (third-party packages, the test suite, Tk, the
# build configuration with a static libpython).
_STDLIB_SKIP = {"site-packages", "dist-packages", "test", "idlelib", "tkinter", "turtledemo", "ensurepip"}


def sandbox_uid(pid: int) -> int:
    """The uid a sandbox whose launched process has ``pid`` runs as."""
    return BASE_UID + pid % MAX_PID


def is_sandbox_uid(uid: int) -> bool:
    return BASE_UID <= uid < BASE_UID + MAX_PID


def host_interpreter() -> str:
    """The real interpreter binary of this process (not a venv shim)."""
    return os.path.realpath(sys.executable)


@dataclass(frozen=True)
class Runtime:
    """What a sandboxed child may see of Python: a private prefix holding the interpreter and its
    standard library (no site-packages), and the child's own code (bootstrap and lsm).

    Built once per interpreter under a directory every sandbox uid can traverse (hard links where
    the file system allows, copies otherwise), so root can drop to an unprivileged uid even when
    the real interpreter lives under a private home directory, and so third-party packages next
    to the real stdlib stay out of view.
    """

    prefix: str
    code: str
    libraries: tuple[str, ...]  # shared libraries the binary loads from outside the system dirs

    @property
    def python(self) -> str:
        return os.path.join(self.prefix, "bin", os.path.basename(host_interpreter()))

    @property
    def bootstrap(self) -> str:
        return os.path.join(self.code, "bootstrap.py")

    @property
    def start(self) -> str:
        return os.path.join(self.code, START)


class RuntimeUnavailable(OSError):
    """The private runtime could not be built or is not safe to use."""


def runtime_root() -> Path:
    """Where runtimes live: $ADE_SANDBOX_RUNTIME_DIR, else /var/cache/ade-sandbox for root, else the
    user's cache directory."""
    if os.environ.get(RUNTIME_ENV):
        return Path(os.environ[RUNTIME_ENV])
    if os.geteuid() == 0:
        return Path("/var/cache/ade-sandbox")
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "ade-sandbox"


def _check_owned(path: Path) -> None:
    """A runtime directory must belong to us and be writable by nobody else."""
    info = path.lstat()
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid() or info.st_mode & 0o022:
        raise RuntimeUnavailable(
            f"{path} must be a directory owned by uid {os.geteuid()} and not writable by group or others; "
            f"remove it or set {RUNTIME_ENV} to another directory"
        )


def _digest(*parts: object) -> str:
    return hashlib.sha256(repr(parts).encode()).hexdigest()[:16]


def _link_or_copy(source: str, dest: str) -> None:
    try:
        os.link(source, dest)
    except OSError:
        shutil.copy2(source, dest)


def _populate(dest: Path, build: Callable[[Path], None]) -> Path:
    """Build ``dest`` in a private temporary directory and rename it into place (atomic; a
    concurrent builder's result is kept)."""
    if dest.exists():
        _check_owned(dest)
        return dest
    staging = Path(tempfile.mkdtemp(prefix=".build-", dir=dest.parent))
    try:
        build(staging)
        os.chmod(staging, 0o755)
        try:
            os.rename(staging, dest)
        except OSError:  # another process built it first
            shutil.rmtree(staging, ignore_errors=True)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    _check_owned(dest)
    return dest


def _build_prefix(dest: Path, host_prefix: str, stdlib: str) -> None:
    (dest / "bin").mkdir(mode=0o755)
    _link_or_copy(host_interpreter(), str(dest / "bin" / os.path.basename(host_interpreter())))
    target = dest / os.path.relpath(stdlib, host_prefix)
    for directory, dirs, files in os.walk(stdlib):
        relative = os.path.relpath(directory, stdlib)
        top = relative.split(os.sep)[0]
        if top in _STDLIB_SKIP or top.startswith("config-"):
            dirs[:] = []
            continue
        out = target / relative
        out.mkdir(mode=0o755, parents=True, exist_ok=True)
        for name in files:
            _link_or_copy(os.path.join(directory, name), str(out / name))
    for directory, dirs, _ in os.walk(dest):
        for name in dirs:
            os.chmod(os.path.join(directory, name), 0o755)


def _build_code(dest: Path) -> None:
    import py_compile

    (dest / START).write_text(START_SOURCE)
    for name in CODE_FILES:
        shutil.copyfile(SANDBOX_DIR / name, dest / name)
        py_compile.compile(str(dest / name), doraise=True)
    for path in [*dest.glob("*.py"), *dest.glob("__pycache__/*")]:
        os.chmod(path, 0o644)
    os.chmod(dest / "__pycache__", 0o755)


def _loaded_libraries() -> tuple[str, ...]:
    """Shared libraries of this interpreter outside the system directories (e.g. a libpython
    found through the binary's RUNPATH), read from this process's own mappings."""
    found = set()
    try:
        maps = Path("/proc/self/maps").read_text()
    except OSError:
        return ()
    for line in maps.splitlines():
        path = line.split(maxsplit=5)[-1] if line.count(" ") >= 5 else ""
        if path.startswith("/") and ".so" in path and not path.startswith(("/usr/", "/lib")):
            if "libpython" in os.path.basename(path):
                found.add(path)
    return tuple(sorted(found))


@functools.lru_cache(maxsize=1)
def runtime() -> Runtime:
    """The private runtime of this interpreter, built on first use."""
    import sysconfig

    host_prefix = os.path.realpath(sys.base_prefix)
    stdlib = os.path.realpath(sysconfig.get_paths()["stdlib"])
    root = runtime_root()
    try:
        root.mkdir(mode=0o755, parents=True, exist_ok=True)
        _check_owned(root)
        binary = os.stat(host_interpreter())
        landmark = os.stat(os.path.join(stdlib, "os.py"))
        key = _digest(host_interpreter(), binary.st_size, binary.st_mtime_ns, stdlib, landmark.st_mtime_ns)
        prefix = _populate(root / f"python-{key}", lambda dest: _build_prefix(dest, host_prefix, stdlib))
        sources = START_SOURCE.encode() + b"".join((SANDBOX_DIR / name).read_bytes() for name in CODE_FILES)
        code = _populate(root / f"code-{hashlib.sha256(sources).hexdigest()[:16]}", _build_code)
    except RuntimeUnavailable:
        raise
    except OSError as exc:
        raise RuntimeUnavailable(
            f"cannot build the sandbox runtime under {root}: {exc}; set {RUNTIME_ENV} to a writable directory"
        ) from exc
    return Runtime(str(prefix), str(code), _loaded_libraries())


def interpreter() -> str:
    """The interpreter the child runs (the runtime's copy; with -I -S it sees only the stdlib)."""
    return runtime().python


def stdlib_roots() -> list[str]:
    """Directories the interpreter needs to start and import the standard library."""
    return [runtime().prefix]


def world_accessible(path: str) -> bool:
    """Whether any uid can reach ``path``: every parent searchable by others, the file readable."""
    current = Path(path).resolve()
    for parent in reversed(current.parents):
        if not os.stat(parent).st_mode & stat.S_IXOTH:
            return False
    return bool(os.stat(current).st_mode & stat.S_IROTH)


def can_drop_uid() -> bool:
    """Root can run the child as an unprivileged uid if that uid can reach the runtime."""
    if os.geteuid() != 0:
        return False
    try:
        found = runtime()
    except RuntimeUnavailable:
        return False
    return world_accessible(found.python) and world_accessible(found.start)


@functools.lru_cache(maxsize=1)
def seccomp_usable() -> bool:
    """Whether the kernel takes the seccomp filter (applied at every level that asks for it, and at
    ``namespaces`` wherever available: it is what restricts socket families there)."""
    from ade_sandbox import lsm

    return lsm.seccomp_available()


def minimal_env(home: str) -> dict[str, str]:
    """Allow-listed environment: nothing from the parent's (no secrets, no PYTHON* variables)."""
    return {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "HOME": home, "TMPDIR": home}


_SYSTEM_TOPS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")


@functools.lru_cache(maxsize=1)
def hidden_python_dirs() -> tuple[str, ...]:
    """Python package trees of the system (``/usr/lib/python3*``, ``/usr/local/lib/python3*``, ...):
    inside the system view but never visible to a strategy, which sees the runtime's stdlib only."""
    found = set()
    for base in ("/usr", "/usr/local", "/"):
        for libdir in glob.glob(os.path.join(base, "lib*")):
            for candidate in glob.glob(os.path.join(libdir, "python*")):
                if os.path.isdir(candidate) and not os.path.islink(candidate):
                    found.add(os.path.realpath(candidate))
    return tuple(sorted(found))


def _readable_except(root: str, hidden: tuple[str, ...]) -> list[str]:
    """Trees that together cover ``root`` minus the ``hidden`` ones (Landlock rules only add access)."""
    real = os.path.realpath(root)
    if real in hidden:
        return []
    if not any(h.startswith(real.rstrip("/") + "/") for h in hidden):
        return [real]
    trees = []
    for name in sorted(os.listdir(real)):
        child = os.path.join(real, name)
        if os.path.islink(child):
            continue  # a link inside resolves to a covered or a hidden place, or out of view
        trees += _readable_except(child, hidden)
    return trees


def _system_binds() -> list[str]:
    args = ["--ro-bind", "/usr", "/usr"]
    for top in _SYSTEM_TOPS:
        if os.path.islink(top):
            args += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            args += ["--ro-bind", top, top]
    for path in hidden_python_dirs():  # an empty root-owned 0555 tmpfs of one page over each
        args += ["--perms", "0555", "--size", "4096", "--tmpfs", path]
    return args


def bwrap_command(scratch_mb: int, *, as_root: bool) -> list[str]:
    """bubblewrap prefix: no network, own PID/IPC/UTS namespaces, a read-only view of the system
    libraries and programs (without Python package trees), the runtime and the bootstrap, and a
    size-limited tmpfs scratch that the bootstrap replaces with one whose inodes are limited too."""
    bwrap = shutil.which("bwrap") or "bwrap"
    args = [
        bwrap,
        "--unshare-ipc",
        "--unshare-pid",
        "--unshare-net",
        "--unshare-uts",
        "--unshare-cgroup-try",
        "--die-with-parent",
        "--new-session",
        "--cap-drop",
        "ALL",
        # Kept only until the bootstrap has mounted the scratch (SYS_ADMIN), emptied the bounding set
        # (SETPCAP) and dropped to the sandbox's uid (SETUID, SETGID); no capability reaches user code.
        "--cap-add",
        "CAP_SYS_ADMIN",
    ]
    if as_root:
        args += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID", "--cap-add", "CAP_SETPCAP"]
    else:
        args += ["--unshare-user", "--disable-userns"]
    args += _system_binds()
    found = runtime()
    binds = [(found.prefix, INNER_PYTHON_DIR), (found.code, INNER_SANDBOX_DIR)]
    binds += [(library, library) for library in found.libraries]  # found through the binary's RUNPATH
    if os.path.exists("/etc/ld.so.cache"):
        binds.append(("/etc/ld.so.cache", "/etc/ld.so.cache"))
    # bubblewrap creates missing parents as 0700, which the sandbox's uid could not traverse.
    parents = sorted({str(p) for _, dest in binds for p in Path(dest).parents if str(p) != "/"}, key=len)
    for parent in parents:
        args += ["--perms", "0755", "--dir", parent]
    for source, dest in binds:
        args += ["--ro-bind", source, dest]
    args += ["--proc", "/proc", "--dev", "/dev"]
    args += ["--size", str(scratch_mb << 20), "--perms", "0777", "--tmpfs", INNER_SCRATCH, "--chdir", INNER_SCRATCH]
    return args


def inner_interpreter() -> str:
    """The runtime's interpreter as the namespaced child sees it."""
    return os.path.join(INNER_PYTHON_DIR, "bin", os.path.basename(host_interpreter()))


@functools.lru_cache(maxsize=1)
def _system_read_paths() -> tuple[str, ...]:
    hidden = hidden_python_dirs()
    trees = _readable_except("/usr", hidden)
    for top in ("/lib", "/lib64", "/bin"):
        if os.path.isdir(top) and not os.path.islink(top):
            trees += _readable_except(top, hidden)
    return tuple(trees)


def landlock_paths(*, namespaced: bool, scratch: str) -> tuple[list[str], list[str]]:
    """(read, write) trees for Landlock: system libraries and programs without Python package
    trees, the runtime, the bootstrap; scratch writable."""
    if namespaced:
        own = [INNER_SANDBOX_DIR, INNER_PYTHON_DIR]
    else:
        found = runtime()
        own = [found.code, found.prefix]
    read = [*_system_read_paths(), "/etc/ld.so.cache", "/dev/null", "/dev/urandom", *own]
    return read, [scratch, "/dev/null"]


@dataclass
class Cgroup:
    """A per-run cgroup (v1 memory+pids hierarchies, or v2 unified) with memory and pids caps."""

    paths: dict[str, Path]  # controller -> directory
    unified: bool

    @classmethod
    def create(cls, memory_bytes: int, max_pids: int) -> Cgroup | None:
        name = f"ade-sandbox-{uuid.uuid4().hex[:12]}"
        root = Path("/sys/fs/cgroup")
        try:
            if (root / "cgroup.controllers").exists():
                controllers = (root / "cgroup.controllers").read_text().split()
                if not {"memory", "pids"} <= set(controllers):
                    return None
                path = root / name
                path.mkdir()
                group = cls({"memory": path, "pids": path, "cpuacct": path}, unified=True)
                (path / "memory.max").write_text(str(memory_bytes))
                if (path / "memory.swap.max").exists():
                    (path / "memory.swap.max").write_text("0")
                (path / "pids.max").write_text(str(max_pids))
                return group
            paths = {c: root / c / name for c in ("memory", "pids")}
            if not all(p.parent.is_dir() for p in paths.values()):
                return None
            if (root / "cpuacct").is_dir():  # CPU accounting the child cannot forge
                paths["cpuacct"] = root / "cpuacct" / name
            for p in paths.values():
                p.mkdir()
            group = cls(paths, unified=False)
            (paths["memory"] / "memory.limit_in_bytes").write_text(str(memory_bytes))
            (paths["pids"] / "pids.max").write_text(str(max_pids))
            return group
        except OSError:
            return None

    def procs_files(self) -> list[str]:
        return sorted({str(p / "cgroup.procs") for p in self.paths.values()})

    def open_procs(self) -> list[int]:
        """Write ends of the group's cgroup.procs files, handed to the child so that the bootstrap
        joins the group itself before user code runs (no preexec_fn, so spawning stays a vfork)."""
        return [os.open(procs, os.O_WRONLY | os.O_CLOEXEC) for procs in self.procs_files()]

    def pids(self) -> set[int]:
        found: set[int] = set()
        for procs in self.procs_files():
            try:
                found |= {int(x) for x in Path(procs).read_text().split()}
            except OSError:
                pass
        return found

    def oom_killed(self) -> bool:
        memory = self.paths["memory"]
        try:
            if self.unified:
                events = dict(line.split() for line in (memory / "memory.events").read_text().splitlines())
                return int(events.get("oom_kill", 0)) > 0 or int(events.get("max", 0)) > 0
            control = dict(line.split() for line in (memory / "memory.oom_control").read_text().splitlines())
            return int(control.get("oom_kill", 0)) > 0 or int((memory / "memory.failcnt").read_text()) > 0
        except (OSError, ValueError):
            return False

    def cpu_seconds(self) -> float | None:
        """CPU time of everything that ran in the group."""
        path = self.paths.get("cpuacct")
        try:
            if path is None:
                return None
            if self.unified:
                stat_lines = dict(line.split() for line in (path / "cpu.stat").read_text().splitlines())
                return int(stat_lines["usage_usec"]) / 1e6
            return int((path / "cpuacct.usage").read_text()) / 1e9
        except (OSError, KeyError, ValueError):
            return None

    def peak_bytes(self) -> int | None:
        memory = self.paths["memory"]
        name = "memory.peak" if self.unified else "memory.max_usage_in_bytes"
        try:
            return int((memory / name).read_text())
        except (OSError, ValueError):
            return None

    def freeze(self, frozen: bool = True) -> bool:
        """Freeze (or thaw) every process of a v2 group; False where there is no such freezer.

        A v1 freezer is not used: a frozen v1 task ignores SIGKILL until it is thawed, so a
        harness that dies while a worker is idle would leave the worker's processes behind.
        """
        if not self.unified:
            return False
        try:
            (self.paths["memory"] / "cgroup.freeze").write_text("1" if frozen else "0")
        except OSError:
            return False
        return True

    def kill_all(self) -> None:
        for _ in range(50):
            pids = self.pids()
            if not pids:
                return
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.01)

    def remove(self) -> None:
        self.kill_all()
        for path in {p for p in self.paths.values()}:
            try:
                path.rmdir()
            except OSError:
                pass
