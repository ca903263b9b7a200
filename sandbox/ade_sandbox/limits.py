"""Isolation levels and resource limits."""

from __future__ import annotations

from dataclasses import asdict, dataclass

# Ordered weakest first. process+lsm is process isolation plus Landlock and seccomp, the
# fallback where namespaces are blocked (Docker's default profile, Ubuntu 24.04 AppArmor).
LEVELS: tuple[str, ...] = ("process", "process+lsm", "namespaces", "strict")


class SandboxError(Exception):
    """Base of the sandbox's own errors (not strategy failures, which are typed results)."""


class IsolationUnavailable(SandboxError):
    """The machine cannot reach the configured minimum isolation level."""


def level_rank(level: str) -> int:
    """Position of ``level`` in LEVELS; a typo is an error naming the known levels."""
    try:
        return LEVELS.index(level)
    except ValueError:
        raise SandboxError(f"unknown isolation level {level!r}; known levels: {', '.join(LEVELS)}") from None


@dataclass(frozen=True)
class Limits:
    """Resource limits of one sandboxed process (rlimits, cgroups and parent-side caps)."""

    wall_s: float = 60.0
    cpu_s: float = 60.0
    memory_mb: int = 2048
    max_output_bytes: int = 1 << 20  # stdout and stderr, each
    max_result_bytes: int = 64 << 20
    max_result_depth: int = 100  # nesting of any message from the child (results, service requests)
    max_result_items: int = 1_000_000  # JSON values and keys in one message: bounds what decoding inflates to
    max_open_files: int = 256
    max_processes: int = 32
    max_file_mb: int = 64
    scratch_mb: int = 64
    scratch_files: int = 16384  # inodes of the namespaced scratch (files, directories, links)

    def __post_init__(self) -> None:
        for name, value in asdict(self).items():
            if value <= 0:
                raise SandboxError(f"limit {name} must be > 0 (got {value!r})")

    def for_child(self, *, cgroup_memory: bool, drop_uid: bool) -> dict[str, int]:
        """The rlimits the bootstrap applies before importing user code."""
        memory = self.memory_mb << 20
        # With a cgroup enforcing resident memory, the address-space cap only stops runaway
        # reservations; without one it is the memory limit itself.
        address_space = memory * 2 + (512 << 20) if cgroup_memory else memory + (256 << 20)
        return {
            "cpu_s": max(1, int(self.cpu_s + 0.999)),
            "address_space_bytes": address_space,
            "max_file_bytes": self.max_file_mb << 20,
            "max_open_files": self.max_open_files,
            # RLIMIT_NPROC counts per uid and is ignored for root: only meaningful after the drop.
            "max_processes": self.max_processes if drop_uid else 0,
        }
