"""Resource slots: the share of this machine the local executor grants one request, and the per-attempt layout.

A slot owns a set of CPU cores and/or GPU ids for as long as one attempt runs on it. Its
environment is how that ownership reaches the Engine process: CUDA_VISIBLE_DEVICES for
GPUs, a CPU affinity mask plus matching OpenMP/MKL thread counts for cores, so that
concurrent attempts neither share an accelerator nor oversubscribe the cores.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ade_core.errors import ExecutorError
from ade_core.schemas.config import ResourceConfig

_THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


@dataclass(frozen=True)
class Slot:
    """A named share of the machine: CPU cores (affinity) and/or GPU ids (CUDA_VISIBLE_DEVICES)."""

    name: str
    cpus: tuple[int, ...] = ()
    gpus: tuple[str, ...] = ()

    def resources(self) -> dict[str, str]:
        """The physical assignment as recorded with the attempt (``ade status`` shows it)."""
        found = {"slot": self.name}
        if self.cpus:
            found["cpus"] = cpu_list(self.cpus)
        if self.gpus:
            found["cuda_visible_devices"] = ",".join(self.gpus)
        return found

    def environment(self, threads: int | None = None) -> dict[str, str]:
        """Variables that confine the attempt's process to this slot, with ``threads`` OpenMP/MKL/torch threads
        (default: one per core of the slot)."""
        env = {"ADE_EXECUTOR_SLOT": self.name}
        if self.gpus:
            env["CUDA_VISIBLE_DEVICES"] = ",".join(self.gpus)
        elif self.cpus:
            # A CPU slot must not grab a GPU that another slot owns.
            env["CUDA_VISIBLE_DEVICES"] = ""
        count = threads or len(self.cpus)
        if count:
            env.update(dict.fromkeys(_THREAD_VARIABLES, str(count)))
        return env


def cpu_list(cpus: Sequence[int]) -> str:
    """Cores in the kernel's list format: ``(0, 1, 2, 5)`` -> ``"0-2,5"``."""
    runs: list[list[int]] = []
    for core in sorted(set(cpus)):
        if runs and core == runs[-1][-1] + 1:
            runs[-1].append(core)
        else:
            runs.append([core])
    return ",".join(str(run[0]) if len(run) == 1 else f"{run[0]}-{run[-1]}" for run in runs)


def usable_cpus() -> list[int]:
    """Cores this process may run on (its affinity mask where the OS has one)."""
    if hasattr(os, "sched_getaffinity"):
        return sorted(os.sched_getaffinity(0))
    return list(range(os.cpu_count() or 1))


def visible_gpus() -> list[str]:
    """GPU ids this process may hand out, found without importing torch (the controller must not need it).

    CUDA_VISIBLE_DEVICES wins when set; otherwise the NVIDIA driver's ``/proc`` listing is counted.
    """
    declared = os.environ.get("CUDA_VISIBLE_DEVICES")
    if declared is not None:
        ids = [part.strip() for part in declared.split(",") if part.strip()]
        return [] if ids[:1] == ["-1"] else ids
    listing = Path("/proc/driver/nvidia/gpus")
    return [str(i) for i in range(len(list(listing.iterdir())))] if listing.is_dir() else []


def slots_from_resources(
    resources: ResourceConfig, *, cpus: Sequence[int] | None = None, gpus: Sequence[str] | None = None
) -> list[Slot]:
    """Slots that realize a configuration's resource policy (paper Appendix D.4) on this machine.

    CUDA: one attempt trains and then evaluates in a single process, so it holds
    ``max(train_gpus, eval_gpus, 1)`` GPUs; the visible GPUs are cut into slots of that size
    and the cores are shared out evenly among them. CPU: the cores are cut into slots of
    ``cpu_threads`` (one slot with every core when it is unset or larger than the machine).
    ``cpus`` and ``gpus`` default to what this process can use.
    """
    cores = sorted(cpus) if cpus is not None else usable_cpus()
    if resources.device == "cuda":
        ids = list(gpus) if gpus is not None else visible_gpus()
        per = max(resources.train_gpus, resources.eval_gpus, 1)
        count = len(ids) // per
        if count == 0:
            raise ExecutorError(
                f"[resources] needs {per} GPU(s) per attempt but {len(ids)} are visible ({ids}); "
                "set CUDA_VISIBLE_DEVICES, lower train_gpus/eval_gpus, or use device = 'cpu'"
            )
        share = len(cores) // count
        return [
            Slot(str(i), cpus=tuple(cores[i * share : (i + 1) * share]), gpus=tuple(ids[i * per : (i + 1) * per]))
            for i in range(count)
        ]
    if not cores:
        raise ExecutorError("no CPU cores to build slots from; pass cpus=[...] or check the process affinity")
    threads = min(resources.cpu_threads or len(cores), len(cores))
    return [Slot(str(i), cpus=tuple(cores[i * threads : (i + 1) * threads])) for i in range(len(cores) // threads)]
