"""``ade admit`` and ``ade trial``: a hand-written strategy under the frozen protocol, outside any agent loop.

Every score is shown next to the untrained Base model and the task's generic reference under the
same 𝓑 (both computed once per comparison key and cached, see ``harness/standalone.py``).
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import click

from ade_core.cli_support import claims as parse_claims
from ade_core.cli_support import load_checked, read_strategy, ticking
from ade_core.exit_codes import FAILED
from ade_core.quiet import quiet_libraries

_set_option = click.option(
    "--set", "overrides", multiple=True, metavar="SECTION.KEY=VALUE", help="Override a config value (repeatable)."
)
_claim_option = click.option(
    "--claim",
    "claims",
    multiple=True,
    help="A declared account the realization is checked against, e.g. --claim 'over_cap == 0'.",
)
_strategy_argument = click.argument("strategy", type=click.Path(dir_okay=False, exists=True, path_type=Path))
_config_argument = click.argument("config_path", metavar="CONFIG")


def _stderr(line: str) -> None:
    click.echo(line, err=True)


def _traceback(text: str | None, strategy: Path, indent: str = "    ") -> None:
    """The strategy's own frames, named by the user's file (the sandbox calls it strategy.py)."""
    if not text:
        return
    for line in text.replace('"strategy.py"', f'"{strategy}"').splitlines():
        click.echo(f"{indent}{line}")


def _print_admission(admission: Any, strategy: Path) -> None:
    verdict = "admitted" if admission.admitted else "INADMISSIBLE"
    click.echo(f"{verdict}: {admission.task} strategy {admission.strategy_digest[:19]} ({admission.seconds:.1f} s)")
    for check in admission.checks:
        click.echo(f"  {check.status:7} {check.name}" + (f": {check.reason}" if check.reason else ""))
        _traceback(check.traceback, strategy)


def _print_statistics(statistics: Mapping[str, Any]) -> None:
    for key, value in statistics.items():
        shown = f"{value:.2f}" if isinstance(value, float) else value
        click.echo(f"  {key:24} {shown}")


def _score(value: float | None) -> str:
    return "missing" if value is None else f"{value:.1f}"


def _delta(a: float | None, b: float | None) -> str:
    return f"{a - b:+.1f}" if a is not None and b is not None else ""


def _comparison_table(metrics: list[str], columns: list[tuple[str, Mapping[str, Any] | None]]) -> None:
    """One row per metric: each column's score, and the strategy's difference to Base and to the reference."""
    scores = {name: (summary or {}).get("in_loop_scores") or {} for name, summary in columns}
    names = [name for name, _ in columns]
    header = f"{'metric':16}" + "".join(f"{name:>11}" for name in names)
    compare = "strategy" in scores
    if compare:
        header += f"{'vs Base':>9}{'vs ref':>9}"
    click.echo(header)
    for metric in metrics:
        row = f"{metric:16}" + "".join(f"{_score(scores[name].get(metric)):>11}" for name in names)
        if compare:
            mine = scores["strategy"].get(metric)
            row += f"{_delta(mine, scores['Base'].get(metric)):>9}{_delta(mine, scores['reference'].get(metric)):>9}"
        click.echo(row)


def _print_shared(task: str, reference: Mapping[str, Any] | None) -> None:
    """Say so when the reference shown was trained by another task that shares it (paper Sec 4)."""
    trained_by = (reference or {}).get("reference_task")
    if trained_by and trained_by != task:
        click.echo(
            f"reference: the shared Trial {trained_by} trained under a matching config (same base, pool, recipe "
            f"and evaluation); {task} reuses it rather than training its own"
        )


@click.command("admit")
@_config_argument
@_strategy_argument
@_set_option
@_claim_option
@click.option("--json", "as_json", is_flag=True, help="Print the typed results as JSON.")
def admit_command(
    config_path: str, strategy: Path, overrides: tuple[str, ...], claims: tuple[str, ...], as_json: bool
) -> None:
    """Run the admission pipeline on STRATEGY, then realize it on CONFIG's frozen inputs (a file or a preset).

    Trains nothing of yours. A task whose probes replay the generic reference's rollouts (Reward Design)
    trains the reference first when it is not cached for this config, and says so; otherwise Base and the
    reference are shown only when `ade trial` has cached them. Exits 1 when the strategy is inadmissible
    or fails on the frozen inputs (every check is still listed)."""
    quiet_libraries()
    from ade_core.harness.admission import DUPLICATE_OF_REFERENCE, RealizationError
    from ade_core.harness.standalone import admission_only, admit_and_realize, cached_comparison

    loaded = load_checked(config_path, overrides, local_paths=True)
    source = read_strategy(strategy)
    declared = parse_claims(claims)
    limits = loaded.experiment.sandbox.limits
    echo = (lambda _: None) if as_json else _stderr
    _reference_for_replay(loaded, lambda line: echo(f"[admit] {line}"))
    with ticking("[admit] strategy running", limits.admission_wall_s, echo):
        admission = admission_only(loaded, source)
    failure, realization = None, None
    if admission.admitted:
        try:
            with ticking("[admit] strategy running on the frozen inputs", limits.realization_wall_s, echo):
                _, realization = admit_and_realize(loaded, source, declared=declared, admission=admission)
        except RealizationError as exc:
            failure = exc
    comparison = cached_comparison(loaded)
    if as_json:
        payload = {
            "admission": admission.model_dump(),
            "realization": realization and realization.model_dump(),
            "realization_error": failure and {"error": str(failure), "traceback": failure.traceback},
            "limits": limits.model_dump(),
            "cached": comparison,
        }
        click.echo(json.dumps(payload, indent=2, default=str))
    else:
        click.echo(f"strategy limits: {limits.describe()} ([sandbox.limits] in the config)")
        _print_admission(admission, strategy)
        if failure is not None:
            click.echo(f"realization on the frozen inputs FAILED: {failure}")
            _traceback(failure.traceback, strategy, indent="  ")
        if realization is not None:
            click.echo(
                f"realization on the frozen inputs ({realization.inputs}): {realization.verdict}, "
                f"{realization.seconds:.1f} s, isolation {realization.isolation}"
            )
            for reason in realization.reasons:
                click.echo(f"  reason: {reason}")
            if realization.duplicate_of_reference:
                click.echo(f"  note: {DUPLICATE_OF_REFERENCE}")
            counts = {k: v for k, v in realization.input_statistics.items() if k.endswith("_rows")}
            if counts:
                click.echo("  inputs                 " + ", ".join(f"{k} {v}" for k, v in counts.items()))
            calls = sum(len(c.service_calls) for c in realization.calls)
            click.echo(f"  service calls          {calls}")
            _print_statistics(realization.statistics)
        _print_cached(loaded, comparison)
    if not admission.admitted or failure is not None:
        sys.exit(FAILED)


def _reference_for_replay(loaded: Any, log: Callable[[str], None]) -> None:
    """Train (once, cached) the generic reference Trial when an admission probe replays its rollouts."""
    from ade_core.harness.standalone import cached_reference_rollouts, comparison_dir, needs_reference, reference_trial
    from ade_core.plugins import load_plugins

    task = load_plugins().task(loaded.experiment.task)
    if not needs_reference(task) or cached_reference_rollouts(loaded, task) is not None:
        return
    log(
        f"replay admission needs the generic reference's rollouts under this config: training the reference "
        f"first ({_estimate(loaded.experiment.task)}), cached in {comparison_dir(loaded)}"
    )
    reference_trial(loaded, log=log)


def _print_cached(loaded: Any, comparison: Mapping[str, Any]) -> None:
    present = [(name, comparison[key]) for name, key in (("Base", "base"), ("reference", "reference"))]
    if not any(summary for _, summary in present):
        click.echo("Base and reference: not computed for this config yet (the first `ade trial` computes, caches them)")
        return
    from ade_core.plugins import load_plugins

    metrics = list(load_plugins().task(loaded.experiment.task).spec.metric_order)
    click.echo("cached for this config (in-loop):")
    _comparison_table(metrics, present)
    _print_shared(loaded.experiment.task, comparison["reference"])


def _estimate(task: str) -> str:
    """A rough duration of a reference Trial: the last one cached for this task on this machine, if any."""
    from ade_core.harness.standalone import cache_root

    found = []
    for path in (cache_root() / "comparisons").glob("*/reference/summary.json"):
        try:
            summary = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if summary.get("admission", {}).get("task") == task and summary.get("seconds"):
            found.append((path.stat().st_mtime, float(summary["seconds"])))
    if not found:
        return "about as long as your own Trial"
    return f"about {max(found)[1]:.0f} s, as the last one for this task took here"


@click.command("trial")
@_config_argument
@_strategy_argument
@_set_option
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Trial directory (default: <run_dir>/trials/<strategy>-<digest>).",
)
@_claim_option
@click.option("--json", "as_json", is_flag=True, help="Print the summaries as JSON (progress stays on stderr).")
def trial_command(
    config_path: str,
    strategy: Path,
    overrides: tuple[str, ...],
    out_dir: Path | None,
    claims: tuple[str, ...],
    as_json: bool,
) -> None:
    """One complete Trial of STRATEGY (admission, realization, Engine, package) under CONFIG (a file or a
    preset), outside any agent loop, next to the untrained Base model and the generic reference.

    Base and the reference are computed once per config (and ADE, plugin and Engine version), before
    your Trial, and cached; Ctrl-C during them loses nothing of yours. Exits 1 when the strategy is
    inadmissible, fails on the frozen inputs, or its Trial does not complete."""
    quiet_libraries()
    from ade_core.harness.admission import DUPLICATE_OF_REFERENCE, RealizationError, strategy_digest
    from ade_core.harness.standalone import (
        admission_only,
        base_evaluation,
        cached_comparison,
        comparison_dir,
        missing_reason,
        reference_trial,
        run_trial,
    )

    started = time.monotonic()
    loaded = load_checked(config_path, overrides, local_paths=True)
    source = read_strategy(strategy)
    declared = parse_claims(claims)
    limits = loaded.experiment.sandbox.limits
    log: Callable[[str], None] = lambda line: _stderr(f"[trial] {line}")  # noqa: E731
    target = out_dir or Path(loaded.operational.run_dir) / "trials" / (
        f"{strategy.stem}-{strategy_digest(source).split(':')[1][:8]}"
    )
    mark = time.monotonic()
    _reference_for_replay(loaded, log)
    replay_reference = time.monotonic() - mark
    log(f"admission: static check, sandbox run on development inputs, validation, probes ({limits.describe()})")
    with ticking("[trial] strategy running", limits.admission_wall_s, _stderr):
        admission = admission_only(loaded, source)
    if not admission.admitted:
        if as_json:
            trial = {"status": "inadmissible", "admission": admission.model_dump(mode="json")}
            click.echo(json.dumps({"trial": trial}, indent=2, default=str))
        else:
            _print_admission(admission, strategy)
        sys.exit(FAILED)
    cached = cached_comparison(loaded)
    if cached["base"] is None or cached["reference"] is None:
        todo = " and ".join(
            what
            for what, key in (("train the generic reference", "reference"), ("evaluate the untrained Base", "base"))
            if cached[key] is None
        )
        estimate = f" (the reference: {_estimate(loaded.experiment.task)})" if cached["reference"] is None else ""
        log(
            f"first Trial under this config: it will also {todo} once, before your Trial{estimate}, "
            f"and cache {'them' if ' and ' in todo else 'it'} in {comparison_dir(loaded)}"
        )
    timings = {}
    mark = time.monotonic()
    reference = reference_trial(loaded, log=log)
    timings["reference"] = replay_reference + time.monotonic() - mark
    mark = time.monotonic()
    base = base_evaluation(loaded, log=log)
    timings["Base"] = time.monotonic() - mark
    mark = time.monotonic()
    try:
        mine = run_trial(loaded, source, target, declared=declared, admission=admission, log=log)
    except RealizationError as exc:
        if as_json:
            failed = {"status": "realization_failed", "error": str(exc), "traceback": exc.traceback}
            click.echo(json.dumps({"trial": failed, "admission": admission.model_dump(mode="json")}, indent=2))
        else:
            _print_admission(admission, strategy)
            click.echo(f"realization on the frozen inputs FAILED: {exc}")
            _traceback(exc.traceback, strategy, indent="  ")
        sys.exit(FAILED)
    timings["strategy"] = time.monotonic() - mark
    elapsed = time.monotonic() - started
    payload = {"trial": mine, "base": base, "reference": reference, "elapsed_s": elapsed, "timings_s": timings}
    (target / "summary.json").write_text(json.dumps(payload, indent=2, default=str), encoding="utf-8")
    if as_json:
        click.echo(json.dumps(payload, indent=2, default=str))
    else:
        click.echo(f"Trial of {strategy} -> {mine['package']}")
        if mine["realization"]["duplicate_of_reference"]:
            click.echo(f"note: {DUPLICATE_OF_REFERENCE}")
        click.echo(f"realization: {mine['realization']['verdict']}; selected checkpoint step {mine['selected_step']}")
        for reason in mine["realization"]["reasons"]:
            click.echo(f"  reason: {reason}")
        for name, summary in (("strategy", mine), ("reference", reference)):
            if summary["in_loop_scores"] is None:
                click.echo(f"the {name}'s in-loop evaluation is missing (not zero): {missing_reason(summary)}")
        if base["in_loop_scores"] is None:
            click.echo(f"the Base evaluation is missing (not zero): {base.get('missing_reason')}")
        _comparison_table(mine["metric_order"], [("strategy", mine), ("Base", base), ("reference", reference)])
        _print_shared(loaded.experiment.task, reference)
        spent = ", ".join(f"{name} {seconds:.0f} s" for name, seconds in timings.items())
        click.echo(f"summary: {target / 'summary.json'}; reference package {reference['package']}")
        click.echo(f"elapsed {elapsed:.0f} s ({spent})")
    if mine["status"] != "completed":
        sys.exit(FAILED)
