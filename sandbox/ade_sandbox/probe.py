"""Which isolation layers work on this machine: probed once per process by real trial runs."""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from dataclasses import asdict, dataclass

from ade_sandbox import layers
from ade_sandbox.limits import LEVELS, Limits, level_rank

_TRIAL = "def ping():\n    return 'pong'\n"


@dataclass(frozen=True)
class Layer:
    """One layer: whether it works and why (or why not, with the fix)."""

    name: str
    available: bool
    detail: str


@dataclass(frozen=True)
class Report:
    """The doctor's findings and the best isolation level they allow."""

    layers: tuple[Layer, ...]
    best_level: str

    def layer(self, name: str) -> Layer:
        return next(layer for layer in self.layers if layer.name == name)

    def missing_for(self, level: str) -> str:
        """What is missing to reach ``level``, and how to get it."""
        needed = {
            "process": [],
            "process+lsm": ["landlock", "seccomp"],
            "namespaces": ["namespaces"],
            "strict": ["namespaces", "landlock", "seccomp"],
        }[level]
        missing = [self.layer(name) for name in needed if not self.layer(name).available]
        if not missing:
            return "all layers it needs are available"
        return "missing: " + "; ".join(f"{m.name} ({m.detail})" for m in missing)

    def to_json(self) -> dict[str, object]:
        return {"best_level": self.best_level, "levels": list(LEVELS), "layers": [asdict(x) for x in self.layers]}


def _trial(level: str) -> str | None:
    """Run a trivial strategy at ``level``; None when it worked, else the reason."""
    from ade_sandbox.runner import Worker

    try:
        with Worker(_TRIAL, limits=Limits(wall_s=20, cpu_s=10), level=level) as worker:
            result = worker.call("ping")
            if result.status == "ok" and result.value == "pong":
                return None
            return (result.error or result.status) + (f" ({result.stderr.strip()[-300:]})" if result.stderr else "")
    except OSError as exc:
        return f"{type(exc).__name__}: {exc}"


def _namespaces_layer() -> Layer:
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return Layer("namespaces", False, "bubblewrap is not installed; install it: apt-get install bubblewrap")
    version = subprocess.run([bwrap, "--version"], capture_output=True, text=True, check=False).stdout.strip()
    problem = _trial("namespaces")
    if problem:
        return Layer(
            "namespaces",
            False,
            f"{version or 'bubblewrap'} cannot build the sandbox: {problem}. Unprivileged user namespaces may be "
            "blocked (Docker's default seccomp profile, Ubuntu 24.04 AppArmor): allow them or run as root",
        )
    who = "as root, dropping to uid 65534 inside" if os.geteuid() == 0 else "in a user namespace"
    return Layer("namespaces", True, f"{version}: no network, own PID namespace, read-only view, tmpfs scratch; {who}")


def _lsm_layers() -> tuple[Layer, Layer]:
    from ade_sandbox import lsm

    abi = lsm.landlock_abi()
    landlock = (
        Layer("landlock", True, f"Landlock ABI {abi}" + ("; TCP restricted" if abi >= 4 else "; filesystem only"))
        if abi > 0
        else Layer(
            "landlock", False, "the kernel offers no Landlock (needs Linux >= 5.13 with landlock in the LSM list)"
        )
    )
    seccomp = (
        Layer("seccomp", True, "seccomp-BPF filter: no inet/netlink/packet sockets, ptrace, namespaces, mount, bpf")
        if lsm.seccomp_available()
        else Layer("seccomp", False, "the kernel refuses seccomp filters (CONFIG_SECCOMP_FILTER)")
    )
    if landlock.available and seccomp.available:
        problem = _trial("process+lsm")
        if problem:
            landlock = Layer("landlock", False, f"Landlock/seccomp trial failed: {problem}")
            seccomp = Layer("seccomp", False, f"Landlock/seccomp trial failed: {problem}")
    return landlock, seccomp


def _cgroup_layer() -> Layer:
    group = layers.Cgroup.create(64 << 20, 16)
    if group is None:
        return Layer("cgroups", False, "no writable cgroup with memory and pids controllers (run as root or delegate)")
    kind = "v2" if group.unified else "v1"
    group.remove()
    return Layer("cgroups", True, f"cgroup {kind} memory and pids limits (strict and process+lsm levels)")


def _uid_layer() -> Layer:
    if os.geteuid() != 0:
        return Layer("uid", True, f"runs as the invoking user (uid {os.geteuid()}), never as root")
    if layers.can_drop_uid():
        return Layer("uid", True, "drops root to uid 65534 before user code")
    return Layer(
        "uid",
        False,
        f"running as root and uid 65534 cannot reach the interpreter {layers.interpreter()}: at level 'process' "
        "the strategy keeps root (namespaced levels still drop to 65534)",
    )


@functools.lru_cache(maxsize=1)
def probe() -> Report:
    """Probe every layer (cached for the life of the process)."""
    namespaces = _namespaces_layer()
    landlock, seccomp = _lsm_layers()
    found = (
        Layer("process", True, "python -I -S child, allow-listed env, rlimits, scratch cwd, process-group kill"),
        _uid_layer(),
        namespaces,
        landlock,
        seccomp,
        _cgroup_layer(),
    )
    lsm_ok = landlock.available and seccomp.available
    if namespaces.available and lsm_ok:
        best = "strict"
    elif namespaces.available:
        best = "namespaces"
    elif lsm_ok:
        best = "process+lsm"
    else:
        best = "process"
    assert level_rank(best) >= 0
    return Report(found, best)
