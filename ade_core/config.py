"""TOML -> (ExperimentConfig, OperationalSettings), with ``extends`` layering and ``--set`` overrides.

A config file holds 𝓑 at top level and the undigested operational settings under
``[operational]``; ``[agents]`` and ``[review]`` may also be written at top level (they are
operational all the same, and win over ``[operational.agents]`` / ``[operational.review]``), so
``--set agents.base_url=...`` works. ``extends = "base.toml"`` (relative to the file) merges tables key by
key, the extending file winning; lists and scalars are replaced whole.
"""

from __future__ import annotations

import importlib.util
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ValidationError

from ade_core.errors import ConfigError, did_you_mean
from ade_core.schemas.common import Digest, canonical_json
from ade_core.schemas.config import BenchmarkConfig, ExperimentConfig, GenerationSettings, OperationalSettings

if TYPE_CHECKING:
    from ade_core.plugins import PluginRegistry

OPERATIONAL_KEY = "operational"
EXTENDS_KEY = "extends"
OPERATIONAL_SHORTCUTS = ("agents", "review")  # top-level tables that belong to [operational]


@dataclass(frozen=True)
class LoadedConfig:
    """A resolved configuration and where it came from."""

    experiment: ExperimentConfig
    operational: OperationalSettings
    sources: tuple[Path, ...]
    overrides: tuple[str, ...]

    @property
    def digest(self) -> Digest:
        return self.experiment.digest()

    @property
    def base_dir(self) -> str:
        """The directory relative paths in the config resolve against: the loaded file's own."""
        return str(self.sources[-1].parent)

    def resolved(self) -> dict[str, Any]:
        """The resolved configuration as plain data, operational section last."""
        data = self.experiment.model_dump(mode="json")
        data[OPERATIONAL_KEY] = self.operational.model_dump(mode="json")
        return data


def _read_toml(path: Path, referenced_from: Path | None) -> dict[str, Any]:
    where = f" (extended from {referenced_from})" if referenced_from else ""
    if not path.is_file():
        raise ConfigError(f"config file not found: {path}{where}; check the path")
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}; fix the syntax at that position") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not UTF-8 text; save the file as UTF-8") from None


def deep_merge(base: Mapping[str, Any], top: Mapping[str, Any]) -> dict[str, Any]:
    """Merge tables recursively; ``top`` wins on conflicts; non-tables are replaced."""
    merged = dict(base)
    for key, value in top.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def _load_layers(path: Path, chain: tuple[Path, ...] = ()) -> tuple[dict[str, Any], tuple[Path, ...]]:
    path = path.resolve()
    if path in chain:
        cycle = " -> ".join(str(p) for p in (*chain, path))
        raise ConfigError(f"circular extends: {cycle}; remove one of these extends")
    data = _read_toml(path, chain[-1] if chain else None)
    parent = data.pop(EXTENDS_KEY, None)
    if parent is None:
        return data, (*chain, path)
    if not isinstance(parent, str):
        raise ConfigError(f"{path}: extends must be a file path string (got {parent!r})")
    base, sources = _load_layers(path.parent / parent, (*chain, path))
    return deep_merge(base, data), sources


def parse_override(text: str) -> tuple[list[str], Any]:
    """Parse ``section.key=value``; the value is read as TOML, else kept as a string."""
    key, sep, raw = text.partition("=")
    key = key.strip()
    if not sep or not key or any(not part for part in key.split(".")):
        raise ConfigError(f"--set {text!r}: expected section.key=value, e.g. --set budget.coordinators=3")
    try:
        value = tomllib.loads(f"v = {raw.strip()}")["v"]
    except tomllib.TOMLDecodeError:
        value = raw.strip()
    return key.split("."), value


def _submodel(model: type[BaseModel], name: str) -> type[BaseModel] | None:
    annotation = model.model_fields[name].annotation
    candidates = [annotation, *getattr(annotation, "__args__", ())]
    return next((c for c in candidates if isinstance(c, type) and issubclass(c, BaseModel)), None)


def _keyed(model: type[BaseModel], name: str) -> bool:
    """Whether field ``name`` is a table of free keys (``dict[str, ...]``), e.g. agents.roles.<role>."""
    import typing

    annotation = model.model_fields[name].annotation
    options = [annotation, *typing.get_args(annotation)]
    return any(typing.get_origin(option) is dict or option is dict for option in options)


def _leaf_keys(model: type[BaseModel], prefix: str = "") -> list[str]:
    keys = []
    for name in model.model_fields:
        inner = _submodel(model, name)
        keys += _leaf_keys(inner, f"{prefix}{name}.") if inner else [f"{prefix}{name}"]
    return keys


def check_override_key(text: str, path: list[str]) -> None:
    """An override names a key of the schema (free-form tables such as pool.groups take any key below);
    else a ConfigError naming the override, not the TOML file, with the keys it may have meant."""
    root: type[BaseModel] = ExperimentConfig
    parts = list(path)
    if parts[0] == OPERATIONAL_KEY or parts[0] in OPERATIONAL_SHORTCUTS:
        root, parts = OperationalSettings, parts[1:] if parts[0] == OPERATIONAL_KEY else parts
    model: type[BaseModel] | None = root
    free_key = False
    for depth, part in enumerate(parts):
        if model is None:
            return  # below a free-form value
        if free_key:  # a key of a dict-valued table; the value's fields come next
            free_key = False
            continue
        if part not in model.model_fields:
            known = _leaf_keys(ExperimentConfig) + [f"{OPERATIONAL_KEY}.{k}" for k in _leaf_keys(OperationalSettings)]
            ending = [k for k in known if k.split(".")[-1] == part]
            wanted = ".".join(path)
            hint = f"; did you mean {' or '.join(map(repr, ending[:3]))}?" if ending else did_you_mean(wanted, known)
            where = ".".join(path[: len(path) - len(parts) + depth]) or "the top level"
            raise ConfigError(f"--set {text!r}: {wanted!r} is not a config key ({part!r} is not in {where}){hint}")
        free_key = _keyed(model, part)
        model = _submodel(model, part)


def apply_overrides(data: dict[str, Any], overrides: Iterable[str]) -> dict[str, Any]:
    result = dict(data)
    for text in overrides:
        path, value = parse_override(text)
        check_override_key(text, path)
        patch: dict[str, Any] = {path[-1]: value}
        for part in reversed(path[:-1]):
            patch = {part: patch}
        result = deep_merge(result, patch)
    return result


def _model_fields(model: type[BaseModel], path: tuple[Any, ...]) -> list[str]:
    """Known keys of the table at ``path`` in ``model`` (for 'did you mean')."""
    current: Any = model
    for part in path:
        fields = getattr(current, "model_fields", None)
        if fields is None or part not in fields:
            return []
        annotation = fields[part].annotation
        candidates = [annotation, *getattr(annotation, "__args__", ())]
        current = next((c for c in candidates if isinstance(c, type) and issubclass(c, BaseModel)), None)
        if current is None:
            return []
    return list(getattr(current, "model_fields", {}))


def _format_errors(exc: ValidationError, model: type[BaseModel], prefix: tuple[str, ...], origin: str) -> str:
    lines = []
    for error in exc.errors():
        loc = tuple(error["loc"])
        parts = [str(p) for p in (*prefix, *loc)]
        table, key = parts[:-1], parts[-1] if parts else "<root>"
        where = f"[{'.'.join(table)}].{key}" if table else key
        if error["type"] == "extra_forbidden":
            hint = did_you_mean(str(loc[-1]), _model_fields(model, loc[:-1]))
            lines.append(f"{where}: unknown key{hint}; remove it or fix the spelling")
        elif error["type"] == "missing":
            lines.append(f"{where}: required key is missing; add it")
        else:
            value = error.get("input")
            shown = f" (got {value!r})" if not isinstance(value, dict) else ""
            lines.append(f"{where}: {error['msg']}{shown}")
    return f"{origin}: invalid configuration:\n  " + "\n  ".join(lines)


def _validate(model: type[BaseModel], data: Any, prefix: tuple[str, ...], origin: str) -> Any:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_format_errors(exc, model, prefix, origin)) from None


def load_config(path: str | Path, overrides: Iterable[str] = ()) -> LoadedConfig:
    """Load, layer, override and validate a config file."""
    overrides = tuple(overrides)
    data, sources = _load_layers(Path(path))
    data = apply_overrides(data, overrides)
    origin = str(Path(path))
    operational_data = data.pop(OPERATIONAL_KEY, {})
    if not isinstance(operational_data, Mapping):
        raise ConfigError(f"{origin}: [{OPERATIONAL_KEY}] must be a table (got {operational_data!r})")
    for name in OPERATIONAL_SHORTCUTS:
        if name in data:
            section = data.pop(name)
            if not isinstance(section, Mapping):
                raise ConfigError(f"{origin}: [{name}] must be a table (got {section!r})")
            operational_data = deep_merge(operational_data, {name: section})
    experiment = _validate(ExperimentConfig, data, (), origin)
    operational = _validate(OperationalSettings, operational_data, (OPERATIONAL_KEY,), origin)
    return LoadedConfig(experiment, operational, tuple(reversed(sources)), overrides)


def operational_changes(old: OperationalSettings, new: OperationalSettings) -> list[tuple[str, Any, Any]]:
    """Dotted keys whose operational value differs, for the resume log: (key, old, new)."""

    def flat(value: Any, prefix: str = "") -> dict[str, Any]:
        if isinstance(value, dict):
            out: dict[str, Any] = {}
            for key, inner in value.items():
                out.update(flat(inner, f"{prefix}{key}."))
            return out
        return {prefix.rstrip("."): value}

    before, after = flat(old.model_dump(mode="json")), flat(new.model_dump(mode="json"))
    return [
        (key, before.get(key), after.get(key))
        for key in sorted(set(before) | set(after))
        if canonical_json(before.get(key)) != canonical_json(after.get(key))
    ]


def check_against_plugins(loaded: LoadedConfig, registry: PluginRegistry) -> None:
    """Cross-checks that need the installed plugins: the task, its paradigm, the graders."""
    experiment = loaded.experiment
    task = registry.task(experiment.task)
    wanted = {"sft": "sft", "rft": "grpo"}[task.spec.paradigm]
    if experiment.training.paradigm != wanted:
        raise ConfigError(
            f"[training].paradigm: task {task.name!r} trains with {wanted!r} "
            f"(got {experiment.training.paradigm!r}); set paradigm = {wanted!r} with a [training.{wanted}] table"
        )
    graders = registry.graders()
    benchmarks = [experiment.evaluation.in_loop, *experiment.evaluation.held_out]
    for bench in benchmarks:
        if bench.grader not in graders:
            raise ConfigError(
                f"[evaluation] benchmark {bench.name!r}: unknown grader {bench.grader!r}"
                f"{did_you_mean(bench.grader, graders)}; installed graders: {', '.join(sorted(graders))}"
            )
        if experiment.evaluation.coverage_k and graders[bench.grader].score is None:
            scored = sorted(name for name, grader in graders.items() if grader.score is not None)
            raise ConfigError(
                f"[evaluation] coverage_k needs continuous scores, but benchmark {bench.name!r}'s grader "
                f"{bench.grader!r} only says correct or not; use a grader with a score "
                f"({', '.join(scored) or 'none is installed'}) or drop coverage_k"
            )


def check_generation(experiment: ExperimentConfig, generation: GenerationSettings) -> None:
    """The generation 𝓑 asks for can run on this machine, or ConfigError names the key and the fix:
    vLLM is installed where evaluation or GRPO rollouts use it, and an 'openai' backend has a server."""
    needs_vllm = []
    if experiment.engine.generation.backend == "vllm":
        needs_vllm.append(("[engine.generation].backend = 'vllm'", "set it to 'hf'"))
    grpo = experiment.training.grpo
    if experiment.training.paradigm == "grpo" and grpo is not None and grpo.vllm_mode != "off":
        needs_vllm.append((f"[training.grpo].vllm_mode = {grpo.vllm_mode!r}", "set it to 'off'"))
    if needs_vllm and not vllm_installed():
        keys = " and ".join(key for key, _ in needs_vllm)
        fixes = " and ".join(fix for _, fix in needs_vllm)
        raise ConfigError(
            f"{keys} needs vLLM, which is not installed here; install the gpu extra "
            f"(pip install 'ade-core[gpu]') on a GPU host, or {fixes}"
        )
    if experiment.engine.generation.backend == "openai" and generation.base_url is None:
        raise ConfigError(
            "[engine.generation].backend = 'openai' needs the server's API root: set "
            "[operational.generation].base_url, e.g. 'http://127.0.0.1:8000/v1' (or use backend 'hf')"
        )


def vllm_installed() -> bool:
    """vLLM can be imported here (checked without importing it, which would initialize CUDA)."""
    try:
        return importlib.util.find_spec("vllm") is not None
    except ValueError:  # a module object without a spec stands in for it
        return False


_EMBEDDED_PREFIXES = ("tiny", "tiny-full")


def _embedded(source: str) -> bool:
    return source.partition(":")[0] in _EMBEDDED_PREFIXES


def local_paths(loaded: LoadedConfig) -> list[tuple[str, Path, str]]:
    """Every local path 𝓑 names, as (key, resolved path, what must be there); embedded and bundled ones excluded."""
    from ade_core.engine.bundled import BUNDLED
    from ade_core.engine.data import TINY_TARGETS

    experiment, base = loaded.experiment, Path(loaded.base_dir)

    def resolve(value: str) -> Path:
        path = Path(value)
        return path if path.is_absolute() else base / path

    found = []
    target = experiment.model.target
    if target not in BUNDLED and target not in (*_EMBEDDED_PREFIXES, *TINY_TARGETS):
        found.append(("[model].target", resolve(target), "a model directory with config.json"))
    if not _embedded(experiment.data.source):
        found.append(("[data].source", resolve(experiment.data.source), "a JSONL file"))
    benchmarks: list[tuple[str, BenchmarkConfig]] = [("[evaluation.in_loop]", experiment.evaluation.in_loop)]
    benchmarks += [(f"[[evaluation.held_out]] {b.name!r}", b) for b in experiment.evaluation.held_out]
    for key, bench in benchmarks:
        if not _embedded(bench.source):
            found.append((f"{key}.source", resolve(bench.source), "a JSONL file"))
    return found


def local_path_present(path: Path, what: str) -> bool:
    """Whether one path of ``local_paths`` holds what it must: a model folder its config.json, else a file."""
    return (path / "config.json").is_file() if what.startswith("a model") else path.is_file()


def check_local_paths(loaded: LoadedConfig) -> None:
    """Every local path 𝓑 names exists (the model folder holds config.json); EnvironmentProblem names the
    first missing one, where it was looked for, and how to provide it."""
    from ade_core.errors import EnvironmentProblem

    missing = []
    for key, path, what in local_paths(loaded):
        if not local_path_present(path, what):
            missing.append(f"{key} = {path} ({what}) does not exist")
    if missing:
        raise EnvironmentProblem(
            f"{loaded.sources[-1]}: " + "; ".join(missing) + ". Put the files there (the config's comments and "
            "docs/running.md say where each comes from), point the keys at local copies with --set, or check "
            "only the schema with `ade config validate --schema-only`"
        )
