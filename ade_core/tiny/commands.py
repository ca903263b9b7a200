"""``ade tiny build|info``: the embedded tiny math world from the command line."""

from __future__ import annotations

import json
from pathlib import Path

import click

from ade_core.errors import UnknownSchemaError, did_you_mean
from ade_core.quiet import quiet_libraries


# --- ade tiny ------------------------------------------------------------------
@click.group("tiny")
def tiny_group() -> None:
    """The embedded tiny math world: data, defect ground truth, base model."""


@tiny_group.command("build")
@click.option("--preset", default="tiny", show_default=True, help="World preset: tiny or tiny-full.")
@click.option(
    "--target",
    "target_name",
    default=None,
    help="Build this target model instead of the world's base (tiny-sft: the SFT target, no reasoning protocol; "
    "tiny-boxed: the base continued to box every answer). Without --steps/--conversations/--out it is "
    "installed where model.target finds it.",
)
@click.option("--steps", type=int, default=None, help="Pretraining steps (default: the preset's recipe).")
@click.option("--conversations", type=int, default=None, help="Pretraining corpus size (default: the preset's).")
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Directory to build into (default: a fresh directory under the ADE cache).",
)
@click.option("--save-every", type=int, default=0, help="Also save the model every N steps (pretraining-checkpoints/).")
@click.option("--device", default="cpu", show_default=True, help="Where pretraining runs (cpu, cuda).")
@click.option("--score-problems", type=int, default=None, help="Score the built model on N in-loop problems (all).")
def tiny_build(
    preset: str,
    target_name: str | None,
    steps: int | None,
    conversations: int | None,
    out_dir: Path | None,
    save_every: int,
    score_problems: int | None,
    device: str,
) -> None:
    """Build the world from scratch: data files, defect labels, and the pretrained base model."""
    quiet_libraries()
    from ade_core.tiny.world import (
        PRESETS,
        TARGETS,
        build_model,
        build_target_model,
        cache_root,
        install_target,
        write_world,
    )

    log_every = 0 if steps and steps < 100 else 100
    if target_name is not None:
        if target_name not in TARGETS:
            raise UnknownSchemaError(f"unknown tiny target {target_name!r}{did_you_mean(target_name, TARGETS)}")
        target_spec = TARGETS[target_name]
        install = out_dir is None and steps is None and conversations is None
        target = out_dir or cache_root() / f"build-{target_name}-{target_spec.model_digest().split(':')[1][:12]}"
        summary = build_target_model(
            target_spec,
            target,
            steps=steps,
            conversations=conversations,
            log_every=log_every,
            save_every=save_every,
            score_problems=score_problems,
            device=device,
        )
        if install:  # the full recipe: move it where model.target = "<name>" finds it
            target = install_target(target_name, target / "model").parent
    else:
        if preset not in PRESETS:
            raise UnknownSchemaError(f"unknown tiny preset {preset!r}{did_you_mean(preset, PRESETS)}")
        spec = PRESETS[preset]
        target = out_dir or cache_root() / f"build-{preset}-{spec.digest().split(':')[1][:12]}"
        info = write_world(spec, target)
        click.echo(f"data: {json.dumps(info['sizes'])}; candidates {info['candidates']}, defects {info['defects']}")
        summary = build_model(
            spec,
            target,
            steps=steps,
            conversations=conversations,
            log_every=log_every,
            save_every=save_every,
            score_problems=score_problems,
            device=device,
        )
    click.echo(
        f"model: {summary['parameters']} parameters, {summary['recipe']['steps']} steps, "
        f"final loss {summary['final_loss']:.3f}, {summary['seconds']:.0f} s -> {target / 'model'}"
    )
    scores = summary["scores"]
    click.echo(
        f"in-loop accuracy on {scores['problems']} problems: greedy {scores['greedy']['all']}%, "
        f"per sample {scores['sampled']['all']}% ({scores['samples']} samples at T={scores['temperature']})"
    )


@tiny_group.command("info")
@click.option("--preset", default="tiny", show_default=True)
def tiny_info(preset: str) -> None:
    """Where the world lives, its sizes and defect mix, and its base model."""
    from ade_core.tiny.world import world_dir

    directory = world_dir(preset)
    info = json.loads((directory / "world.json").read_text())
    pretraining = directory / "model" / "pretraining.json"
    info["directory"] = str(directory)
    info["model"] = json.loads(pretraining.read_text()) if pretraining.exists() else "not built (ade tiny build)"
    click.echo(json.dumps(info, indent=2))
