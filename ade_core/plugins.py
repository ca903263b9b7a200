"""Plugin manager: discovers task plugins in entry-point group ``ade`` and calls their hooks.

pluggy does not say which plugin raised, so the registry calls hook implementations one at
a time and turns any exception into a ``PluginError`` naming distribution, version and hook.
"""

from __future__ import annotations

import importlib.metadata
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar

import pluggy

from ade_core import hookspecs
from ade_core.engine.records import ENGINE_RECORDS, PARADIGM_RECORDS, PARADIGM_REVIEW_POOLS
from ade_core.errors import (
    DuplicateTaskError,
    MissingHookError,
    PluginError,
    UnknownInterventionKindError,
    UnknownTaskError,
    did_you_mean,
)
from ade_core.realization import check_claims
from ade_core.schemas.artifact import INTERVENTION_KINDS, Intervention
from ade_core.specs import (
    ALL_TASKS,
    ROLES,
    AdmissionProbe,
    GraderSpec,
    InterventionKind,
    MetricSpec,
    OutputValidation,
    PackageSchema,
    Preset,
    PromptAddition,
    RealizationVerdict,
    ReferenceStrategy,
    ReviewPool,
    RewardExploit,
    ServiceSpec,
    StrategyFamily,
    StrategyInterface,
    TaskInputs,
    TaskSpec,
    TrainingTrace,
)

ENTRY_POINT_GROUP = "ade"
LOAD_ENV = "ADE_LOAD_PLUGINS"
CORE_PLUGIN = "ade-core"

hookimpl = pluggy.HookimplMarker(hookspecs.PROJECT)
T = TypeVar("T")

_COLLECTED_TYPES: dict[str, type] = {
    "ade_register_tasks": TaskSpec,
    "ade_intervention_kinds": InterventionKind,
    "ade_presets": Preset,
    "ade_graders": GraderSpec,
    "ade_admission_probes": AdmissionProbe,
    "ade_review_pools": ReviewPool,
    "ade_metrics": MetricSpec,
    "ade_strategy_catalog": StrategyFamily,
    "ade_prompt_additions": PromptAddition,
    "ade_reward_exploits": RewardExploit,
}


COLLECTED_HOOKS = tuple(h for h in _COLLECTED_TYPES if h in hookspecs.COLLECTING_HOOKS)


@dataclass(frozen=True)
class PluginInfo:
    """One plugin as loaded (or not) from an entry point."""

    name: str
    distribution: str
    version: str
    module: str
    status: Literal["loaded", "failed"] = "loaded"
    error: str | None = None
    hooks: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        return f"{self.distribution} {self.version}"


@dataclass(frozen=True)
class Candidate:
    """A plugin object to register, with the distribution it is attributed to."""

    name: str
    plugin: Any
    distribution: str
    version: str


@dataclass
class PluginRegistry:
    """The installed plugins, their tasks, and attributed hook calls."""

    pm: pluggy.PluginManager
    plugins: list[PluginInfo]
    tasks: dict[str, tuple[TaskSpec, PluginInfo]] = field(default_factory=dict)
    conflicts: dict[str, list[PluginInfo]] = field(default_factory=dict)

    # --- attributed calls -------------------------------------------------
    def info(self, plugin_name: str) -> PluginInfo:
        for info in self.plugins:
            if info.name == plugin_name and info.status == "loaded":
                return info
        raise KeyError(plugin_name)

    def invoke(self, impl: pluggy.HookImpl, hook: str, kwargs: dict[str, Any]) -> Any:
        """Call one implementation, attributing any exception to its distribution."""
        info = self.info(impl.plugin_name)
        try:
            return impl.function(*[kwargs[name] for name in impl.argnames])
        except Exception as exc:  # a plugin's bug must not look like ours
            raise PluginError(
                f"plugin {info.label} raised {type(exc).__name__} in hook {hook}: {exc}. "
                f"Fix the plugin's {hook} implementation or uninstall {info.distribution}."
            ) from exc

    def implementations(self, hook: str) -> list[pluggy.HookImpl]:
        return list(getattr(self.pm.hook, hook).get_hookimpls())

    def collect(self, hook: str, **kwargs: Any) -> list[tuple[Any, PluginInfo]]:
        """Call a collecting or registration hook on every plugin; validate each item's type."""
        expected = _COLLECTED_TYPES[hook]
        out: list[tuple[Any, PluginInfo]] = []
        for impl in self.implementations(hook):
            info = self.info(impl.plugin_name)
            result = self.invoke(impl, hook, kwargs)
            if result is None:
                continue
            if not isinstance(result, (list, tuple)):
                raise PluginError(
                    f"plugin {info.label}: hook {hook} returned {type(result).__name__}; "
                    f"return a list of {expected.__name__}"
                )
            for item in result:
                if not isinstance(item, expected):
                    raise PluginError(
                        f"plugin {info.label}: hook {hook} returned an item of type "
                        f"{type(item).__name__}; expected {expected.__name__}"
                    )
                out.append((item, info))
        return out

    # --- tasks ------------------------------------------------------------
    def task(self, name: str) -> TaskHandle:
        """The handle of a registered task; unknown names suggest the closest known one."""
        if name in self.conflicts:
            raise _duplicate_error(name, self.conflicts[name])
        if name not in self.tasks:
            known = sorted(self.tasks)
            raise UnknownTaskError(
                f"unknown task {name!r}{did_you_mean(name, known)}; installed tasks: "
                f"{', '.join(known) or 'none'}. Install its plugin (pip install ade-task-<name>) "
                "or fix the name."
            )
        spec, owner = self.tasks[name]
        return TaskHandle(self, spec, owner)

    def task_names(self) -> list[str]:
        return sorted(self.tasks)

    def presets(self) -> list[tuple[Preset, PluginInfo]]:
        return self.collect("ade_presets")

    def graders(self) -> dict[str, GraderSpec]:
        return {spec.name: spec for spec, _ in self.collect("ade_graders")}

    # --- intervention kinds -------------------------------------------------
    def intervention_kinds(self) -> dict[str, InterventionKind]:
        """Every registered intervention kind by name; one name claimed twice is an error naming both."""
        return {name: kind for name, (kind, _) in self._intervention_kinds().items()}

    def _intervention_kinds(self) -> dict[str, tuple[InterventionKind, PluginInfo]]:
        found: dict[str, tuple[InterventionKind, PluginInfo]] = {}
        for kind, info in self.collect("ade_intervention_kinds"):
            if kind.name in found:
                other = found[kind.name][1]
                raise PluginError(
                    f"intervention kind {kind.name!r} is registered by both {other.label} and {info.label}; "
                    f"uninstall one of them or restrict loading with {LOAD_ENV}"
                )
            found[kind.name] = (kind, info)
        return dict(sorted(found.items()))

    def intervention_kind_owner(self, name: str) -> PluginInfo:
        """The plugin that registers the kind ``name``, to attribute what its callables raise."""
        found = self._intervention_kinds()
        if name not in found:
            raise UnknownInterventionKindError(name, found)
        return found[name][1]

    def intervention_kind(self, name: str) -> InterventionKind:
        """The registered kind ``name``; an unknown one is an error naming the registered kinds."""
        kinds = self.intervention_kinds()
        if name not in kinds:
            raise UnknownInterventionKindError(name, kinds)
        return kinds[name]

    def validate_intervention(self, data: Any) -> Intervention:
        """An ``Intervention`` (or its JSON form) validated against the registered kinds."""
        if isinstance(data, Intervention):
            data = data.model_dump()
        return Intervention.model_validate(data, context={INTERVENTION_KINDS: tuple(self.intervention_kinds())})

    def reward_exploits(self) -> list[RewardExploit]:
        """Every plugin's reward exploits, in plugin order; one name from two plugins is an error naming both."""
        seen: dict[str, PluginInfo] = {}
        exploits = []
        for exploit, info in self.collect("ade_reward_exploits"):
            if exploit.name in seen:
                raise PluginError(
                    f"reward exploit {exploit.name!r} is added by both {seen[exploit.name].label} and {info.label}; "
                    "rename one of them"
                )
            seen[exploit.name] = info
            exploits.append(exploit)
        return exploits


def _applies(tasks: Sequence[str], task: str) -> bool:
    return ALL_TASKS in tasks or task in tasks


@dataclass(frozen=True)
class TaskHandle:
    """Typed facade over the hooks of one task."""

    registry: PluginRegistry
    spec: TaskSpec
    owner: PluginInfo

    @property
    def name(self) -> str:
        return self.spec.name

    def has(self, hook: str) -> bool:
        return self._owner_impl(hook) is not None

    def missing_hooks(self) -> tuple[str, ...]:
        """The required task-specific hooks the owner does not implement (empty for a complete task)."""
        return tuple(hook for hook in hookspecs.REQUIRED_TASK_HOOKS if not self.has(hook))

    def _owner_impl(self, hook: str) -> pluggy.HookImpl | None:
        for impl in self.registry.implementations(hook):
            if impl.plugin_name == self.owner.name:
                return impl
        return None

    def _owned(self, hook: str, expected: type[T], **kwargs: Any) -> T:
        impl = self._owner_impl(hook)
        if impl is None:
            raise MissingHookError(
                f"task {self.name!r} (from {self.owner.label}) does not implement hook {hook}; "
                f"add an @hookimpl def {hook}(...) to {self.owner.module}"
            )
        result = self.registry.invoke(impl, hook, {"task": self.name, **kwargs})
        if not isinstance(result, expected):
            raise PluginError(
                f"plugin {self.owner.label}: hook {hook} returned {type(result).__name__} for its "
                f"own task {self.name!r}; expected {expected.__name__}"
            )
        return result

    def interface(self) -> StrategyInterface:
        interface = self._owned("ade_strategy_interface", StrategyInterface)
        if interface.task != self.name:
            raise PluginError(
                f"plugin {self.owner.label}: ade_strategy_interface for {self.name!r} declares task {interface.task!r}"
            )
        return interface

    def task_inputs(self, config: Any, base_dir: str | Path = ".") -> TaskInputs:
        return self._owned("ade_task_inputs", TaskInputs, config=config, base_dir=str(base_dir))

    def builder_dev_inputs(self, config: Any = None, base_dir: str | Path = ".") -> TaskInputs:
        return self._owned("ade_builder_dev_inputs", TaskInputs, config=config, base_dir=str(base_dir))

    def services(self, config: Any) -> list[ServiceSpec]:
        if not self.has("ade_task_services"):
            return []
        services = self._owned("ade_task_services", list, config=config)
        interface = self.interface()
        declared = set(interface.services)
        for service in services:
            if not isinstance(service, ServiceSpec) or service.name not in declared:
                raise PluginError(
                    f"plugin {self.owner.label}: service {getattr(service, 'name', service)!r} is "
                    f"not a ServiceSpec named after a service parameter ({sorted(declared)})"
                )
            if service.signature != interface.signature(service.name):
                raise PluginError(
                    f"plugin {self.owner.label}: service {service.name!r} has signature {service.signature!r}, "
                    f"but the interface declares {interface.signature(service.name)!r}"
                )
        return services

    def validate_output(self, entry_point: str, output: Any, arguments: dict[str, Any]) -> OutputValidation:
        return self._owned(
            "ade_validate_output", OutputValidation, entry_point=entry_point, output=output, arguments=arguments
        )

    def realization_check(
        self, statistics: dict[str, Any], declared: list[dict[str, Any]], service_statuses: list[str]
    ) -> RealizationVerdict:
        """The owner's check, or the generic one (declared claims + service availability)."""
        if not self.has("ade_realization_check"):
            return check_claims(statistics, declared, service_statuses)
        return self._owned(
            "ade_realization_check",
            RealizationVerdict,
            statistics=statistics,
            declared=declared,
            service_statuses=service_statuses,
        )

    def bind(self, canonical_outputs: list[Any], source: str, config: Any) -> Intervention:
        """The owner's intervention, whose kind must be one this task may bind to."""
        intervention = self._owned(
            "ade_bind", Intervention, canonical_outputs=canonical_outputs, source=source, config=config
        )
        self.intervention_kind(intervention.kind)
        return intervention

    def intervention_kinds(self) -> list[InterventionKind]:
        """The registered kinds this task may bind to: of its paradigm, naming it or every task."""
        kinds = self.registry.intervention_kinds().values()
        return [kind for kind in kinds if kind.applies_to(self.name, self.spec.paradigm)]

    def intervention_kind(self, name: str) -> InterventionKind:
        """The registered kind ``name``, refused when it is not one this task may bind to."""
        kind = self.registry.intervention_kind(name)
        if not kind.applies_to(self.name, self.spec.paradigm):
            raise UnknownInterventionKindError(
                name,
                [k.name for k in self.intervention_kinds()],
                why=f"({kind.paradigm}, for tasks {list(kind.tasks)}) does not apply to the "
                f"{self.spec.paradigm} task {self.name!r}",
                listing=f"kinds {self.name!r} may bind to",
            )
        return kind

    def kind_records(self, kind: InterventionKind, trace: TrainingTrace) -> dict[str, list[dict[str, Any]]]:
        """The records ``kind`` builds from a training trace: task records only, never the Engine's own."""
        if kind.records is None:
            return {}
        owner = self.registry.intervention_kind_owner(kind.name)
        try:
            records = kind.records(trace)
        except Exception as exc:  # a plugin's bug must not look like the Engine's
            raise PluginError(
                f"plugin {owner.label} raised {type(exc).__name__} in the records of intervention kind "
                f"{kind.name!r} (hook ade_intervention_kinds): {exc}. Fix the plugin or uninstall {owner.distribution}."
            ) from exc
        engine = {r.name for r in (*PARADIGM_RECORDS[self.spec.paradigm], *ENGINE_RECORDS)}
        if not isinstance(records, Mapping) or engine & set(records):
            raise PluginError(
                f"intervention kind {kind.name!r} of task {self.name!r} must return task records by name, "
                f"none of the Engine's {sorted(engine)}; got {type(records).__name__} "
                f"{sorted(records) if isinstance(records, Mapping) else ''}"
            )
        return {name: [dict(row) for row in rows] for name, rows in records.items()}

    def package_schema(self) -> PackageSchema:
        """The task's records, then what the Engine writes for the paradigm and for every task."""
        schema = self._owned("ade_package_schema", PackageSchema)
        engine = (*PARADIGM_RECORDS[self.spec.paradigm], *ENGINE_RECORDS)
        clash = sorted({r.name for r in schema.records} & {r.name for r in engine})
        if clash:
            raise PluginError(
                f"plugin {self.owner.label}: package schema of {self.name!r} redeclares Engine records "
                f"{clash}; drop them, the Engine adds them to every package"
            )
        return PackageSchema(task=self.name, records=(*schema.records, *engine))

    def reference_strategy(self) -> ReferenceStrategy:
        return self._owned("ade_reference_strategy", ReferenceStrategy)

    # --- collecting hooks, filtered to this task ---------------------------
    def _collected(self, hook: str, **kwargs: Any) -> list[Any]:
        items = self.registry.collect(hook, task=self.name, **kwargs)
        return [item for item, _ in items if _applies(getattr(item, "tasks", (ALL_TASKS,)), self.name)]

    def admission_probes(self) -> list[AdmissionProbe]:
        return self._collected("ade_admission_probes")

    def review_pools(self) -> list[ReviewPool]:
        """Pools over the Engine's paradigm records, then those any plugin adds."""
        return [*PARADIGM_REVIEW_POOLS[self.spec.paradigm], *self._collected("ade_review_pools")]

    def metrics(self) -> dict[str, MetricSpec]:
        """Metrics applicable to this task, ranking metrics first in metric_order."""
        found = {m.name: m for m in self._collected("ade_metrics")}
        missing = [name for name in self.spec.metric_order if name not in found]
        if missing:
            raise PluginError(
                f"task {self.name!r} ranks by {missing} but no installed plugin defines "
                f"{'it' if len(missing) == 1 else 'them'} (known metrics: {sorted(found)})"
            )
        ordered = {name: found[name] for name in self.spec.metric_order}
        ordered.update({k: v for k, v in sorted(found.items()) if k not in ordered})
        return ordered

    def strategy_catalog(self) -> list[StrategyFamily]:
        return [f for f in self._collected("ade_strategy_catalog") if f.task == self.name]

    def prompt_additions(self, role: str) -> list[PromptAddition]:
        if role not in ROLES:
            raise ValueError(f"unknown role {role!r}{did_you_mean(role, ROLES)}")
        return [p for p in self._collected("ade_prompt_additions", role=role) if p.role == role]


def _duplicate_error(name: str, owners: list[PluginInfo]) -> DuplicateTaskError:
    labels = " and ".join(o.label for o in owners)
    return DuplicateTaskError(
        f"task {name!r} is registered by both {labels}; uninstall one of them or restrict loading with {LOAD_ENV}"
    )


def _installed_candidates(selection: set[str] | None) -> tuple[list[Candidate], list[PluginInfo]]:
    candidates: list[Candidate] = []
    failures: list[PluginInfo] = []
    for ep in sorted(importlib.metadata.entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
        dist = ep.dist.name if ep.dist else "unknown"
        version = ep.dist.version if ep.dist else "unknown"
        if selection is not None and ep.name not in selection and dist not in selection:
            continue
        try:
            plugin = ep.load()
        except Exception as exc:  # report it; the other plugins still load
            failures.append(
                PluginInfo(
                    name=ep.name,
                    distribution=dist,
                    version=version,
                    module=ep.value,
                    status="failed",
                    error=f"import failed: {type(exc).__name__}: {exc}",
                )
            )
            continue
        candidates.append(Candidate(ep.name, plugin, dist, version))
    return candidates, failures


def _register(pm: pluggy.PluginManager, candidate: Candidate) -> PluginInfo:
    module = getattr(candidate.plugin, "__name__", type(candidate.plugin).__name__)
    base: dict[str, Any] = dict(
        name=candidate.name, distribution=candidate.distribution, version=candidate.version, module=module
    )
    try:
        pm.register(candidate.plugin, name=candidate.name)
    except Exception as exc:  # pluggy validation: bad arguments, duplicate names
        return PluginInfo(**base, status="failed", error=f"rejected by the plugin manager: {exc}")
    callers = pm.get_hookcallers(candidate.plugin) or []
    unknown = sorted(c.name for c in callers if c.spec is None)
    if unknown:
        pm.unregister(candidate.plugin)
        known = [n for n in dir(hookspecs) if n.startswith("ade_")]
        hints = "; ".join(f"{u!r}{did_you_mean(u, known)}" for u in unknown)
        return PluginInfo(**base, status="failed", error=f"hookimpls match no hook spec: {hints}")
    return PluginInfo(**base, hooks=tuple(sorted(c.name for c in callers)))


def load_plugins(
    extra: Iterable[Candidate] = (),
    *,
    entry_points: bool = True,
    environ: Mapping[str, str] | None = None,
) -> PluginRegistry:
    """Build a fresh registry: the core plugin, installed entry points, then ``extra``.

    ``ADE_LOAD_PLUGINS`` (comma-separated entry-point or distribution names) restricts which
    installed plugins load; set it to an empty string to load none.
    """
    from ade_core import __version__, core_plugin

    environ = os.environ if environ is None else environ
    selection = None
    if LOAD_ENV in environ:
        selection = {part.strip() for part in environ[LOAD_ENV].split(",") if part.strip()}

    pm = pluggy.PluginManager(hookspecs.PROJECT)
    pm.add_hookspecs(hookspecs)
    candidates = [Candidate(CORE_PLUGIN, core_plugin, "ade-core", __version__)]
    failures: list[PluginInfo] = []
    if entry_points:
        found, failures = _installed_candidates(selection)
        candidates += found
    candidates += list(extra)

    infos = [_register(pm, c) for c in candidates] + failures
    registry = PluginRegistry(pm=pm, plugins=infos)
    _collect_tasks(registry)
    return registry


def _collect_tasks(registry: PluginRegistry) -> None:
    owners: dict[str, list[tuple[TaskSpec, PluginInfo]]] = {}
    for spec, info in registry.collect("ade_register_tasks"):
        owners.setdefault(spec.name, []).append((spec, info))
    for name, claims in owners.items():
        if len({info.distribution for _, info in claims}) > 1 or len(claims) > 1:
            registry.conflicts[name] = [info for _, info in claims]
        else:
            registry.tasks[name] = claims[0]
