"""``ade engine``: run one bound command (train, evaluate, package), a base-model or held-out evaluation."""

from __future__ import annotations

import json
from pathlib import Path

import click

from ade_core.quiet import quiet_libraries


# --- ade engine ----------------------------------------------------------------
@click.group("engine")
def engine_group() -> None:
    """Execute bound commands: train, evaluate, package."""


@engine_group.command("run")
@click.argument("command_file", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--out",
    "out_dir",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="Attempt directory: heartbeat, work files and the sealed package.",
)
def engine_run(command_file: Path, out_dir: Path) -> None:
    """Run one attempt of COMMAND_FILE (an engine job JSON) and print the package path."""
    quiet_libraries()
    from ade_core.engine.attempt import run_attempt
    from ade_core.engine.job import load_job
    from ade_core.engine.package import open_package

    package = run_attempt(load_job(command_file), out_dir)
    manifest = open_package(package).manifest
    click.echo(
        json.dumps(
            {
                "package": str(package),
                "status": manifest.status,
                "selected_step": manifest.selected_step,
                "in_loop_scores": manifest.in_loop_scores,
            }
        )
    )


@engine_group.command("base-eval")
@click.argument("job_file", type=click.Path(dir_okay=False, path_type=Path))
def engine_base_eval(job_file: Path) -> None:
    """Score the untrained base model on the in-loop benchmark (K_offline) for JOB_FILE; print JSON."""
    quiet_libraries()
    from ade_core.engine.baseline import evaluate_base_model, load_base_job
    from ade_core.engine.threads import apply_threads

    job = load_base_job(job_file)
    apply_threads(job.config)
    click.echo(json.dumps(evaluate_base_model(job)))


@engine_group.command("heldout")
@click.argument("command_file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--checkpoint", required=True, type=click.Path(file_okay=False, path_type=Path))
@click.option(
    "--store",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="Operator-only held-out record store (never a package).",
)
def engine_heldout(command_file: Path, checkpoint: Path, store: Path) -> None:
    """Evaluate a frozen checkpoint on the held-out benchmarks of COMMAND_FILE's configuration."""
    quiet_libraries()
    from ade_core.engine.heldout import evaluate_heldout
    from ade_core.engine.job import load_job

    click.echo(json.dumps(evaluate_heldout(load_job(command_file), checkpoint, store), indent=2))


@engine_group.command("heldout-score")
@click.argument("batch_file", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--out",
    "out_dir",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="Directory for the scores and graded responses (the Harness records them operator-only).",
)
def engine_heldout_score(batch_file: Path, out_dir: Path) -> None:
    """Score each frozen checkpoint of BATCH_FILE (a held-out batch JSON) on its held-out benchmarks, in turn and
    in this one process; write each one's scores with every graded response to OUT/NNNN-heldout-scores.json as it
    finishes and print the list of paths (the executor's held-out request)."""
    quiet_libraries()
    from ade_core.engine.heldout import score_heldout
    from ade_core.engine.job import load_heldout_batch
    from ade_core.engine.threads import apply_threads
    from ade_core.executors.requests import scored_path

    batch = load_heldout_batch(batch_file)
    apply_threads(batch.items[0].job.config)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for index, item in enumerate(batch.items):
        scored = score_heldout(item.job, Path(item.checkpoint))
        path = scored_path(out_dir, index)
        staging = path.with_suffix(".tmp")
        staging.write_text(json.dumps(scored), encoding="utf-8")
        staging.replace(path)  # never half-written
        paths.append(str(path))
    click.echo(json.dumps({"scored": paths}))


@engine_group.command("sample")
@click.argument("job_file", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--out",
    "out_dir",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="Directory of the sampling records (resumed when it holds some) and the filtered dataset.",
)
def engine_sample(job_file: Path, out_dir: Path) -> None:
    """Run the sampling job of JOB_FILE into OUT and print its summary (the executor's sampling request)."""
    quiet_libraries()
    from ade_core.engine.threads import apply_threads
    from ade_core.sampling.run import load_sampling_job, run_sampling

    job = load_sampling_job(job_file)
    apply_threads(job.config)
    click.echo(json.dumps(run_sampling(job, out_dir)))
