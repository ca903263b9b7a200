"""Which isolation layers work on this machine: probed once per process by real trial runs."""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from dataclasses import asdict, dataclass

from ade_sandbox import layers
from ade_sandbox.limits import LEVELS, Limits, SandboxError, level_rank

_TRIAL = "def ping():\n    return 'pong'\n"


@dataclass(frozen=True)
class Layer:
    """One layer: whether it works and why (or why not, with the fix)."""

    name: str
    available: bool
    detail: str


@dataclass(frozen=True)
class LevelReport:
    """What one isolation level enforces on this machine, and what it does not."""

    level: str
    usable: bool
    enforced: tuple[str, ...]
    not_enforced: tuple[str, ...]
    warning: str | None = None  # e.g. the strategy would keep root, or the level is refused


@dataclass(frozen=True)
class Report:
    """The doctor's findings and the best isolation level they allow."""

    layers: tuple[Layer, ...]
    best_level: str
    levels: tuple[LevelReport, ...] = ()

    def level(self, name: str) -> LevelReport:
        return next(report for report in self.levels if report.level == name)

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
        refused = [r.warning for r in self.levels if r.level == level and not r.usable and r.warning]
        if not missing and not refused:
            return "all layers it needs are available"
        parts = ["missing: " + "; ".join(f"{m.name} ({m.detail})" for m in missing)] if missing else []
        return "; ".join(parts + refused)

    def to_json(self) -> dict[str, object]:
        return {
            "best_level": self.best_level,
            "levels": list(LEVELS),
            "layers": [asdict(x) for x in self.layers],
            "per_level": {
                r.level: {**asdict(r), "enforced": list(r.enforced), "not_enforced": list(r.not_enforced)}
                for r in self.levels
            },
        }


def _trial(level: str) -> str | None:
    """Run a trivial strategy at ``level``; None when it worked, else the reason."""
    from ade_sandbox.runner import Worker

    try:
        with Worker(_TRIAL, limits=Limits(wall_s=20, cpu_s=10), level=level) as worker:
            result = worker.call("ping")
            if result.status == "ok" and result.value == "pong":
                return None
            return (result.error or result.status) + (f" ({result.stderr.strip()[-300:]})" if result.stderr else "")
    except (OSError, SandboxError) as exc:
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
    who = "as root, dropping to a uid of its own inside" if os.geteuid() == 0 else "in a user namespace"
    return Layer("namespaces", True, f"{version}: no network, own PID namespace, read-only view, tmpfs scratch; {who}")


def _lsm_layers(namespaced: bool) -> tuple[Layer, Layer]:
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
        Layer(
            "seccomp",
            True,
            "seccomp-BPF filter: AF_UNIX sockets only, no ptrace, namespaces, mounts, bpf, clock/host/reboot/module "
            "calls, and no limits, priority or affinity of another process",
        )
        if lsm.seccomp_available()
        else Layer("seccomp", False, "the kernel refuses seccomp filters (CONFIG_SECCOMP_FILTER)")
    )
    if landlock.available and seccomp.available:
        # Tried where it will be used: with namespaces (strict) when they work, since process+lsm may be
        # refused for a reason of its own (root that cannot be dropped), which the level report states.
        problem = _trial("strict" if namespaced else "process+lsm")
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
    return Layer("cgroups", True, f"cgroup {kind} memory and pids limits per sandbox (process+lsm and strict)")


def _uid_layer() -> Layer:
    if os.geteuid() != 0:
        return Layer("uid", True, f"runs as the invoking user (uid {os.geteuid()}), never as root")
    if layers.can_drop_uid():
        return Layer("uid", True, "drops root to a uid of its own per sandbox, with no capabilities, before user code")
    return Layer(
        "uid",
        False,
        f"running as root and no unprivileged uid can reach the sandbox runtime under {layers.runtime_root()}: "
        f"level 'process' would keep root and 'process+lsm' is refused (namespaced levels still drop); set "
        f"{layers.RUNTIME_ENV} to a directory every user can traverse",
    )


def _level_reports(found: dict[str, Layer]) -> tuple[LevelReport, ...]:
    """Per level: what holds on this machine and what does not, from the layers that work here."""
    root, dropped = os.geteuid() == 0, found["uid"].available
    cgroup, seccomp = found["cgroups"].available, found["seccomp"].available
    landlock = found["landlock"].available
    reports = []
    for level in LEVELS:
        namespaced, confined = level in ("namespaces", "strict"), level in ("process+lsm", "strict")
        needs = {"namespaces": namespaced, "landlock": confined, "seccomp": confined}
        usable = all(found[name].available for name, needed in needs.items() if needed)
        filtered = confined or (namespaced and seccomp)
        keeps_root = root and not dropped and not namespaced
        warning = None
        if keeps_root and level == "process":
            warning = "keeps root: the strategy would run as root with every capability"
        elif keeps_root:
            usable, warning = (
                False,
                (
                    f"refused: it would keep root (no unprivileged uid can reach the runtime under "
                    f"{layers.runtime_root()}; set {layers.RUNTIME_ENV} to a directory every user can traverse)"
                ),
            )
        checks = [
            (not keeps_root, "never root: a uid of its own, no capabilities, no_new_privs"),
            (True, "separate process with rlimits (CPU, address space, files, processes), wall clock, group kill"),
            (True, "fresh session keyring"),
            (cgroup and confined, "cgroup: memory (kernel memory included) and process caps per sandbox"),
            (namespaced or (confined and landlock), "filesystem: only the runtime's stdlib and system libraries"),
            (namespaced or confined, "no network: no inet sockets reach anything"),
            (filtered, "socket families: AF_UNIX only"),
            (namespaced or confined, "no pathname or abstract socket of the host"),
            (
                filtered,
                "machine-wide calls (clock, reboot, hostname, syslog, modules) and other processes' "
                "limits, priority and affinity refused by seccomp",
            ),
            (namespaced, "scratch on its own tmpfs with size and inode limits"),
        ]
        enforced = tuple(text for holds, text in checks if holds)
        missing = [text for holds, text in checks if not holds]
        if not namespaced:
            missing.append("scratch is a host directory: bounded per file (RLIMIT_FSIZE), not in total")
        if not (cgroup and confined):
            missing.append("kernel memory (socket buffers, page tables) beyond the address-space rlimit")
        reports.append(LevelReport(level, usable, enforced, tuple(missing), warning))
    return tuple(reports)


@functools.lru_cache(maxsize=1)
def probe() -> Report:
    """Probe every layer (cached for the life of the process)."""
    namespaces = _namespaces_layer()
    landlock, seccomp = _lsm_layers(namespaces.available)
    found = (
        Layer("process", True, "python -I -S child, allow-listed env, rlimits, scratch cwd, process-group kill"),
        _uid_layer(),
        namespaces,
        landlock,
        seccomp,
        _cgroup_layer(),
    )
    levels = _level_reports({layer.name: layer for layer in found})
    usable = [report.level for report in levels if report.usable]
    best = max(usable, key=level_rank)
    return Report(found, best, levels)
