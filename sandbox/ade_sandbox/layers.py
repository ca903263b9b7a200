"""The isolation layers: interpreter paths, the bubblewrap command line, cgroups."""

from __future__ import annotations

import os
import shutil
import signal
import stat
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

SANDBOX_DIR = Path(__file__).resolve().parent
BOOTSTRAP = SANDBOX_DIR / "bootstrap.py"
INNER_SANDBOX_DIR = "/opt/ade-sandbox"
INNER_SCRATCH = "/scratch"
NOBODY = 65534


def interpreter() -> str:
    """The real interpreter binary (not a venv shim): the child runs with -I -S, stdlib only."""
    return os.path.realpath(sys.executable)


def stdlib_roots() -> list[str]:
    """Directories the interpreter needs to start and import the standard library."""
    roots = {os.path.realpath(sys.base_prefix), os.path.realpath(sys.base_exec_prefix)}
    roots.add(str(Path(interpreter()).parent.parent))
    return sorted(roots)


def world_accessible(path: str) -> bool:
    """Whether uid 65534 can reach ``path``: every parent searchable by others, the file readable."""
    current = Path(path).resolve()
    for parent in reversed(current.parents):
        if not os.stat(parent).st_mode & stat.S_IXOTH:
            return False
    return bool(os.stat(current).st_mode & stat.S_IROTH)


def can_drop_uid() -> bool:
    """Root can run the child as nobody if nobody can still reach the interpreter and bootstrap."""
    if os.geteuid() != 0:
        return False
    return world_accessible(interpreter()) and world_accessible(str(BOOTSTRAP))


def minimal_env(home: str) -> dict[str, str]:
    """Allow-listed environment: nothing from the parent's (no secrets, no PYTHON* variables)."""
    return {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "HOME": home, "TMPDIR": home}


def _system_binds() -> list[str]:
    args = ["--ro-bind", "/usr", "/usr"]
    for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        if os.path.islink(top):
            args += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            args += ["--ro-bind", top, top]
    return args


def bwrap_command(scratch_mb: int, *, as_root: bool) -> list[str]:
    """bubblewrap prefix: no network, own PID/IPC/UTS namespaces, a read-only view of the
    interpreter and the bootstrap only, and a size-limited tmpfs scratch."""
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
    ]
    if as_root:
        # The bootstrap drops to nobody itself before user code runs; it needs these two.
        args += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
    else:
        args += ["--unshare-user", "--disable-userns"]
    args += _system_binds()
    binds = [(root, root) for root in stdlib_roots() if not root.startswith("/usr/")]
    binds.append((str(SANDBOX_DIR), INNER_SANDBOX_DIR))
    if os.path.exists("/etc/ld.so.cache"):
        binds.append(("/etc/ld.so.cache", "/etc/ld.so.cache"))
    # bubblewrap creates missing parents as 0700, which uid 65534 could not traverse.
    parents = sorted({str(p) for _, dest in binds for p in Path(dest).parents if str(p) != "/"}, key=len)
    for parent in parents:
        args += ["--perms", "0755", "--dir", parent]
    for source, dest in binds:
        args += ["--ro-bind", source, dest]
    args += ["--proc", "/proc", "--dev", "/dev"]
    args += ["--size", str(scratch_mb << 20), "--perms", "0777", "--tmpfs", INNER_SCRATCH, "--chdir", INNER_SCRATCH]
    return args


def landlock_paths(*, namespaced: bool, scratch: str) -> tuple[list[str], list[str]]:
    """(read, write) trees for Landlock: interpreter, stdlib, bootstrap; scratch writable."""
    sandbox_dir = INNER_SANDBOX_DIR if namespaced else str(SANDBOX_DIR)
    read = ["/usr", "/etc/ld.so.cache", "/dev/null", "/dev/urandom", sandbox_dir, *stdlib_roots()]
    read += [p for p in ("/lib", "/lib64", "/bin") if not os.path.islink(p)]
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
