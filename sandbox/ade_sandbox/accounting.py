"""What the parent measures of a child's processes without a cgroup: the tree, CPU and peak memory.

The child's own report is never used (a strategy can replace the reporting function or write
a forged frame). At the namespaced levels the strategy's interpreter is a grandchild of the
launched bubblewrap and in a session of its own, so the process group does not reach it; the
tree under the launched process does, and in a PID namespace every orphan is re-parented to the
namespace's init, which is in the tree. At the plain ``process`` level an orphan that called
``setsid`` leaves the tree (as it leaves the process group); the cgroup levels count everything.

CPU is ``utime + stime + cutime + cstime`` of every live process of the tree (clock-tick
resolution): a process's reaped children are in its ``cutime``/``cstime``, live ones are
counted themselves. Peak memory is the largest ``VmHWM`` among them.
"""

from __future__ import annotations

import os

_TICK = os.sysconf("SC_CLK_TCK")


def _children(pid: int) -> list[int] | None:
    """Live children of ``pid`` (every thread's), None where the kernel has no children files."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []
    found: list[int] = []
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/children", "rb") as handle:
                found += map(int, handle.read().split())
        except FileNotFoundError:
            return None  # CONFIG_PROC_CHILDREN is off, or the thread just ended
        except OSError:
            continue
    return found


def _children_by_scan() -> dict[int, list[int]]:
    """Parent -> children of every process, from ``/proc/*/stat`` (slow; the fallback)."""
    tree: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            fields = _stat(int(name))
            if fields is not None:
                tree.setdefault(int(fields[1]), []).append(int(name))
    return tree


def descendants(root: int) -> list[int]:
    """``root`` and every live process below it, parents before children."""
    order, seen, scanned = [root], {root}, None
    index = 0
    while index < len(order):
        pid = order[index]
        index += 1
        children = _children(pid) if scanned is None else None
        if children is None:
            scanned = scanned if scanned is not None else _children_by_scan()
            children = scanned.get(pid, [])
        for child in children:
            if child not in seen:
                seen.add(child)
                order.append(child)
    return order


def _stat(pid: int) -> list[bytes] | None:
    """Fields of ``/proc/<pid>/stat`` after the command name (state first), or None if gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            text = handle.read()
    except OSError:
        return None
    return text[text.rfind(b")") + 2 :].split()


def _peak_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status", "rb") as handle:
            for line in handle:
                if line.startswith(b"VmHWM:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


def cpu_seconds(pids: list[int]) -> float:
    """CPU seconds of ``pids`` and of the children they reaped, as the kernel counts them."""
    ticks = 0
    for pid in pids:
        fields = _stat(pid)
        if fields is not None:
            ticks += sum(int(value) for value in fields[11:15])  # utime stime cutime cstime
    return ticks / _TICK


def peak_mb(pids: list[int]) -> float:
    """The largest peak resident size (VmHWM) among ``pids``, in MB."""
    return max((_peak_kb(pid) for pid in pids), default=0) / 1024
