"""``ade sample``: strategically diverse (or IID) training data from a model, graded and filtered (seed 001).

The sampling runs as one ``sampling`` request on the configured executor (``ade engine sample``),
which writes its records to OUT as it goes; run the same command again to resume an interrupted
run. Progress is read from the records while the request runs.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any, cast

import click

from ade_core.cli_support import load_checked
from ade_core.quiet import quiet_libraries
from ade_core.sampling.filters import FILTERS
from ade_core.sampling.rl import ESTIMATORS
from ade_core.sampling.samplers import SAMPLERS, SamplerName, SamplingConfig, SamplingError


def _count_lines(path: Path) -> int:
    try:
        return path.read_bytes().count(b"\n")
    except OSError:
        return 0


@click.command("sample")
@click.argument("config_path", metavar="CONFIG")
@click.option("--sampler", type=click.Choice(SAMPLERS), required=True, help="iid, verbalized or groot.")
@click.option("--budget", type=int, required=True, help="Responses per problem (the seed's n).")
@click.option("--problems", required=True, help="Problem file (JSONL: id, problem, answer) or tiny:<split>.")
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False, path_type=Path))
@click.option("--filter", "filter_name", type=click.Choice(FILTERS), help="Write OUT/<filter>.jsonl for SFT.")
@click.option("--size", type=int, help="Filtered dataset size (sft: default the RFT size).")
@click.option("--match-rft", is_flag=True, help="anti: keep as many responses as rft would.")
@click.option("--limit", type=int, help="Only the first LIMIT problems.")
@click.option("--temperature", type=float, default=1.0, show_default=True, help="Response temperature.")
@click.option("--top-p", type=float, default=1.0, show_default=True)
@click.option("--max-new-tokens", type=int, help="Response length (default: [evaluation.decoding]).")
@click.option("--plan-temperature", type=float, default=1.0, show_default=True)
@click.option("--plan-max-new-tokens", type=int, default=1024, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--model", type=click.Path(file_okay=False, exists=True, path_type=Path), help="A checkpoint to sample.")
@click.option("--server", help="An OpenAI-compatible API root that serves the model, e.g. http://127.0.0.1:8000/v1.")
@click.option("--served-model", help="The model name the server serves (with --server).")
@click.option("--set", "overrides", multiple=True, metavar="SECTION.KEY=VALUE", help="Override a config value.")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
def sample_command(
    config_path: str,
    sampler: str,
    budget: int,
    problems: str,
    out_dir: Path,
    filter_name: str | None,
    size: int | None,
    match_rft: bool,
    limit: int | None,
    temperature: float,
    top_p: float,
    max_new_tokens: int | None,
    plan_temperature: float,
    plan_max_new_tokens: int,
    seed: int,
    model: Path | None,
    server: str | None,
    served_model: str | None,
    overrides: tuple[str, ...],
    as_json: bool,
) -> None:
    """Sample BUDGET responses per problem with SAMPLER under CONFIG's model, prompt and grader; grade them,
    drop responses that mention their hidden approach, and with --filter write the SFT dataset."""
    quiet_libraries()
    from ade_core.engine.data import resolve_path
    from ade_core.sampling.run import SamplingJob

    loaded = load_checked(config_path, overrides, local_paths=server is None and model is None)
    config = loaded.experiment
    if served_model is not None and server is None:
        raise SamplingError("--served-model names a model on a server: give the server's API root with --server")
    if limit is not None and limit < 1:
        raise SamplingError(f"--limit {limit} must be >= 1")
    base_dir = Path(config_path).resolve().parent if Path(config_path).exists() else Path.cwd()
    source = resolve_path(base_dir, problems, "grpo")
    if not source.is_file():
        raise SamplingError(f"--problems {problems!r}: {source} does not exist; give a JSONL file or tiny:<split>")
    sampling = SamplingConfig(
        sampler=cast(SamplerName, sampler),  # click.Choice checked it
        budget=budget,
        temperature=temperature,
        top_p=top_p,
        max_new_tokens=max_new_tokens or config.evaluation.decoding.max_new_tokens,
        plan_temperature=plan_temperature,
        plan_max_new_tokens=plan_max_new_tokens,
        seed=seed,
    )
    job = SamplingJob(
        config=config,
        base_dir=str(base_dir),
        generation=loaded.operational.generation,
        sampling=sampling.to_json(),
        problems=str(source),
        limit=limit,
        model=str(model.resolve()) if model else None,
        server=server,
        served_model=served_model,
        filter=filter_name,
        size=size,
        match_rft=match_rft,
    )
    started = time.monotonic()
    summary = _submit(loaded, job, out_dir.resolve(), quiet=as_json)
    summary["seconds"] = round(time.monotonic() - started, 1)
    if as_json:
        click.echo(json.dumps(summary, indent=2, sort_keys=True))
        return
    plans = summary["plans"]
    click.echo(
        f"{summary['sampler']}: {summary['problems']} problems, {summary['responses']} responses "
        f"({summary['kept']} kept, {summary['leaked']} dropped for naming their approach), "
        f"{summary['correct']} correct, {summary['solved']} problems solved at least once"
    )
    if sampler != "iid":
        click.echo(
            f"plans: {plans['ok']} ok, {plans['shortfall']} short, {plans['malformed']} malformed; "
            f"planning tokens {summary['planning_tokens']} (apart from the response budget)"
        )
    if "filter" in summary:
        kept = summary["filter"]
        click.echo(f"{kept['name']}: {kept['responses']} responses of {kept['problems']} problems -> {kept['path']}")
    click.echo(f"records: {out_dir / 'samples.jsonl'} ({summary['seconds']} s)")


def _submit(loaded: Any, job: Any, out: Path, *, quiet: bool) -> dict[str, Any]:
    """Run ``job`` as a ``sampling`` request on the configured executor; progress from the records as they land."""
    from ade_core.engine.model import EngineError
    from ade_core.executors.base import run
    from ade_core.executors.factory import make_executor
    from ade_core.executors.requests import sampling_request
    from ade_core.sampling.store import RECORDS_FILE

    executor = make_executor(loaded.operational.executor, loaded.experiment.resources)
    request = sampling_request(job, out)
    total = job.limit

    async def watch() -> None:
        shown = -1
        while True:
            done = _count_lines(out / RECORDS_FILE)
            if done != shown and not quiet:
                of = f"/{total}" if total else ""
                print(f"[sample] {done}{of} problems sampled", file=sys.stderr, flush=True)
                shown = done
            await asyncio.sleep(1.0)

    async def main() -> Any:
        watcher = asyncio.ensure_future(watch())
        try:
            return await run(executor, request)
        finally:
            watcher.cancel()
            await asyncio.gather(watcher, return_exceptions=True)
            await executor.close()

    outcome = asyncio.run(main())
    if outcome.status != "succeeded" or outcome.result is None:
        lines = [line for line in outcome.detail.splitlines() if line.strip()]
        said = lines[-1] if lines else outcome.detail
        raise EngineError(f"sampling failed ({outcome.failure}): {said} (logs: {out})")
    return dict(outcome.result)


def _model_digest(model: Path) -> str:
    """sha256 over a model directory's file names and contents (what a frontier set is cached by)."""
    import hashlib

    digest = hashlib.sha256()
    for path in sorted(p for p in model.rglob("*") if p.is_file()):
        digest.update(path.relative_to(model).as_posix().encode() + b"\0")
        with path.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


def _decoding(config: Any, budget: int, seed: int) -> SamplingConfig:
    decoding = config.evaluation.decoding
    return SamplingConfig(
        sampler="iid",
        budget=budget,
        temperature=decoding.temperature,
        top_p=decoding.top_p,
        max_new_tokens=decoding.max_new_tokens,
        seed=seed,
    )


@click.command("eval")
@click.argument("target", metavar="CHECKPOINT_OR_CONFIG")
@click.option("--config", "config_path", help="With a CHECKPOINT: the config whose prompt, grader and decoding apply.")
@click.option(
    "--passk", "passk", help="The k of pass@k, comma-separated [default: the config's [evaluation] pass_k, else 1,8]."
)
@click.option(
    "--samples",
    type=int,
    help="Samples per problem, n >= every k [default: the config's [evaluation.in_loop] k_offline].",
)
@click.option("--problems", help="Problem file or tiny:<split> (default: the config's in-loop benchmark).")
@click.option("--limit", type=int, help="Only the first LIMIT problems.")
@click.option(
    "--frontier", is_flag=True, help="Only problems Base solves at most --frontier-max of --frontier-samples."
)
@click.option("--frontier-samples", type=int, default=64, show_default=True)
@click.option("--frontier-max", type=int, default=2, show_default=True)
@click.option("--rsa", is_flag=True, help="Also Recursive Self-Aggregation's pass@1 (test-time scaling).")
@click.option("--rsa-population", type=int, default=16, show_default=True)
@click.option("--rsa-subset", type=int, default=4, show_default=True, help="Members each child aggregates.")
@click.option("--rsa-iterations", type=int, default=10, show_default=True)
@click.option("--rsa-runs", type=int, default=3, show_default=True, help="Independent runs pass@1 is averaged over.")
@click.option(
    "--rsa-prompt",
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    help="A file with an aggregation prompt of your own ({problem}, {candidates}, {count}).",
)
@click.option(
    "--rl",
    "rl_estimator",
    type=click.Choice(ESTIMATORS),
    help="Also RL from the checkpoint (MaxRL: binary rewards; or GRPO), scored at its best validation checkpoint.",
)
@click.option("--rl-config", help="With --rl: a GRPO config whose [training.grpo] and [checkpoint].every_steps apply.")
@click.option("--rl-problems", help="With --rl: the RL training problems (JSONL or tiny:<split>).")
@click.option("--rl-validation", help="With --rl: the validation problems that pick the RL checkpoint.")
@click.option("--rl-validation-limit", type=int, help="Only the first N validation problems.")
@click.option("--rl-select-k", type=int, default=8, show_default=True, help="Validation pass@k that picks it.")
@click.option(
    "--no-reference",
    is_flag=True,
    help="Leave out the generic reference's column (its Trial is trained once per config and cached).",
)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False, path_type=Path))
@click.option("--set", "overrides", multiple=True, metavar="SECTION.KEY=VALUE", help="Override a config value.")
@click.option("--json", "as_json", is_flag=True, help="Print the scores as JSON.")
def eval_command(
    target: str,
    config_path: str | None,
    passk: str | None,
    samples: int | None,
    problems: str | None,
    limit: int | None,
    frontier: bool,
    frontier_samples: int,
    frontier_max: int,
    rsa: bool,
    rsa_population: int,
    rsa_subset: int,
    rsa_iterations: int,
    rsa_runs: int,
    rsa_prompt: Path | None,
    rl_estimator: str | None,
    rl_config: str | None,
    rl_problems: str | None,
    rl_validation: str | None,
    rl_validation_limit: int | None,
    rl_select_k: int,
    no_reference: bool,
    seed: int,
    out_dir: Path,
    overrides: tuple[str, ...],
    as_json: bool,
) -> None:
    """pass@k of a CHECKPOINT (with --config) or of CONFIG's base model, from --samples samples per problem at
    the config's evaluation decoding, next to the untrained Base and the task's generic reference (trained
    once per config and cached; --no-reference leaves it out); --frontier keeps the problems Base rarely
    solves (the seed: at most 2 of 64). With --rl, RL trains from the checkpoint (or Base) and the RL
    checkpoint with the best validation pass@k is scored too. Records go to OUT, and a second run resumes them."""
    quiet_libraries()
    from ade_core.engine.data import resolve_model, resolve_path
    from ade_core.harness.standalone import cache_root
    from ade_core.sampling.evaluate import check_ks, frontier_ids, parse_ks, pass_at_ks
    from ade_core.sampling.rsa import RSAConfig
    from ade_core.sampling.run import SamplingJob
    from ade_core.sampling.store import SampleStore

    checkpoint = Path(target) if Path(target).is_dir() else None
    if checkpoint is not None and config_path is None:
        raise SamplingError(f"{target} is a checkpoint: name the config its prompt, grader and decoding come from "
                            "with --config CONFIG")  # fmt: skip
    source_config = config_path if checkpoint is not None else target
    assert source_config is not None
    rsa_config = None
    if rsa:
        template = rsa_prompt.read_text(encoding="utf-8") if rsa_prompt else None
        rsa_config = RSAConfig(population=rsa_population, subset=rsa_subset, iterations=rsa_iterations,
                               runs=rsa_runs, seed=seed, prompt=template)  # fmt: skip
    if limit is not None and limit < 1:
        raise SamplingError(f"--limit {limit} must be >= 1")
    loaded = load_checked(source_config, overrides, local_paths=True)
    config = loaded.experiment
    if passk is not None:
        ks = parse_ks(passk)
    else:
        ks = tuple(sorted(config.evaluation.pass_k)) or (1, 8)
    if samples is None:
        samples = config.evaluation.in_loop.k_offline
    check_ks(ks, samples)
    base_dir = Path(source_config).resolve().parent if Path(source_config).exists() else Path.cwd()
    problem_file = resolve_path(base_dir, problems or config.evaluation.in_loop.source, "grpo")
    if not problem_file.is_file():
        raise SamplingError(
            f"--problems {problems!r}: {problem_file} does not exist; give a JSONL file or tiny:<split>"
        )

    def job(model: Path | None, sampling: SamplingConfig, source: Path, cap: int | None) -> SamplingJob:
        return SamplingJob(
            config=config,
            base_dir=str(base_dir),
            generation=loaded.operational.generation,
            sampling=sampling.to_json(),
            problems=str(source),
            limit=cap,
            model=str(model.resolve()) if model else None,
        )

    out = out_dir.resolve()
    out.mkdir(parents=True, exist_ok=True)
    said = (lambda _: None) if as_json else (lambda line: click.echo(line, err=True))
    source, shown = problem_file, cast(dict[str, Any], {})
    if frontier:
        base_model = resolve_model(base_dir, config.model.target)
        key = _digest_of(_model_digest(base_model), config.digest(), str(problem_file), limit, frontier_samples, seed)
        cached = cache_root() / "frontier" / key
        said(f"[eval] frontier: Base, {frontier_samples} samples per problem (cached in {cached})")
        _submit(
            loaded, job(None, _decoding(config, frontier_samples, seed), problem_file, limit), cached, quiet=as_json
        )
        ids = set(frontier_ids(SampleStore(cached).records(), frontier_max))
        source = out / "frontier.jsonl"
        _write_rows(problem_file, ids, source, limit)
        shown["frontier"] = {"problems": len(ids), "of": limit or _count_lines(problem_file), "cache": str(cached)}
        if not ids:
            raise SamplingError(f"Base solves every problem more than {frontier_max} of {frontier_samples} times: the "
                                "frontier set is empty; raise --frontier-max or use harder problems")  # fmt: skip
    cap = None if frontier else limit
    models: list[tuple[str, Path | None]] = ([("checkpoint", checkpoint)] if checkpoint else []) + [("Base", None)]
    if rl_estimator is not None:
        rl = _rl_settings(rl_estimator, rl_config, rl_problems, rl_validation, rl_validation_limit, rl_select_k,
                          samples, base_dir)  # fmt: skip
        name = f"{models[0][0]}+RL"
        said(f"[eval] {name}: {rl_estimator} from the {models[0][0]}, checkpoint by validation pass@{rl_select_k}")
        rl_job = job(checkpoint, _decoding(config, samples, seed), source, cap).model_copy(update={"rl": rl.to_json()})
        found = _submit(loaded, rl_job, out / "rl", quiet=as_json)["rl"]
        models.insert(1, (name, Path(found["selected"]["checkpoint"])))
        shown["rl"] = {key: found[key] for key in ("estimator", "select", "initial", "curve", "selected")}
    if not no_reference:
        models.insert(-1, ("reference", _reference_checkpoint(loaded, said)))
    scores: dict[str, dict[str, float]] = {}
    for name, model in models:
        where = out / name.lower()
        said(f"[eval] {name}: {samples} samples per problem")
        _submit(loaded, job(model, _decoding(config, samples, seed), source, cap), where, quiet=as_json)
        scores[name] = pass_at_ks(SampleStore(where).records(), ks)
        if rsa_config is not None:
            decoding = config.evaluation.decoding
            settings = {**rsa_config.to_json(), "temperature": decoding.temperature, "top_p": decoding.top_p,
                        "max_new_tokens": decoding.max_new_tokens}  # fmt: skip
            rsa_job = job(model, _decoding(config, samples, seed), source, cap).model_copy(update={"rsa": settings})
            said(f"[eval] {name}: RSA, {rsa_config.runs} runs of {rsa_config.iterations} rounds")
            found = _submit(loaded, rsa_job, out / f"{name.lower()}-rsa", quiet=as_json)
            scores[name]["rsa pass@1"] = found["rsa"]["pass@1"]
    result: dict[str, Any] = {"scores": scores, "samples": samples, "problems": str(problem_file), **shown}
    (out / "scores.json").write_text(json.dumps(result, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    if as_json:
        click.echo(json.dumps(result, indent=2, sort_keys=True))
        return
    names = list(scores)
    width = max(12, *(len(name) + 2 for name in names))
    click.echo(f"{'metric':12}" + "".join(f"{name:>{width}}" for name in names))
    for metric in scores["Base"]:
        click.echo(f"{metric:12}" + "".join(f"{scores[name][metric]:{width}.1f}" for name in names))
    if "rl" in result:
        chosen = result["rl"]["selected"]
        click.echo(f"RL ({result['rl']['estimator']}): step {chosen['step']} chosen by validation "
                   f"{result['rl']['select']} = {chosen['validation'][result['rl']['select']]:.1f}")  # fmt: skip


def _reference_checkpoint(loaded: Any, said: Any) -> Path:
    """The selected checkpoint of the task's generic reference Trial under this config (trained once, cached)."""
    from ade_core.engine.package import open_package
    from ade_core.harness.standalone import missing_reason, reference_trial

    said("[eval] reference: the task's generic reference Trial (trained once per config, then cached)")
    summary = reference_trial(loaded, log=lambda line: said(f"[eval] {line}"))
    checkpoint = open_package(Path(summary["package"])).manifest.selected_checkpoint
    if summary.get("in_loop_scores") is None or checkpoint is None:
        raise SamplingError(f"the generic reference's Trial has no evaluated checkpoint ({missing_reason(summary)}); "
                            "rerun, or pass --no-reference")  # fmt: skip
    return Path(checkpoint)


def _rl_settings(
    estimator: str,
    rl_config: str | None,
    problems: str | None,
    validation: str | None,
    validation_limit: int | None,
    select_k: int,
    samples: int,
    base_dir: Path,
) -> Any:
    """The RLConfig of ``ade eval --rl``: the recipe from --rl-config, the problem files checked."""
    from ade_core.engine.data import resolve_path
    from ade_core.sampling.rl import RLConfig

    missing = [flag for flag, value in (("--rl-config", rl_config), ("--rl-problems", problems),
                                        ("--rl-validation", validation)) if value is None]  # fmt: skip
    if missing:
        raise SamplingError(f"--rl needs {', '.join(missing)}: a GRPO config for the recipe, the RL training "
                            "problems and the validation problems that pick the checkpoint")  # fmt: skip
    assert rl_config is not None and problems is not None and validation is not None
    if validation_limit is not None and validation_limit < 1:
        raise SamplingError(f"--rl-validation-limit {validation_limit} must be >= 1")
    recipe_config = load_checked(rl_config, (), local_paths=False).experiment
    recipe = recipe_config.training.grpo
    if recipe is None:
        paradigm = recipe_config.training.paradigm
        raise SamplingError(f"--rl-config {rl_config}: [training] paradigm is {paradigm!r}; give a config with a "
                            "[training.grpo] recipe, e.g. examples/tiny-reward-design-ci.toml")  # fmt: skip
    paths = {}
    for flag, given in (("--rl-problems", problems), ("--rl-validation", validation)):
        path = resolve_path(base_dir, given, "grpo")
        if not path.is_file():
            raise SamplingError(f"{flag} {given!r}: {path} does not exist; give a JSONL file or tiny:<split>")
        paths[flag] = str(path)
    return RLConfig(
        estimator=estimator,  # type: ignore[arg-type]  # click.Choice checked it
        recipe=recipe.model_dump(mode="json"),
        every_steps=recipe_config.checkpoint.every_steps or recipe.total_steps,
        problems=paths["--rl-problems"],
        validation=paths["--rl-validation"],
        validation_limit=validation_limit,
        select_k=select_k,
        samples=samples,
    )


def _digest_of(*parts: Any) -> str:
    import hashlib

    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:24]


def _write_rows(source: Path, ids: set[str], path: Path, limit: int | None) -> None:
    """The rows of ``source`` whose id is in ``ids``, in file order, written atomically to ``path``."""
    from ade_core.engine.data import read_jsonl, row_id

    rows = [row for row in read_jsonl(source)[:limit] if row_id(row) in ids]
    staging = path.with_suffix(".tmp")
    staging.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    staging.replace(path)
