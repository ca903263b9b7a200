"""``ade doctor``: what this machine offers a Run, and whether a config's needs are met here.

The machine side is read, never changed: optional packages by ``importlib.util.find_spec`` and
their distribution metadata (vLLM, DeepSpeed and flash-attention are never imported; vLLM would
initialize CUDA), GPUs through torch, the sandbox level through ade-sandbox's own probe (the one
`ade sandbox doctor` prints), GPU ids for slots as the local executor finds them. The config side
is loaded with the schema and plugin checks only (not ``check_generation`` or ``check_local_paths``,
which stop at the first refusal), so that every unmet requirement is listed at once.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from ade_core.schemas.operational import OperationalSettings

if TYPE_CHECKING:
    from ade_core.config import LoadedConfig

OPTIONAL_PACKAGES = {"vllm": "vllm", "deepspeed": "deepspeed", "flash_attn": "flash-attn"}  # module -> distribution
GPU_EXTRA = "pip install 'ade-core[gpu]'"


@dataclass(frozen=True)
class Gpu:
    """One CUDA device torch sees."""

    name: str
    memory_bytes: int
    bf16: bool


@dataclass(frozen=True)
class Machine:
    """What this machine offers a Run: executor resources, torch and CUDA, optional packages, sandbox level."""

    executor: str
    cpus: int
    memory_bytes: int | None
    torch: str | None  # version, None when not installed
    cuda: str | None  # the CUDA version torch was built with
    cuda_available: bool
    gpus: tuple[Gpu, ...]
    visible_gpu_ids: tuple[str, ...]  # what the local executor hands out (CUDA_VISIBLE_DEVICES or the driver)
    packages: dict[str, str | None]  # module -> version, None when not installed
    sandbox_level: str
    sandbox_levels: dict[str, bool]  # level -> usable here

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Requirement:
    """One thing a config needs of the machine: met, or missing with the fix."""

    key: str
    needs: str
    met: bool
    detail: str
    fix: str = ""


@dataclass(frozen=True)
class ConfigReport:
    """What a config will use and which of its requirements this machine meets."""

    source: str
    uses: dict[str, Any]
    requirements: tuple[Requirement, ...]

    @property
    def missing(self) -> list[Requirement]:
        return [r for r in self.requirements if not r.met]

    def to_json(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "uses": self.uses,
            "requirements": [asdict(r) for r in self.requirements],
            "missing": [r.key for r in self.missing],
        }


def package_version(module: str, distribution: str) -> str | None:
    """The installed version of an optional package, None when it is absent (never imported)."""
    try:
        if importlib.util.find_spec(module) is None:
            return None
    except ValueError:  # a module object without a spec stands in for it
        return None
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return "unknown version"


def _memory_bytes() -> int | None:
    """Physical memory from the OS (psutil is no dependency of ADE; sysconf answers on Linux and macOS)."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):  # no sysconf, or the name is unknown here
        return None


def _torch() -> tuple[str | None, str | None, bool, tuple[Gpu, ...]]:
    if package_version("torch", "torch") is None:
        return None, None, False, ()
    import torch

    if not torch.cuda.is_available():
        return torch.__version__, torch.version.cuda, False, ()
    gpus = []
    for index in range(torch.cuda.device_count()):
        props = torch.cuda.get_device_properties(index)
        with torch.cuda.device(index):
            bf16 = bool(torch.cuda.is_bf16_supported())
        gpus.append(Gpu(props.name, int(props.total_memory), bf16))
    return torch.__version__, torch.version.cuda, True, tuple(gpus)


def probe_machine() -> Machine:
    """This machine as a Run would find it."""
    from ade_core.executors.slots import usable_cpus, visible_gpus
    from ade_sandbox import probe

    torch_version, cuda, cuda_available, gpus = _torch()
    sandbox = probe()
    return Machine(
        executor=OperationalSettings().executor.kind,
        cpus=len(usable_cpus()),
        memory_bytes=_memory_bytes(),
        torch=torch_version,
        cuda=cuda,
        cuda_available=cuda_available,
        gpus=gpus,
        visible_gpu_ids=tuple(visible_gpus()),
        packages={module: package_version(module, dist) for module, dist in OPTIONAL_PACKAGES.items()},
        sandbox_level=sandbox.best_level,
        sandbox_levels={report.level: report.usable for report in sandbox.levels},
    )


def config_uses(loaded: LoadedConfig) -> dict[str, Any]:
    """The settings of ``loaded`` that decide what it needs of the machine."""
    experiment, operational = loaded.experiment, loaded.operational
    recipe = experiment.training.grpo if experiment.training.paradigm == "grpo" else experiment.training.sft
    resources = experiment.resources
    uses: dict[str, Any] = {
        "task": experiment.task,
        "resources.device": resources.device,
        "resources.train_gpus": resources.train_gpus,
        "resources.eval_gpus": resources.eval_gpus,
        "resources.cpu_threads": resources.cpu_threads,
        "model.target": experiment.model.target,
        "model.dtype": experiment.model.dtype,
        "training.paradigm": experiment.training.paradigm,
        "engine.generation.backend": experiment.engine.generation.backend,
        "operational.executor.kind": operational.executor.kind,
        "operational.executor.slots": operational.executor.slots,
        **(
            {"operational.executor.address": operational.executor.address} if operational.executor.kind == "ray" else {}
        ),
        "operational.sandbox.min_isolation": operational.sandbox.min_isolation,
        "operational.agents.backend": operational.agents.backend,
    }
    if recipe is not None:
        prefix = f"training.{experiment.training.paradigm}"
        uses[f"{prefix}.bf16"] = recipe.bf16
        uses[f"{prefix}.world_size"] = recipe.world_size
        uses[f"{prefix}.deepspeed"] = recipe.deepspeed.model_dump() if recipe.deepspeed else None
    if experiment.training.grpo is not None and experiment.training.paradigm == "grpo":
        uses["training.grpo.vllm_mode"] = experiment.training.grpo.vllm_mode
    return uses


def _ray_address(operational: Any) -> dict[str, str]:
    return {"operational.executor.address": operational.executor.address} if operational.executor.kind == "ray" else {}


def _installed(machine: Machine, module: str) -> str:
    version = machine.packages.get(module)
    return f"{OPTIONAL_PACKAGES[module]} {version} is installed" if version else f"{module} is not installed"


def _device_requirements(loaded: LoadedConfig, machine: Machine) -> list[Requirement]:
    from ade_core.errors import ExecutorError
    from ade_core.executors.slots import slots_from_resources

    resources, found = loaded.experiment.resources, []
    if resources.device == "cuda":
        seen = ", ".join(g.name for g in machine.gpus)
        found.append(
            Requirement(
                "[resources].device = 'cuda'",
                "a CUDA GPU",
                machine.cuda_available,
                f"torch sees {len(machine.gpus)} GPU(s): {seen}"
                if machine.cuda_available
                else "none visible ("
                + ("torch is not installed" if machine.torch is None else "torch.cuda.is_available() is False")
                + ")",
                "run on a GPU host, or set [resources].device = 'cpu' (and train_gpus = eval_gpus = 0)",
            )
        )
    try:
        slots = slots_from_resources(resources, gpus=machine.visible_gpu_ids)
        found.append(Requirement("[resources]", "one executor slot", True, f"{len(slots)} slot(s) here"))
    except ExecutorError as exc:
        found.append(Requirement("[resources]", "one executor slot", False, str(exc)))
    return found


def _precision_requirements(loaded: LoadedConfig, machine: Machine) -> list[Requirement]:
    """bfloat16 on CUDA needs GPUs that support it (on CPU it runs, only slowly)."""
    experiment = loaded.experiment
    recipe = experiment.training.grpo if experiment.training.paradigm == "grpo" else experiment.training.sft
    keys = (["[model].dtype = 'bfloat16'"] if experiment.model.dtype == "bfloat16" else []) + (
        [f"[training.{experiment.training.paradigm}].bf16 = true"] if recipe is not None and recipe.bf16 else []
    )
    if not keys or experiment.resources.device != "cuda" or not machine.cuda_available:
        return []
    lacking = [g.name for g in machine.gpus if not g.bf16]
    return [
        Requirement(
            " and ".join(keys),
            "GPUs with bfloat16 support",
            not lacking,
            f"without bfloat16: {', '.join(lacking)}" if lacking else "every visible GPU supports bfloat16",
            "use GPUs with bfloat16 (Ampere or newer), or set [model].dtype = 'float32' and bf16 = false",
        )
    ]


def _package_requirements(loaded: LoadedConfig, machine: Machine) -> list[Requirement]:
    """vLLM for evaluation or GRPO rollouts, DeepSpeed for a [training.*.deepspeed] table, torch always."""
    experiment, found = loaded.experiment, []
    found.append(
        Requirement(
            "the Engine (training, evaluation)",
            "torch",
            machine.torch is not None,
            f"torch {machine.torch} is installed" if machine.torch else "torch is not installed",
            "pip install 'ade-core[train]'",
        )
    )
    vllm = machine.packages.get("vllm") is not None
    if experiment.engine.generation.backend == "vllm":
        found.append(
            Requirement(
                "[engine.generation].backend = 'vllm'",
                "vllm",
                vllm,
                _installed(machine, "vllm"),
                f"{GPU_EXTRA} on a GPU host, or set [engine.generation].backend = 'hf'",
            )
        )
    grpo = experiment.training.grpo
    if experiment.training.paradigm == "grpo" and grpo is not None and grpo.vllm_mode != "off":
        found.append(
            Requirement(
                f"[training.grpo].vllm_mode = {grpo.vllm_mode!r}",
                "vllm",
                vllm,
                _installed(machine, "vllm"),
                f"{GPU_EXTRA} on a GPU host, or set [training.grpo].vllm_mode = 'off'",
            )
        )
    if experiment.engine.generation.backend == "openai":
        url = loaded.operational.generation.base_url
        found.append(
            Requirement(
                "[engine.generation].backend = 'openai'",
                "an OpenAI-compatible server",
                url is not None,
                f"[operational.generation].base_url = {url!r}" if url else "[operational.generation].base_url is unset",
                "set [operational.generation].base_url, e.g. 'http://127.0.0.1:8000/v1' (or use backend 'hf')",
            )
        )
    recipe = experiment.training.grpo if experiment.training.paradigm == "grpo" else experiment.training.sft
    if recipe is not None and recipe.deepspeed is not None:
        key = f"[training.{experiment.training.paradigm}.deepspeed]"
        found.append(
            Requirement(
                key,
                "deepspeed",
                machine.packages.get("deepspeed") is not None,
                _installed(machine, "deepspeed"),
                f"{GPU_EXTRA} on a GPU host, or remove the {key} table",
            )
        )
    return found


def _sandbox_requirements(loaded: LoadedConfig, machine: Machine) -> list[Requirement]:
    from ade_sandbox import probe
    from ade_sandbox.limits import level_rank

    wanted = loaded.operational.sandbox.min_isolation
    met = level_rank(machine.sandbox_level) >= level_rank(wanted)
    detail = f"this machine reaches {machine.sandbox_level!r}"
    return [
        Requirement(
            f"[operational.sandbox].min_isolation = {wanted!r}",
            f"sandbox isolation {wanted!r} or stronger",
            met,
            detail if met else f"{detail}; {probe().missing_for(wanted)}",
            "provide the missing layers (`ade sandbox doctor` shows each) or lower [operational.sandbox].min_isolation",
        )
    ]


def _path_requirements(loaded: LoadedConfig) -> list[Requirement]:
    """Every local path the config names exists, as `ade config validate` checks them."""
    from ade_core.config import local_path_present, local_paths

    found = []
    for key, path, what in local_paths(loaded):
        present = local_path_present(path, what)
        found.append(
            Requirement(
                key,
                what,
                present,
                f"{path} {'exists' if present else 'does not exist'}",
                "put it there (docs/running.md says where each comes from) or point the key at a local copy with --set",
            )
        )
    return found


def _executor_requirements(loaded: LoadedConfig) -> list[Requirement]:
    """``kind = "ray"``: ray installed, the cluster reachable, a node for one attempt, the workers' sandbox level."""
    from ade_core.errors import ExecutorError
    from ade_sandbox.limits import level_rank

    settings = loaded.operational.executor
    if settings.kind != "ray":
        return []
    key = "[operational.executor].kind = 'ray'"
    if package_version("ray", "ray") is None:
        return [Requirement(key, "ray", False, "ray is not installed", "pip install 'ade-core[ray]' on every node")]
    from ade_core.executors.factory import ray_share
    from ade_core.executors.ray import probe_cluster

    try:
        cluster = probe_cluster(settings.address)
    except ExecutorError as exc:
        fix = "start one (`ray start --head`, docs/scale-out.md) or set [operational.executor].address"
        return [Requirement(key, "a reachable Ray cluster", False, str(exc), fix)]
    nodes, totals = cluster["nodes"], cluster["resources"]
    summary = ", ".join(
        f"{name} {amount:g}" for name, amount in sorted(totals.items()) if name != "object_store_memory"
    )
    found = [Requirement(key, "a reachable Ray cluster", True, f"{settings.address}: {len(nodes)} node(s); {summary}")]
    share = ray_share(loaded.experiment.resources)
    largest = max((node["resources"].get("CPU", 0.0) for node in nodes), default=0.0)
    cpus, gpus = share.cpus or largest, share.gpus or 0
    fits = [n for n in nodes if n["resources"].get("CPU", 0) >= cpus and n["resources"].get("GPU", 0) >= gpus]
    found.append(
        Requirement(
            "[resources]",
            f"a node with {cpus:g} CPU(s) and {gpus} GPU(s) for one attempt",
            bool(fits),
            f"{len(fits)} of {len(nodes)} node(s) have them",
            "add such a node, or lower [resources].cpu_threads / train_gpus / eval_gpus",
        )
    )
    wanted = loaded.operational.sandbox.min_isolation
    levels = {f"node {node['node'][:8]} at {node['address']}": node["sandbox_level"] for node in nodes}
    below = {where: level for where, level in levels.items() if not level or level_rank(level) < level_rank(wanted)}
    found.append(
        Requirement(
            f"[operational.sandbox].min_isolation = {wanted!r} on workers",
            f"sandbox isolation {wanted!r} or stronger on every node (reward modules and code graders run there)",
            not below,
            "; ".join(f"{where} reaches {level!r}" for where, level in sorted(levels.items())),
            "provide the missing layers on those nodes (`ade sandbox doctor` there shows each)",
        )
    )
    return found


def requirements(loaded: LoadedConfig, machine: Machine) -> list[Requirement]:
    """Everything ``loaded`` needs of this machine (and, for ``kind = "ray"``, of its cluster), met or missing."""
    return [
        *_executor_requirements(loaded),
        *(_device_requirements(loaded, machine) if loaded.operational.executor.kind == "local" else []),
        *_precision_requirements(loaded, machine),
        *_package_requirements(loaded, machine),
        *_sandbox_requirements(loaded, machine),
        *_path_requirements(loaded),
    ]


def _size(value: int | None) -> str:
    return "unknown" if value is None else f"{value / 2**30:.1f} GiB"


def render_machine(machine: Machine) -> list[str]:
    """The machine as aligned ``name  value`` rows."""
    gpus = "; ".join(f"{g.name} ({_size(g.memory_bytes)})" for g in machine.gpus)
    if machine.torch is None:
        cuda = "no (torch is not installed)"
    elif machine.cuda_available:
        cuda = f"yes, CUDA {machine.cuda}: {len(machine.gpus)} GPU(s): {gpus}"
    else:
        cuda = "no (torch.cuda.is_available() is False)"
    usable = [level for level, ok in machine.sandbox_levels.items() if ok]
    rows = [
        ("executor", f"{machine.executor}: {machine.cpus} CPU core(s), {_size(machine.memory_bytes)} memory"),
        ("torch", machine.torch or "not installed"),
        ("cuda", cuda),
        (
            "executor gpus",
            ", ".join(machine.visible_gpu_ids) or "none: CUDA_VISIBLE_DEVICES and the NVIDIA driver list none",
        ),
        *((OPTIONAL_PACKAGES[module], version or "not installed") for module, version in machine.packages.items()),
        ("sandbox", f"reaches {machine.sandbox_level!r} (usable: {', '.join(usable)}; `ade sandbox doctor`)"),
    ]
    return [f"{name:14} {value}" for name, value in rows]


def render_config(report: ConfigReport) -> list[str]:
    """What the config uses, then each requirement marked met or missing with its fix."""
    lines = [f"config {report.source}:"]
    lines += [f"  {key:36} {value}" for key, value in report.uses.items()]
    lines.append("requirements:")
    for req in report.requirements:
        lines.append(f"  {'met    ' if req.met else 'MISSING'}  {req.key} needs {req.needs}: {req.detail}")
        if not req.met and req.fix:
            lines.append(f"           fix: {req.fix}")
    missing = report.missing
    lines.append(
        f"{len(missing)} missing: {', '.join(r.key for r in missing)}" if missing else "every requirement is met here"
    )
    return lines


def check_config(source: str, loaded: LoadedConfig, machine: Machine) -> ConfigReport:
    """``loaded`` (checked against the schema and plugins only) held against ``machine``."""
    return ConfigReport(source, config_uses(loaded), tuple(requirements(loaded, machine)))
