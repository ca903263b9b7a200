"""Typed spec objects that hooks return, so results can be validated and attributed."""

from __future__ import annotations

import keyword
import string
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ade_core.errors import did_you_mean

Role = Literal[
    "coordinator",
    "builder",
    "analyzer",
    "review_worker",
    "plan_summarizer",
    "run_summarizer",
]
ROLES: tuple[str, ...] = get_args(Role)

TASK_NAME_PATTERN = r"^[a-z][a-z0-9_]*$"
ALL_TASKS = "*"


class Spec(BaseModel):
    """Base of hook return values: strict, immutable, described."""

    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True)


class SharedReference(Spec):
    """A generic reference Trial that several tasks train identically, so it is trained once and shared (paper
    Sec 4: the Curriculum reference is the Reward Design reference: the verified outcome reward on the pool in
    random order). Tasks that declare the same ``name`` share the cached reference Trial of a config whose
    task-independent fields match (base model, pool, recipe, evaluation, seeds)."""

    name: str = Field(pattern=TASK_NAME_PATTERN, description="The shared reference's name, e.g. 'rft_outcome'.")
    data_order: Literal["engine", "reference"] = Field(
        description=(
            "Who orders the training data in this task's reference: 'engine' (the Engine's seeded shuffle; the "
            "reference is shared only under [training.grpo] shuffle_data = true) or 'reference' (the reference "
            "strategy's own random order, consumed as given)."
        )
    )


class TaskSpec(Spec):
    """A research task a plugin registers (paper Sec 3.1: one intervention space)."""

    name: str = Field(pattern=TASK_NAME_PATTERN, description="Unique task name, e.g. 'data_selection'.")
    title: str = Field(min_length=1, description="Human-readable title.")
    description: str = Field(min_length=1, description="What a strategy for this task changes.")
    paradigm: Literal["sft", "rft"] = Field(description="Training paradigm the Engine runs for this task.")
    metric_order: tuple[str, ...] = Field(
        min_length=1,
        description="In-loop metric names in ranking order: the first decides, later ones break ties.",
    )
    shared_reference: SharedReference | None = Field(
        default=None,
        description="The generic reference Trial this task shares with other tasks, if any (None: its own).",
    )

    @field_validator("metric_order")
    @classmethod
    def _unique_metrics(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if len(set(value)) != len(value):
            raise ValueError(f"metric_order repeats a metric: {list(value)}")
        return value


JsonType = Literal["array", "object", "string", "integer", "number", "boolean", "service"]


class Parameter(Spec):
    """One parameter of a strategy entry point."""

    name: str = Field(description="Python parameter name, in declaration order.")
    json_type: JsonType = Field(description="JSON type of the value, or 'service' for an awaitable service.")
    description: str = Field(min_length=1, description="What the strategy receives here.")

    @field_validator("name")
    @classmethod
    def _identifier(cls, value: str) -> str:
        if not value.isidentifier() or keyword.iskeyword(value):
            raise ValueError(f"parameter name {value!r} is not a Python identifier")
        return value


class EntryPoint(Spec):
    """A function a strategy module defines and the harness calls."""

    name: str = Field(description="Function name in the strategy module.")
    is_async: bool = Field(description="Whether the function must be declared with 'async def'.")
    parameters: tuple[Parameter, ...] = Field(description="Parameters in exact declaration order.")
    returns: str = Field(min_length=1, description="What the function must return.")
    required: bool = Field(default=True, description="False for optional entry points (e.g. group credit).")

    @field_validator("name")
    @classmethod
    def _identifier(cls, value: str) -> str:
        if not value.isidentifier() or keyword.iskeyword(value):
            raise ValueError(f"entry point name {value!r} is not a Python identifier")
        return value

    @model_validator(mode="after")
    def _unique_parameters(self) -> EntryPoint:
        names = [p.name for p in self.parameters]
        if len(set(names)) != len(names):
            raise ValueError(f"entry point {self.name!r} repeats a parameter: {names}")
        return self


class ModuleService(Spec):
    """A service set as a global of the strategy module instead of passed as an argument.

    The strategy awaits ``name(*parameters)`` (e.g. Reward Design's ``llm_judge(question_prompt,
    response_content)``, which the paper injects so the entry points keep their exact signatures);
    the service's handler gets one object keyed by the parameter names.
    """

    name: str = Field(description="Global name in the strategy module.")
    parameters: tuple[str, ...] = Field(min_length=1, description="Parameters in call order.")
    description: str = Field(min_length=1, description="What the service answers.")

    @field_validator("name", "parameters")
    @classmethod
    def _identifiers(cls, value: Any) -> Any:
        for name in (value,) if isinstance(value, str) else value:
            if not name.isidentifier() or keyword.iskeyword(name):
                raise ValueError(f"{name!r} is not a Python identifier")
        return value


class StrategyInterface(Spec):
    """𝓩: what a strategy may do for a task (paper Appendix C.4)."""

    task: str = Field(description="Task this interface belongs to.")
    entry_points: tuple[EntryPoint, ...] = Field(min_length=1, description="Functions the strategy defines.")
    allowed_imports: tuple[str, ...] = Field(description="Top-level modules a strategy may import.")
    constraints: tuple[str, ...] = Field(default=(), description="Output constraints, in prose.")
    module_services: tuple[ModuleService, ...] = Field(
        default=(), description="Services set as module globals (awaited by name), not passed as arguments."
    )

    @model_validator(mode="after")
    def _well_formed(self) -> StrategyInterface:
        names = [e.name for e in self.entry_points]
        if len(set(names)) != len(names):
            raise ValueError(f"interface repeats an entry point: {names}")
        if not any(e.required for e in self.entry_points):
            raise ValueError("interface declares no required entry point")
        for module in self.allowed_imports:
            if not all(part.isidentifier() for part in module.split(".")):
                raise ValueError(f"allowed import {module!r} is not a module name")
        return self

    @property
    def services(self) -> tuple[str, ...]:
        """Names of every service: the service parameters across all entry points, then the module's."""
        seen: dict[str, None] = {}
        for entry in self.entry_points:
            for param in entry.parameters:
                if param.json_type == "service":
                    seen[param.name] = None
        for service in self.module_services:
            seen[service.name] = None
        return tuple(seen)

    def signature(self, service: str) -> tuple[str, ...]:
        """A module service's parameters; () for a service passed as an argument."""
        for declared in self.module_services:
            if declared.name == service:
                return declared.parameters
        return ()

    def entry_point(self, name: str) -> EntryPoint:
        for entry in self.entry_points:
            if entry.name == name:
                return entry
        raise KeyError(name)


class StrategyCall(Spec):
    """One invocation of an entry point with JSON arguments (services are attached separately)."""

    entry_point: str = Field(description="Entry point to call.")
    arguments: dict[str, Any] = Field(description="JSON arguments by parameter name; services excluded.")


class TaskInputs(Spec):
    """Inputs a strategy runs on: the frozen task inputs or the Builder's development inputs."""

    calls: tuple[StrategyCall, ...] = Field(min_length=1, description="Invocations, in order.")
    description: str = Field(default="", description="Where these inputs came from.")
    statistics: dict[str, Any] = Field(
        default_factory=dict,
        description="Statistics of the frozen inputs shown in the Builder's view (e.g. the candidate pool's counts "
        "per domain and length bin, token totals), so a strategy can be written from the view alone.",
    )
    sample: tuple[dict[str, Any], ...] = Field(
        default=(), description="A few real input rows for the Builder's view: every field, long texts truncated."
    )


# How the refusal of a malformed service request begins (``invalid_service_request: <field>: <fix>``): the
# strategy's error, which fails its run even when it catches the ServiceError, never a service that is down
# ("unavailable"). A handler raises ``InvalidServiceRequest(field, fix)``; an answer with this status is
# read the same way.
INVALID_REQUEST = "invalid_service_request"


class ServiceSpec(Spec):
    """A service a strategy may await (e.g. ``judge``), answered by the harness over RPC."""

    name: str = Field(description="Parameter name under which the strategy receives the service.")
    description: str = Field(min_length=1, description="What the service answers.")
    essential: bool = Field(description="If only 'unavailable' answers came back, realization is unverified.")
    max_calls: int = Field(ge=1, description="Quota of calls per strategy run.")
    max_items_per_call: int = Field(ge=1, description="Largest request list one call may carry.")
    handler: Callable[[Any], Any] = Field(
        description="Answers one call: a list of requests in, one answer per request out (a module service: "
        "one object keyed by its parameters in, one answer out)."
    )
    signature: tuple[str, ...] = Field(
        default=(), description="A module service's parameters (the interface's module_services); () otherwise."
    )


class OutputValidation(Spec):
    """The task's verdict on one strategy output, with the canonical form when valid."""

    ok: bool = Field(description="True when the output satisfies the interface's constraints.")
    errors: tuple[str, ...] = Field(default=(), description="What is wrong, each naming the offending value.")
    canonical: Any = Field(default=None, description="Canonical form of a valid output (e.g. sorted ids).")
    statistics: dict[str, Any] = Field(default_factory=dict, description="Realized-output statistics.")

    @model_validator(mode="after")
    def _consistent(self) -> OutputValidation:
        if self.ok and self.errors:
            raise ValueError("a valid output cannot carry errors")
        if not self.ok and not self.errors:
            raise ValueError("an invalid output must name at least one error")
        return self


class RealizationVerdict(Spec):
    """Realization conclusion of a Trial (paper Appendix C.6)."""

    status: Literal["verified", "deviated", "unverified"] = Field(description="The conclusion.")
    reasons: tuple[str, ...] = Field(default=(), description="Why, citing the realized statistics.")


class ProbeResult(Spec):
    """Result of one admission probe."""

    status: Literal["passed", "failed", "skipped"] = Field(description="Outcome of the probe.")
    reason: str = Field(default="", description="Why it failed or was skipped.")


class AdmissionProbe(Spec):
    """A check run on a strategy before admission; any plugin may add probes to any task."""

    name: str = Field(description="Probe name, unique per task.")
    description: str = Field(min_length=1, description="What the probe establishes.")
    tasks: tuple[str, ...] = Field(default=(ALL_TASKS,), description="Tasks it applies to, or '*'.")
    check: Callable[[dict[str, Any]], ProbeResult] = Field(
        description="Takes the probe context (task, source, interface, outputs) and returns a ProbeResult."
    )
    needs_reference: bool = Field(
        default=False,
        description="Reads the generic reference Trial's records (context 'reference_rollouts'); `ade admit` "
        "trains the reference first when it is not cached.",
    )


class RecordSpec(Spec):
    """One record family of an Experiment Package (paper Table 8)."""

    name: str = Field(description="Record family name.")
    description: str = Field(min_length=1, description="What the records hold.")
    readable_by: tuple[Role, ...] = Field(description="Roles whose view may include these records.")


class PackageSchema(Spec):
    """Which records a task's Experiment Package holds and who may read them."""

    task: str = Field(description="Task this schema belongs to.")
    records: tuple[RecordSpec, ...] = Field(min_length=1, description="Record families.")


class ReviewPool(Spec):
    """A pool of package records the Analyzer may request record-level review over."""

    name: str = Field(description="Pool name.")
    tasks: tuple[str, ...] = Field(description="Tasks it applies to, or '*'.")
    record: str = Field(description="Record family the pool draws from.")
    selections: tuple[Literal["all", "records", "groups"], ...] = Field(
        min_length=1, description="Selection modes a review request may use."
    )
    min_coverage: float = Field(ge=0.0, le=1.0, description="Fraction of the pool a review must cover.")
    group_key: str | None = Field(default=None, description="Record field defining groups, for 'groups'.")

    @model_validator(mode="after")
    def _groups_need_key(self) -> ReviewPool:
        if "groups" in self.selections and not self.group_key:
            raise ValueError(f"review pool {self.name!r} allows 'groups' but has no group_key")
        return self


class MetricSpec(Spec):
    """A metric over a correctness matrix c[i][j] (problem i, sample j)."""

    name: str = Field(description="Metric name used in metric_order, e.g. 'pass_at_k'.")
    description: str = Field(min_length=1, description="What the metric measures.")
    tasks: tuple[str, ...] = Field(default=(ALL_TASKS,), description="Tasks it applies to, or '*'.")
    higher_is_better: bool = Field(default=True, description="Direction of improvement.")
    compute: Callable[[list[list[bool]]], float] = Field(description="Correctness matrix -> percentage.")


class GraderSpec(Spec):
    """A grader that judges one response against a reference answer."""

    name: str = Field(description="Grader name referenced from [evaluation] config.")
    description: str = Field(min_length=1, description="What counts as correct.")
    grade: Callable[[str, Any], bool] = Field(
        description="(response, reference) -> correct; the reference is the benchmark row's answer "
        "(a string for math, the test list for code)."
    )
    timeout_s: float = Field(default=3.0, gt=0, description="Per-sample limit; a timeout scores 0.")
    score: Callable[[str, Any], float] | None = Field(
        default=None,
        description="Optional continuous score of the response (higher is better), for [evaluation] coverage_k "
        "at coverage_thresholds; ``grade`` still decides correctness.",
    )


class RewardExploit(Spec):
    """A response that games a reward without answering: one entry of Reward Design's hacking probe.

    The probe scores the exploit next to a correct response of the same question; a reward that
    pays the exploit as much as the correct answer can be hacked.
    """

    name: str = Field(pattern=TASK_NAME_PATTERN, description="Exploit name, unique across plugins: 'hedged_answer'.")
    description: str = Field(min_length=1, description="What the exploit does to game a reward.")
    generate: Callable[[str, str, str, int], str] = Field(
        description="(question, gold answer, correct response, max_response_length_tokens) -> the exploit response. "
        "Deterministic, and never correct under the Engine's grader."
    )


class ReferenceStrategy(Spec):
    """The generic reference strategy P000 (paper Appendix D.3)."""

    source: str = Field(min_length=1, description="Python source implementing the interface.")
    account: str = Field(min_length=1, description="What the reference does and why it is generic.")


class Preset(Spec):
    """A named experiment configuration shipped by a plugin."""

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9_.-]*$", description="Preset name for 'ade config show'.")
    task: str = Field(description="Task the preset configures.")
    description: str = Field(min_length=1, description="What the preset is for.")
    path: Path = Field(description="TOML file of the preset.")

    @classmethod
    def shipped(cls, directory: Path, task: str) -> list[Preset]:
        """Every ``*.toml`` in a plugin's presets directory, named by its file, described by its first comment."""
        presets = []
        for path in sorted(Path(directory).glob("*.toml")):
            comment = []
            for line in path.read_text(encoding="utf-8").splitlines():
                if not line.startswith("#"):
                    break
                comment.append(line.lstrip("#").strip())
            text = " ".join(comment)
            description = (text.split(". ")[0].rstrip(".") + ".") if text else f"A {task} configuration."
            presets.append(cls(name=path.stem, task=task, description=description, path=path))
        return presets


class StrategyFamily(Spec):
    """A named family of strategies: a source template and its parameter space."""

    name: str = Field(description="Family name, unique per task.")
    task: str = Field(description="Task the family implements.")
    description: str = Field(min_length=1, description="Mechanism the family tests.")
    targets: tuple[str, ...] = Field(min_length=1, description="Defects or behaviours it targets.")
    template: str = Field(min_length=1, description="Python source with $name fields, one per parameter.")
    parameters: dict[str, tuple[Any, ...]] = Field(
        default_factory=dict, description="Allowed values for each $name field."
    )

    @model_validator(mode="after")
    def _fields_match(self) -> StrategyFamily:
        fields = {
            match.group("named") or match.group("braced")
            for match in string.Template.pattern.finditer(self.template)
            if match.group("named") or match.group("braced")
        }
        if fields != set(self.parameters):
            raise ValueError(
                f"family {self.name!r}: template fields {sorted(fields)} "
                f"differ from parameters {sorted(self.parameters)}"
            )
        for key, values in self.parameters.items():
            if not values:
                raise ValueError(f"family {self.name!r}: parameter {key!r} has no values")
        return self

    def render(self, **values: Any) -> str:
        """Source of one member of the family."""
        missing = set(self.parameters) - set(values)
        if missing:
            raise KeyError(f"missing parameters {sorted(missing)}")
        return string.Template(self.template).substitute({k: repr(v) for k, v in values.items()})

    def member(self, **choices: Any) -> str:
        """Source of one member: ``choices`` override the first allowed value of each parameter."""
        unknown = sorted(set(choices) - set(self.parameters))
        if unknown:
            hint = did_you_mean(unknown[0], list(self.parameters))
            raise KeyError(f"family {self.name!r} has no parameter {unknown[0]!r}{hint}")
        for key, value in choices.items():
            if value not in self.parameters[key]:
                raise ValueError(
                    f"family {self.name!r}: {key}={value!r} is not an allowed value; "
                    f"choose one of {list(self.parameters[key])}"
                )
        return self.render(**({key: allowed[0] for key, allowed in self.parameters.items()} | choices))


def find_family(catalog: Sequence[StrategyFamily], name: str) -> StrategyFamily:
    """The family of ``catalog`` called ``name``; an unknown name suggests the closest one."""
    for family in catalog:
        if family.name == name:
            return family
    raise KeyError(f"no strategy family {name!r}{did_you_mean(name, [f.name for f in catalog])}")


class PromptAddition(Spec):
    """Task-specific text appended to one role's instructions."""

    role: Role = Field(description="Role whose prompt gains the text.")
    text: str = Field(min_length=1, description="Instruction text (Markdown).")


INTERVENTION_KIND_PATTERN = r"^[a-z][a-z0-9_]*$"


@dataclass(frozen=True)
class TrainingTrace:
    """What the Engine's trainer did with an intervention: what a kind's ``records`` are built from.

    ``payload`` is the bound intervention's payload; ``pool`` the training rows as read, by id (SFT
    candidate rows by candidate id; RFT problem rows, with every field such as subject and level, by
    problem id); ``consumed`` the problem ids of each RFT optimizer step in order; ``rollouts`` the
    Engine's ``training_rollouts`` records (RFT) and ``examples`` its ``selected_examples`` (SFT).
    A plain dataclass, not a validated spec: a paper-sized run holds hundreds of thousands of rollouts.
    """

    payload: Mapping[str, Any]
    pool: Mapping[str, Mapping[str, Any]]
    consumed: Sequence[Sequence[str]] = ()
    rollouts: Sequence[Mapping[str, Any]] = ()
    examples: Sequence[Mapping[str, Any]] = ()


class InterventionKind(Spec):
    """A family of interventions the Engine can apply, and what it does with one (paper Sec 3.1, Table 8).

    The Engine asks the kind, never the kind's name: an SFT kind names the candidate ids trained on;
    an RFT kind may fix the per-step prompts and may bring its own reward module. ``records`` turns
    what training did into the task's own package records.
    """

    name: str = Field(pattern=INTERVENTION_KIND_PATTERN, description="Unique kind name, e.g. 'schedule'.")
    paradigm: Literal["sft", "rft"] = Field(description="Training paradigm the kind applies to.")
    description: str = Field(min_length=1, description="What an intervention of this kind changes.")
    tasks: tuple[str, ...] = Field(default=(ALL_TASKS,), description="Tasks that may bind to it, or '*'.")
    training_examples: Callable[[dict[str, Any]], Sequence[str]] | None = Field(
        default=None,
        description="SFT (required): payload -> the candidate ids to train on, in order.",
    )
    prompt_schedule: Callable[[dict[str, Any]], Sequence[Sequence[str]]] | None = Field(
        default=None,
        description="RFT: payload -> the problem ids of each step, consumed in order (data shuffling must be "
        "off); None trains on the whole pool in the recipe's order.",
    )
    reward_source: Callable[[dict[str, Any]], str] | None = Field(
        default=None,
        description="RFT: payload -> source of the reward module the Engine imports in the sandbox; None keeps "
        "the grader's outcome reward.",
    )
    records: Callable[[TrainingTrace], Mapping[str, Sequence[Mapping[str, Any]]]] | None = Field(
        default=None,
        description="TrainingTrace -> the task's package records by family name; each family must be declared "
        "in the task's package schema.",
    )

    @model_validator(mode="after")
    def _fits_paradigm(self) -> InterventionKind:
        if self.paradigm == "sft":
            if self.training_examples is None:
                raise ValueError(f"SFT intervention kind {self.name!r} must say which examples to train on")
            extra = [f for f in ("prompt_schedule", "reward_source") if getattr(self, f) is not None]
            if extra:
                raise ValueError(f"SFT intervention kind {self.name!r} sets RFT fields {extra}")
        elif self.training_examples is not None:
            raise ValueError(f"RFT intervention kind {self.name!r} sets training_examples (an SFT field)")
        return self

    def applies_to(self, task: str, paradigm: str) -> bool:
        """Whether ``task`` (of ``paradigm``) may bind to this kind."""
        return paradigm == self.paradigm and (ALL_TASKS in self.tasks or task in self.tasks)
