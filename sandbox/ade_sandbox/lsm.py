"""Kernel-enforced confinement for the sandbox child: Landlock rules and a seccomp-BPF system-call filter.

The child bootstrap imports this file as a top-level module (``import lsm``), so it depends on the standard
library only. Every restriction applied here is irreversible for the calling thread and all of its later children;
apply it in a single-threaded process before running untrusted code.
"""

from __future__ import annotations

import ctypes
import errno
import os
import stat
import struct
import sys
from collections.abc import Sequence

# Landlock filesystem access rights (include/uapi/linux/landlock.h).
ACCESS_FS_EXECUTE = 1 << 0
ACCESS_FS_WRITE_FILE = 1 << 1
ACCESS_FS_READ_FILE = 1 << 2
ACCESS_FS_READ_DIR = 1 << 3
ACCESS_FS_REMOVE_DIR = 1 << 4
ACCESS_FS_REMOVE_FILE = 1 << 5
ACCESS_FS_MAKE_CHAR = 1 << 6
ACCESS_FS_MAKE_DIR = 1 << 7
ACCESS_FS_MAKE_REG = 1 << 8
ACCESS_FS_MAKE_SOCK = 1 << 9
ACCESS_FS_MAKE_FIFO = 1 << 10
ACCESS_FS_MAKE_BLOCK = 1 << 11
ACCESS_FS_MAKE_SYM = 1 << 12
ACCESS_FS_REFER = 1 << 13  # ABI 2
ACCESS_FS_TRUNCATE = 1 << 14  # ABI 3
ACCESS_FS_IOCTL_DEV = 1 << 15  # ABI 5
ACCESS_NET_BIND_TCP = 1 << 0  # ABI 4
ACCESS_NET_CONNECT_TCP = 1 << 1  # ABI 4
SCOPE_ABSTRACT_UNIX_SOCKET = 1 << 0  # ABI 6
SCOPE_SIGNAL = 1 << 1  # ABI 6

# The kernel rejects (EINVAL) a rule on a non-directory that carries any right outside this set.
ACCESS_FS_FILE = (
    ACCESS_FS_EXECUTE | ACCESS_FS_WRITE_FILE | ACCESS_FS_READ_FILE | ACCESS_FS_TRUNCATE | ACCESS_FS_IOCTL_DEV
)
ACCESS_FS_READ = ACCESS_FS_EXECUTE | ACCESS_FS_READ_FILE | ACCESS_FS_READ_DIR
# Writable trees get every right except creating device nodes (MAKE_CHAR, MAKE_BLOCK), which would bypass the rest.
ACCESS_FS_WRITE = ((1 << 16) - 1) & ~(ACCESS_FS_MAKE_CHAR | ACCESS_FS_MAKE_BLOCK)

# Newest Landlock ABI whose semantics this module knows; a newer kernel is driven as if it offered this one.
MAX_KNOWN_ABI = 7

_SYS_LANDLOCK_CREATE_RULESET = 444  # same number on x86_64 and aarch64 (unified table)
_SYS_LANDLOCK_ADD_RULE = 445
_SYS_LANDLOCK_RESTRICT_SELF = 446
_LANDLOCK_CREATE_RULESET_VERSION = 1
_LANDLOCK_RULE_PATH_BENEATH = 1

_PR_GET_SECCOMP = 21
_PR_SET_SECCOMP = 22
_PR_SET_NO_NEW_PRIVS = 38
_SECCOMP_MODE_FILTER = 2
_SECCOMP_GET_ACTION_AVAIL = 2

SECCOMP_RET_KILL_PROCESS = 0x80000000
SECCOMP_RET_ERRNO = 0x00050000
SECCOMP_RET_ALLOW = 0x7FFF0000

_AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
_X32_SYSCALL_BIT = 0x40000000

_SYSCALLS: dict[str, dict[str, int]] = {
    "x86_64": {
        "socket": 41,
        "clone": 56,
        "clone3": 435,
        "seccomp": 317,
        "ptrace": 101,
        "process_vm_readv": 310,
        "process_vm_writev": 311,
        "unshare": 272,
        "setns": 308,
        "mount": 165,
        "umount2": 166,
        "pivot_root": 155,
        "bpf": 321,
        "perf_event_open": 298,
        "keyctl": 250,
        "add_key": 248,
        "request_key": 249,
        "kexec_load": 246,
        "kexec_file_load": 320,
        "settimeofday": 164,
        "clock_settime": 227,
        "adjtimex": 159,
        "clock_adjtime": 305,
        "reboot": 169,
        "sethostname": 170,
        "setdomainname": 171,
        "syslog": 103,
        "acct": 163,
        "swapon": 167,
        "swapoff": 168,
        "init_module": 175,
        "finit_module": 313,
        "delete_module": 176,
        "iopl": 172,
        "ioperm": 173,
        "quotactl": 179,
        "userfaultfd": 323,
        "name_to_handle_at": 303,
        "open_by_handle_at": 304,
        "chroot": 161,
        "kcmp": 312,
        "fanotify_init": 300,
        "lookup_dcookie": 212,
        "chown": 92,
        "fchown": 93,
        "lchown": 94,
        "fchownat": 260,
        "setxattr": 188,
        "lsetxattr": 189,
        "fsetxattr": 190,
        "removexattr": 197,
        "lremovexattr": 198,
        "fremovexattr": 199,
        "socketpair": 53,
        "prlimit64": 302,
        "setpriority": 141,
        "sched_setaffinity": 203,
        "sched_setscheduler": 144,
        "sched_setparam": 142,
        "sched_setattr": 314,
        "ioprio_set": 251,
        "migrate_pages": 256,
        "move_pages": 279,
    },
    "aarch64": {
        "socket": 198,
        "clone": 220,
        "clone3": 435,
        "seccomp": 277,
        "ptrace": 117,
        "process_vm_readv": 270,
        "process_vm_writev": 271,
        "unshare": 97,
        "setns": 268,
        "mount": 40,
        "umount2": 39,
        "pivot_root": 41,
        "bpf": 280,
        "perf_event_open": 241,
        "keyctl": 219,
        "add_key": 217,
        "request_key": 218,
        "kexec_load": 104,
        "kexec_file_load": 294,
        "settimeofday": 170,
        "clock_settime": 112,
        "adjtimex": 171,
        "clock_adjtime": 266,
        "reboot": 142,
        "sethostname": 161,
        "setdomainname": 162,
        "syslog": 116,
        "acct": 89,
        "swapon": 224,
        "swapoff": 225,
        "init_module": 105,
        "finit_module": 273,
        "delete_module": 106,
        "quotactl": 60,
        "userfaultfd": 282,
        "name_to_handle_at": 264,
        "open_by_handle_at": 265,
        "chroot": 51,
        "kcmp": 272,
        "fanotify_init": 262,
        "lookup_dcookie": 18,
        "fchown": 55,
        "fchownat": 54,
        "setxattr": 5,
        "lsetxattr": 6,
        "fsetxattr": 7,
        "removexattr": 14,
        "lremovexattr": 15,
        "fremovexattr": 16,
        "socketpair": 199,
        "prlimit64": 261,
        "setpriority": 140,
        "sched_setaffinity": 122,
        "sched_setscheduler": 119,
        "sched_setparam": 118,
        "sched_setattr": 274,
        "ioprio_set": 30,
        "migrate_pages": 238,
        "move_pages": 239,
    },
}
# Syscalls added after 4.20 share one number across architectures.
_UNIFIED = {
    "io_uring_setup": 425,
    "io_uring_enter": 426,
    "io_uring_register": 427,
    "open_tree": 428,
    "move_mount": 429,
    "fsopen": 430,
    "fsconfig": 431,
    "fsmount": 432,
    "fspick": 433,
    "mount_setattr": 442,
    "landlock_create_ruleset": 444,
    "landlock_add_rule": 445,
    "landlock_restrict_self": 446,
    "pidfd_getfd": 438,
    "process_madvise": 440,
    "quotactl_fd": 443,
    "process_mrelease": 448,
    "setxattrat": 463,
    "removexattrat": 466,
    "open_tree_attr": 467,
    "file_setattr": 469,
}

# Denied outright with EPERM. The new mount API (open_tree .. mount_setattr) is listed with mount/umount2:
# the sandbox may start as root, so leaving it open would make the mount denial pointless. The clock,
# host-name, reboot, log, module, swap, quota and accounting calls change the machine, not the process;
# chown and the handle/chroot/fd-stealing calls are what a process that kept privileges would escape with.
DENIED_SYSCALLS = (
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "pidfd_getfd",
    "process_madvise",
    "process_mrelease",
    "kcmp",
    "unshare",
    "setns",
    "mount",
    "umount2",
    "pivot_root",
    "chroot",
    "open_tree",
    "open_tree_attr",
    "move_mount",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "mount_setattr",
    "name_to_handle_at",
    "open_by_handle_at",
    "bpf",
    "perf_event_open",
    "userfaultfd",
    "fanotify_init",
    "lookup_dcookie",
    "keyctl",
    "add_key",
    "request_key",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "kexec_load",
    "kexec_file_load",
    "init_module",
    "finit_module",
    "delete_module",
    "reboot",
    "settimeofday",
    "clock_settime",
    "adjtimex",
    "clock_adjtime",
    "sethostname",
    "setdomainname",
    "syslog",
    "acct",
    "swapon",
    "swapoff",
    "quotactl",
    "quotactl_fd",
    "iopl",
    "ioperm",
    "chown",
    "fchown",
    "lchown",
    "fchownat",
    "file_setattr",
)
# Extended attributes cannot be written: EOPNOTSUPP, which copy helpers (shutil.copystat) ignore.
UNSUPPORTED_SYSCALLS = (
    "setxattr",
    "lsetxattr",
    "fsetxattr",
    "setxattrat",
    "removexattr",
    "lremovexattr",
    "fremovexattr",
    "removexattrat",
)
# Calls that act on a process named by their first argument: allowed on the caller itself (pid 0) only,
# so a strategy cannot re-limit, renice or re-pin the harness or another sandbox.
SELF_ONLY_SYSCALLS = (
    "prlimit64",
    "sched_setaffinity",
    "sched_setscheduler",
    "sched_setparam",
    "sched_setattr",
    "migrate_pages",
    "move_pages",
)
PRIO_PROCESS = 0  # setpriority(which, who, ...): only (PRIO_PROCESS, 0), the caller itself
IOPRIO_WHO_PROCESS = 1  # ioprio_set(which, who, ...): only (IOPRIO_WHO_PROCESS, 0)
AF_UNIX = 1
SOCK_STREAM = 1
SOCK_TYPE_MASK = 0xF  # the type argument also carries SOCK_NONBLOCK and SOCK_CLOEXEC
CLONE_NAMESPACE_FLAGS = 0x20000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000

# Classic BPF opcodes (include/uapi/linux/filter.h) and struct seccomp_data offsets.
_BPF_LD_W_ABS = 0x00 | 0x00 | 0x20
_BPF_JEQ_K = 0x05 | 0x10
_BPF_JGE_K = 0x05 | 0x30
_BPF_JSET_K = 0x05 | 0x40
_BPF_ALU_AND_K = 0x04 | 0x50
_BPF_RET_K = 0x06
_DATA_NR = 0
_DATA_ARCH = 4


def _arg_low(index: int) -> int:
    """Offset of the low 32 bits of args[index]: only valid on little-endian, which _arch() insists on.
    Every argument checked here is an int (pid, family, type, which) that the kernel truncates to it."""
    return 16 + 8 * index


_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
_libc.prctl.restype = ctypes.c_int


class _RulesetAttr(ctypes.Structure):
    """struct landlock_ruleset_attr; only the prefix the running ABI knows is passed to the kernel."""

    _fields_ = [
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    ]


class _PathBeneathAttr(ctypes.Structure):
    """struct landlock_path_beneath_attr, which the UAPI declares packed (12 bytes)."""

    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


class _SockFilter(ctypes.Structure):
    """struct sock_filter: one classic BPF instruction."""

    _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8), ("k", ctypes.c_uint32)]


class _SockFprog(ctypes.Structure):
    """struct sock_fprog: the program handed to PR_SET_SECCOMP."""

    _fields_ = [("len", ctypes.c_uint16), ("filter", ctypes.POINTER(_SockFilter))]


def _raise_errno(what: str) -> None:
    """Raise the OSError for the errno the last libc call left behind."""
    err = ctypes.get_errno()
    raise OSError(err, f"{what}: {os.strerror(err)}")


def _syscall(what: str, nr: int, *args: int) -> int:
    """Invoke a raw system call; every argument travels as a C long because syscall(2) is variadic."""
    res = _libc.syscall(ctypes.c_long(nr), *(ctypes.c_long(a) for a in args))
    if res == -1:
        _raise_errno(what)
    return res


def _prctl(what: str, option: int, arg2: int = 0, arg3: int = 0) -> int:
    """Call prctl(2) with the unused trailing arguments zeroed, as several options require."""
    zero = ctypes.c_ulong(0)
    res = _libc.prctl(ctypes.c_int(option), ctypes.c_ulong(arg2), ctypes.c_ulong(arg3), zero, zero)
    if res == -1:
        _raise_errno(what)
    return res


def _set_no_new_privs() -> None:
    """Forbid privilege gains on execve, which both Landlock and seccomp require of an unprivileged caller."""
    _prctl("prctl(PR_SET_NO_NEW_PRIVS)", _PR_SET_NO_NEW_PRIVS, 1)


def _landlock_version() -> int:
    """Ask the kernel for its Landlock ABI; OSError (ENOSYS, EOPNOTSUPP) when it has none."""
    return _syscall("landlock_create_ruleset", _SYS_LANDLOCK_CREATE_RULESET, 0, 0, _LANDLOCK_CREATE_RULESET_VERSION)


def landlock_abi() -> int:
    """Landlock ABI version the kernel offers, 0 when unavailable (not built, disabled at boot, or blocked)."""
    try:
        return _landlock_version()
    except OSError:
        return 0


def _handled_fs(abi: int) -> int:
    """Filesystem rights the given ABI can restrict; handling all of them is what makes unlisted paths deny."""
    top_bit = {1: 13, 2: 14, 3: 15, 4: 15}.get(abi, 16)
    return (1 << top_bit) - 1


def _add_path_rule(ruleset_fd: int, path: str, access: int) -> None:
    """Grant access beneath path (a missing path is skipped); files only get the rights files can carry."""
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except (FileNotFoundError, NotADirectoryError):
        return
    try:
        if not stat.S_ISDIR(os.fstat(fd).st_mode):
            access &= ACCESS_FS_FILE
        rule = _PathBeneathAttr(access, fd)
        what = f"landlock_add_rule({path!r})"
        _syscall(what, _SYS_LANDLOCK_ADD_RULE, ruleset_fd, _LANDLOCK_RULE_PATH_BENEATH, ctypes.addressof(rule), 0)
    finally:
        os.close(fd)


def apply_landlock(
    read_paths: Sequence[str], write_paths: Sequence[str], *, restrict_tcp: bool = True, scope: bool = True
) -> int:
    """Confine this process and its future children to the given paths, irrevocably; returns the ABI used.

    Below read_paths: read and execute files, list directories. Below write_paths additionally: write, truncate,
    create and remove files, directories, sockets, fifos and symlinks, and rename within the granted trees (never
    device nodes). Nothing else on the filesystem. With ABI >= 4 and restrict_tcp every TCP bind and connect is
    denied; with ABI >= 6 and scope, signals to and abstract unix sockets of processes outside the domain are too.
    Missing paths are skipped. Raises OSError carrying the kernel errno on failure.
    """
    abi = min(_landlock_version(), MAX_KNOWN_ABI)
    handled_fs = _handled_fs(abi)
    attr = _RulesetAttr(
        handled_fs,
        ACCESS_NET_BIND_TCP | ACCESS_NET_CONNECT_TCP if abi >= 4 and restrict_tcp else 0,
        SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL if abi >= 6 and scope else 0,
    )
    # Pass only the fields this ABI defines: a kernel that knows fewer rejects a non-zero tail with E2BIG.
    attr_size = 8 if abi < 4 else 16 if abi < 6 else 24
    _set_no_new_privs()
    ruleset_fd = _syscall("landlock_create_ruleset", _SYS_LANDLOCK_CREATE_RULESET, ctypes.addressof(attr), attr_size, 0)
    try:
        for paths, access in ((read_paths, ACCESS_FS_READ), (write_paths, ACCESS_FS_WRITE)):
            for path in paths:
                _add_path_rule(ruleset_fd, os.fspath(path), access & handled_fs)
        _syscall("landlock_restrict_self", _SYS_LANDLOCK_RESTRICT_SELF, ruleset_fd, 0)
    finally:
        os.close(ruleset_fd)
    return abi


def _arch() -> str:
    """Name of the seccomp-supported architecture this process runs as; OSError(ENOTSUP) for any other."""
    machine = os.uname().machine.lower()  # not platform: it costs ~6 ms of imports at every spawn
    machine = {"amd64": "x86_64", "arm64": "aarch64"}.get(machine, machine)
    # A 32-bit or big-endian interpreter on a supported kernel would report a different AUDIT_ARCH and be killed.
    if machine not in _AUDIT_ARCH or struct.calcsize("P") != 8 or sys.byteorder != "little":
        raise OSError(errno.ENOTSUP, f"seccomp filter not supported on {os.uname().machine!r}")
    return machine


def syscall_table() -> dict[str, int]:
    """System-call numbers this module refers to, for the architecture of the running process."""
    return {**_SYSCALLS[_arch()], **_UNIFIED}


def seccomp_available() -> bool:
    """True when the kernel accepts seccomp filters with the kill-process action this module relies on."""
    try:
        _prctl("prctl(PR_GET_SECCOMP)", _PR_GET_SECCOMP)  # EINVAL: kernel built without CONFIG_SECCOMP
        nr = syscall_table()["seccomp"]
    except OSError:
        return False
    action = ctypes.c_uint32(SECCOMP_RET_KILL_PROCESS)
    try:  # fails without CONFIG_SECCOMP_FILTER or on kernels older than 4.14 (no kill-process action)
        _syscall("seccomp(SECCOMP_GET_ACTION_AVAIL)", nr, _SECCOMP_GET_ACTION_AVAIL, 0, ctypes.addressof(action))
    except OSError:
        return False
    return True


def build_seccomp_filter(arch: str, *, unix_sockets: bool = False) -> list[tuple[int, int, int, int]]:
    """The filter apply_seccomp installs, as (code, jt, jf, k) instructions with jump offsets resolved.

    Sockets are an allow-list: AF_UNIX only. Without ``unix_sockets`` (no private mount and network
    namespace, where a pathname or abstract socket of the host could be reached) not even that:
    only ``socketpair(AF_UNIX, SOCK_STREAM)``, whose ends are connected to each other and nothing else.
    """
    nrs = {**_SYSCALLS[arch], **_UNIFIED}
    prog: list[tuple[int, int | str, int | str, int]] = []
    labels: dict[str, int] = {}

    def emit(code: int, k: int, jt: int | str = 0, jf: int | str = 0) -> None:
        prog.append((code, jt, jf, k))

    def label(name: str) -> None:
        labels[name] = len(prog)

    emit(_BPF_LD_W_ABS, _DATA_ARCH)
    emit(_BPF_JEQ_K, _AUDIT_ARCH[arch], jf="kill")
    emit(_BPF_LD_W_ABS, _DATA_NR)
    if arch == "x86_64":  # x32 syscalls share AUDIT_ARCH_X86_64 and would otherwise slip past every number below
        emit(_BPF_JGE_K, _X32_SYSCALL_BIT, jt="kill")
    for name in DENIED_SYSCALLS:
        if name in nrs:  # a few exist on one architecture only (chown, iopl)
            emit(_BPF_JEQ_K, nrs[name], jt="eperm")
    for name in UNSUPPORTED_SYSCALLS:
        if name in nrs:
            emit(_BPF_JEQ_K, nrs[name], jt="eopnotsupp")
    for name in SELF_ONLY_SYSCALLS:
        emit(_BPF_JEQ_K, nrs[name], jt="self_only")
    # ENOSYS makes libc fall back to clone(), whose flags are a register the filter can inspect (clone3's are not).
    emit(_BPF_JEQ_K, nrs["clone3"], jt="enosys")
    emit(_BPF_JEQ_K, nrs["socket"], jt="socket")
    emit(_BPF_JEQ_K, nrs["socketpair"], jt="socketpair")
    emit(_BPF_JEQ_K, nrs["clone"], jt="clone")
    emit(_BPF_JEQ_K, nrs["setpriority"], jt="setpriority")
    emit(_BPF_JEQ_K, nrs["ioprio_set"], jt="ioprio_set")
    emit(_BPF_RET_K, SECCOMP_RET_ALLOW)
    label("socket")
    emit(_BPF_LD_W_ABS, _arg_low(0))
    emit(_BPF_JEQ_K, AF_UNIX, jf="eperm")
    emit(_BPF_RET_K, SECCOMP_RET_ALLOW if unix_sockets else SECCOMP_RET_ERRNO | errno.EPERM)
    label("socketpair")
    emit(_BPF_LD_W_ABS, _arg_low(0))
    emit(_BPF_JEQ_K, AF_UNIX, jf="eperm")
    if not unix_sockets:
        emit(_BPF_LD_W_ABS, _arg_low(1))
        emit(_BPF_ALU_AND_K, SOCK_TYPE_MASK)
        emit(_BPF_JEQ_K, SOCK_STREAM, jf="eperm")
    emit(_BPF_RET_K, SECCOMP_RET_ALLOW)
    label("clone")
    emit(_BPF_LD_W_ABS, _arg_low(0))  # clone's flags come first on both arches; the kernel uses the low word
    emit(_BPF_JSET_K, CLONE_NAMESPACE_FLAGS, jt="eperm")
    emit(_BPF_RET_K, SECCOMP_RET_ALLOW)
    label("self_only")
    emit(_BPF_LD_W_ABS, _arg_low(0))
    emit(_BPF_JEQ_K, 0, jf="eperm")
    emit(_BPF_RET_K, SECCOMP_RET_ALLOW)
    for name, which in (("setpriority", PRIO_PROCESS), ("ioprio_set", IOPRIO_WHO_PROCESS)):
        label(name)
        emit(_BPF_LD_W_ABS, _arg_low(0))
        emit(_BPF_JEQ_K, which, jf="eperm")
        emit(_BPF_LD_W_ABS, _arg_low(1))
        emit(_BPF_JEQ_K, 0, jf="eperm")
        emit(_BPF_RET_K, SECCOMP_RET_ALLOW)
    label("eperm")
    emit(_BPF_RET_K, SECCOMP_RET_ERRNO | errno.EPERM)
    label("eopnotsupp")
    emit(_BPF_RET_K, SECCOMP_RET_ERRNO | errno.EOPNOTSUPP)
    label("enosys")
    emit(_BPF_RET_K, SECCOMP_RET_ERRNO | errno.ENOSYS)
    label("kill")
    emit(_BPF_RET_K, SECCOMP_RET_KILL_PROCESS)

    def offset(index: int, target: int | str) -> int:
        # Jumps are relative to the next instruction, forward only, and must fit the u8 jt/jf fields.
        delta = labels[target] - index - 1 if isinstance(target, str) else target
        if not 0 <= delta <= 255:
            raise ValueError(f"BPF jump out of range at instruction {index}: {delta}")
        return delta

    return [(code, offset(i, jt), offset(i, jf), k) for i, (code, jt, jf, k) in enumerate(prog)]


def apply_seccomp(*, unix_sockets: bool = False) -> None:
    """Install the seccomp-BPF filter on this thread and its future children, irrevocably.

    EPERM for every socket family but AF_UNIX (and, without ``unix_sockets``, for everything but
    ``socketpair(AF_UNIX, SOCK_STREAM)``), for clone() with any namespace flag, for DENIED_SYSCALLS and for
    SELF_ONLY_SYSCALLS, setpriority and ioprio_set aimed at another process; EOPNOTSUPP for extended-attribute
    writes; ENOSYS for clone3; the process is killed when it calls through any other ABI (x32, i386).
    Everything else is allowed. Raises OSError (ENOTSUP on an architecture without a syscall table here).
    """
    instructions = build_seccomp_filter(_arch(), unix_sockets=unix_sockets)
    program = (_SockFilter * len(instructions))(*(_SockFilter(*ins) for ins in instructions))
    fprog = _SockFprog(len(instructions), ctypes.cast(program, ctypes.POINTER(_SockFilter)))
    _set_no_new_privs()
    _prctl("prctl(PR_SET_SECCOMP)", _PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.addressof(fprog))


# --- privileges, keyrings and the scratch mount (applied by the bootstrap before user code) -----------
_PR_CAPBSET_DROP = 24
_PR_CAP_AMBIENT = 47
_PR_CAP_AMBIENT_CLEAR_ALL = 4
_LINUX_CAPABILITY_VERSION_3 = 0x20080522
_KEYCTL_JOIN_SESSION_KEYRING = 1
_MS_NOSUID, _MS_NODEV, _MS_NOEXEC = 2, 4, 8


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def set_no_new_privs() -> None:
    """No execve may ever gain privileges again (setuid binaries, file capabilities)."""
    _set_no_new_privs()


def _last_cap() -> int:
    try:
        with open("/proc/sys/kernel/cap_last_cap") as handle:
            return int(handle.read())
    except (OSError, ValueError):
        return 40


_CAP_SETPCAP = 8


def drop_bounding_set() -> None:
    """Remove every capability from the bounding set while CAP_SETPCAP is held (a process started by
    bubblewrap with ``--cap-drop ALL`` has an emptied bounding set already)."""
    if not capability_sets().get("CapEff", 0) >> _CAP_SETPCAP & 1:
        return
    for cap in range(_last_cap() + 1):
        try:
            _prctl("prctl(PR_CAPBSET_DROP)", _PR_CAPBSET_DROP, cap)
        except OSError as exc:
            if exc.errno != errno.EINVAL:  # EINVAL: a capability this kernel does not know
                raise


def clear_capabilities() -> None:
    """Empty the effective, permitted, inheritable and ambient sets of this thread."""
    try:
        _prctl("prctl(PR_CAP_AMBIENT)", _PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL)
    except OSError as exc:
        if exc.errno != errno.EINVAL:  # kernels before 4.3 have no ambient set
            raise
    header = _CapHeader(_LINUX_CAPABILITY_VERSION_3, 0)
    data = (_CapData * 2)()
    if _libc.capset(ctypes.byref(header), data) != 0:
        _raise_errno("capset")


def capability_sets() -> dict[str, int]:
    """CapInh/CapPrm/CapEff/CapBnd/CapAmb of this process, as the kernel reports them."""
    with open("/proc/self/status") as handle:
        return {key: int(value, 16) for key, value in (line.split(":", 1) for line in handle if line.startswith("Cap"))}


def join_new_session_keyring() -> None:
    """Replace the inherited session keyring with a new, empty, anonymous one."""
    nr = {"x86_64": 250, "aarch64": 219}.get(os.uname().machine.lower())
    if nr is None:
        return
    _syscall("keyctl(KEYCTL_JOIN_SESSION_KEYRING)", nr, _KEYCTL_JOIN_SESSION_KEYRING, 0)


def mount_tmpfs(path: str, size_bytes: int, max_inodes: int) -> None:
    """Mount a fresh tmpfs on ``path`` with a byte and an inode limit (needs CAP_SYS_ADMIN over the mount
    namespace); kernel memory for inodes and dentries is bounded by the inode limit."""
    options = f"size={size_bytes},nr_inodes={max_inodes},mode=0777".encode()
    flags = _MS_NOSUID | _MS_NODEV
    if _libc.mount(b"tmpfs", os.fsencode(path), b"tmpfs", ctypes.c_ulong(flags), options) != 0:
        _raise_errno(f"mount tmpfs on {path}")
