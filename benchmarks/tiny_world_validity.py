"""Does strategy quality show in the tiny world's scores? Exits non-zero when a property fails.

Properties (issue: the embedded default), over N seeds:
  1. SFT on a fixed-size selection: defect-free > random > defect-heavy on in-loop Average@K, each by
     >= 5 points and > 2 seed SDs; defect-free > defect-heavy by > 3 SDs (Pass@K and boxed rate beside).
  2. The same ordering on held-out Macro Average@K.
  3. GRPO from the base model for the tiny RFT budget raises in-loop Average@K above the base by > 2 SDs.
  4. A hardest-level-only curriculum and a random schedule end > 2 SDs apart on in-loop Average@K.
  Reward Design (``--only reward``), GRPO on examples/tiny-reward-design.toml with each catalog
  family's first member as the reward module:
  R1. The outcome-only generic reference beats Base by > 2 SDs on in-loop Average@K.
  R2. At least one catalog reward beats the reference by > 2 SDs in-loop, and its held-out Macro
      Average@K is above the reference's.
  R3. The hackable format control falls below the reference by > 2 SDs in-loop.

``--sft-target`` runs the SFT study on the SFT target (``model.target = "tiny-sft"``, a model without
the reasoning protocol), adds its untrained base arm and checks that study's targets instead: the
target <= 25 % in-loop Average@K; random >= base + 15 points; defect-free >= random + 5 points and
> 3 SD; defect-heavy <= random - 5 points; the same order on held-out Macro Average@K.

Trials run in ``--workers`` processes with one torch thread each (on 2 cores, two one-thread
Trials finish sooner than two two-thread Trials in a row). Seconds per Trial are wall time
under that sharing.

``--quick`` runs every arm once at toy sizes (a few examples and steps, 8 in-loop problems, one
4-problem held-out set) in well under a minute and skips the checks: CI runs it to keep the
script working; its figures are not measurements.

A study screened on three seeds is extended to five without rerunning them: ``--seeds 2 --first-seed 3
--json more.json``, then ``--report screened.json more.json`` prints the merged tables and checks.

Run: .venv/bin/python benchmarks/tiny_world_validity.py [--quick] [--seeds 5] [--only sft,rft,reward] [--workers 2]
     [--sft-target] [--first-seed N] [--report FILE...]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import random
import statistics
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
DIGEST = "sha256:" + "0" * 64
SFT_CONFIG = REPO / "examples" / "tiny-data-selection.toml"
RFT_CONFIG = REPO / "examples" / "tiny-curriculum.toml"
REWARD_CONFIG = REPO / "examples" / "tiny-reward-design.toml"

# --quick: toy sizes for both studies (the checks need full sizes and several seeds)
QUICK_EVALUATION = [
    "evaluation.in_loop.limit=8",
    "evaluation.in_loop.k_offline=1",
    "evaluation.decoding.max_new_tokens=16",
    'evaluation.held_out=[{name = "tiny_harder", source = "tiny:held_out_harder", grader = "boxed_exact", k = 1, '
    "limit = 4}]",
]
QUICK_SFT = ["data.select_size=16", "training.sft.epochs=1", *QUICK_EVALUATION]
QUICK_RFT = ["training.grpo.total_steps=2", "training.grpo.prompts_per_step=2", "checkpoint.every_steps=1"]
QUICK_RFT += [
    "training.grpo.rollouts_per_prompt=2",
    "training.grpo.per_device_batch_size=4",
    "training.grpo.max_response_tokens=16",
    *QUICK_EVALUATION,
]


def job_for(config_path: Path, intervention: Any, seed: int, tag: str, extra: list[str]) -> Any:
    from ade_core.config import load_config
    from ade_core.engine.job import EngineJob
    from ade_core.schemas.artifact import BoundCommand, ResourceRequest

    overrides = [f"seeds.training={seed}", f"seeds.evaluation={seed}", "resources.cpu_threads=1", *extra]
    config = load_config(config_path, overrides).experiment
    command = BoundCommand(
        task=config.task,
        strategy_digest=DIGEST,
        intervention=intervention,
        config_digest=config.digest(),
        seeds={"training": seed, "evaluation": seed},
        resources=ResourceRequest(device="cpu"),
    )
    return EngineJob(
        trial_id=f"validity/{tag}",
        attempt_id=f"{tag}-s{seed}",
        command=command,
        config=config,
        base_dir=str(config_path.parent),
    )


def selections(size: int, seed: int) -> dict[str, list[str]]:
    """Defect-free, random and defect-heavy selections of ``size`` candidates (ground truth used here only)."""
    from ade_core.tiny.world import world_dir

    directory = world_dir("tiny")
    labels = {
        row["candidate_id"]: row["defect"]
        for row in map(json.loads, (directory / "ground_truth" / "defects.jsonl").read_text().splitlines())
    }
    rng = random.Random(seed)
    ids = sorted(labels)
    clean = [i for i in ids if labels[i] is None]
    heavy = [i for i in ids if labels[i] is not None]
    return {
        name: sorted(rng.sample(group, size))
        for name, group in (("defect_free", clean), ("random", ids), ("defect_heavy", heavy))
    }


def boxed_rate(package_path: Path) -> float:
    from ade_core.engine.package import open_package

    responses = open_package(package_path).records("eval_responses")
    return 100.0 * sum("\\boxed{" in r["response"] for r in responses) / len(responses)


def sft_trial(name: str, ids: list[str], seed: int, work: str, extra: list[str]) -> dict[str, Any]:
    """One SFT Trial on a selection, then the operator's held-out evaluation of its checkpoint."""
    import torch

    from ade_core.engine.attempt import run_attempt
    from ade_core.engine.heldout import evaluate_heldout
    from ade_core.engine.package import open_package
    from ade_core.schemas.artifact import Intervention

    torch.set_num_threads(1)
    started = time.monotonic()
    job = job_for(
        SFT_CONFIG, Intervention(kind="sft_selection", payload={"selected_ids": ids}, summary=name), seed, name, extra
    )
    package = run_attempt(job, Path(work) / f"{name}-{seed}")
    trial_seconds = time.monotonic() - started
    manifest = open_package(package).manifest
    held = evaluate_heldout(job, Path(manifest.selected_checkpoint), Path(work) / f"heldout-{name}-{seed}")
    return {
        "arm": name,
        "seed": seed,
        "avg": manifest.in_loop_scores["average_at_k"],
        "pass": manifest.in_loop_scores["pass_at_k"],
        "boxed": boxed_rate(package),
        "heldout_avg": held["macro_avg"]["average_at_k"],
        "seconds": trial_seconds,
    }


def base_scores(seed: int, extra: list[str], config_path: Path = RFT_CONFIG) -> dict[str, Any]:
    """The target model's in-loop scores, untrained, under the config's offline K (the RFT config's by default)."""
    import torch

    from ade_core.config import load_config
    from ade_core.engine.data import resolve_model
    from ade_core.engine.evaluation import evaluate
    from ade_core.plugins import load_plugins
    from ade_core.tiny.world import world_dir

    torch.set_num_threads(1)
    registry = load_plugins()
    config = load_config(config_path, extra).experiment
    rows = [json.loads(line) for line in (world_dir("tiny") / "data" / "in_loop.jsonl").read_text().splitlines()]
    rows = rows[: config.evaluation.in_loop.limit]
    result = evaluate(
        resolve_model(config_path.parent, config.model.target),
        rows,
        config.evaluation.in_loop.k_offline,
        config=config,
        grader=registry.graders()["boxed_exact"],
        metrics=registry.task(config.task).metrics(),
        seed=seed,
        benchmark=config.evaluation.in_loop.name,
        workers=1,
    )
    return {"arm": "base", "seed": seed, "avg": result.scores["average_at_k"], "seconds": 0.0}


def rft_trial(name: str, schedule: list[list[str]], seed: int, work: str, extra: list[str]) -> dict[str, Any]:
    """One GRPO Trial from the base model with a fixed batch schedule."""
    import torch

    from ade_core.engine.attempt import run_attempt
    from ade_core.engine.package import open_package
    from ade_core.schemas.artifact import Intervention

    torch.set_num_threads(1)
    started = time.monotonic()
    intervention = Intervention(kind="schedule", payload={"batches": schedule}, summary=name)
    package = run_attempt(job_for(RFT_CONFIG, intervention, seed, name, extra), Path(work) / f"{name}-{seed}")
    scores = open_package(package).manifest.in_loop_scores
    return {"arm": name, "seed": seed, "avg": scores["average_at_k"], "seconds": time.monotonic() - started}


def reward_sources() -> dict[str, str]:
    """Reward arms: the generic reference and each catalog family's first member (the hackable control too)."""
    from ade_core.plugins import load_plugins

    task = load_plugins().task("reward_design")
    return {"reference": task.reference_strategy().source} | {
        family.name: family.member() for family in task.strategy_catalog()
    }


def reward_trial(name: str, source: str, seed: int, work: str, extra: list[str]) -> dict[str, Any]:
    """One GRPO Trial with ``source`` as the reward module, then the operator's held-out evaluation."""
    import torch

    from ade_core.engine.attempt import run_attempt
    from ade_core.engine.heldout import evaluate_heldout
    from ade_core.engine.package import open_package
    from ade_task_reward_design.task import bind_reward_module

    torch.set_num_threads(1)
    started = time.monotonic()
    job = job_for(REWARD_CONFIG, bind_reward_module(source), seed, name, extra)
    package = run_attempt(job, Path(work) / f"reward-{name}-{seed}")
    trial_seconds = time.monotonic() - started
    opened = open_package(package)
    manifest = opened.manifest
    held = evaluate_heldout(job, Path(manifest.selected_checkpoint), Path(work) / f"heldout-reward-{name}-{seed}")
    diagnostics = opened.records("step_diagnostics")
    return {
        "arm": name,
        "seed": seed,
        "avg": manifest.in_loop_scores["average_at_k"],
        "pass": manifest.in_loop_scores["pass_at_k"],
        "heldout_avg": held["macro_avg"]["average_at_k"],
        "zero_variance": statistics.mean(r["zero_variance_share"] for r in diagnostics),
        "seconds": trial_seconds,
    }


def schedules(seed: int, extra: list[str]) -> dict[str, list[list[str]]]:
    from ade_core.config import load_config
    from ade_core.tiny.world import world_dir

    grpo = load_config(RFT_CONFIG, extra).experiment.training.grpo
    pool = [json.loads(line) for line in (world_dir("tiny") / "data" / "rft_pool.jsonl").read_text().splitlines()]
    rng = random.Random(seed)
    everything = [p["unique_id"] for p in pool]
    hardest = [p["unique_id"] for p in pool if p["level"] == max(q["level"] for q in pool)]
    return {
        "random": [rng.sample(everything, grpo.prompts_per_step) for _ in range(grpo.total_steps)],
        "hardest_only": [rng.sample(hardest, grpo.prompts_per_step) for _ in range(grpo.total_steps)],
    }


def mean_sd(values: list[float]) -> tuple[float, float]:
    return statistics.mean(values), statistics.stdev(values) if len(values) > 1 else 0.0


def separated(a: list[float], b: list[float], margin: float, sds: float) -> bool:
    """``a`` above ``b`` by at least ``margin`` points and by more than ``sds`` of the larger seed SD."""
    (ma, sa), (mb, sb) = mean_sd(a), mean_sd(b)
    return ma - mb >= margin and ma - mb > sds * max(sa, sb)


def column(rows: list[dict[str, Any]], arm: str, key: str) -> list[float]:
    return [r[key] for r in rows if r["arm"] == arm]


def cell(values: list[float]) -> str:
    mean, sd = mean_sd(values)
    return f"{mean:.1f} ± {sd:.1f}"


def sft_checks(rows: list[dict[str, Any]]) -> dict[str, bool]:
    arms = ("defect_free", "random", "defect_heavy")
    base = column(rows, "base", "avg")
    print("\n| selection | in-loop Average@K | in-loop Pass@K | boxed % | held-out Macro Average@K | s/Trial |")
    print("|---|---|---|---|---|---|")
    for arm in arms:
        cells = [cell(column(rows, arm, key)) for key in ("avg", "pass", "boxed", "heldout_avg")]
        print(f"| {arm} | " + " | ".join(cells) + f" | {statistics.mean(column(rows, arm, 'seconds')):.0f} |")
    free, rand, heavy = ({k: column(rows, arm, k) for k in ("avg", "heldout_avg")} for arm in arms)
    if base:  # the SFT target (--sft-target): SFT must teach the reasoning protocol it lacks
        print(f"| base (untrained) | {cell(base)} | | | | |")
        (mb, _), (mf, _), (mr, _), (mh, _) = (mean_sd(v) for v in (base, free["avg"], rand["avg"], heavy["avg"]))
        return {
            "T1 SFT target <= 25 % in-loop Average@K": mb <= 25,
            "T2 random >= base + 15 points": mr >= mb + 15,
            "T3 defect-free >= random + 5 points and > 3 SD": separated(free["avg"], rand["avg"], 5, 3),
            "T4 defect-heavy <= random - 5 points": mh <= mr - 5,
            "T5 same order on held-out Macro Average@K": mean_sd(free["heldout_avg"])[0]
            > mean_sd(rand["heldout_avg"])[0]
            > mean_sd(heavy["heldout_avg"])[0],
        }
    return {
        "1a defect-free > random (in-loop, >= 5 pts, > 2 SD)": separated(free["avg"], rand["avg"], 5, 2),
        "1b random > defect-heavy (in-loop, >= 5 pts, > 2 SD)": separated(rand["avg"], heavy["avg"], 5, 2),
        "1c defect-free > defect-heavy (in-loop, > 3 SD)": separated(free["avg"], heavy["avg"], 0, 3),
        "2 same order on held-out Macro Average@K": mean_sd(free["heldout_avg"])[0]
        > mean_sd(rand["heldout_avg"])[0]
        > mean_sd(heavy["heldout_avg"])[0],
    }


def rft_checks(rows: list[dict[str, Any]]) -> dict[str, bool]:
    print("\n| arm | in-loop Average@K | s/Trial |")
    print("|---|---|---|")
    for arm in ("base", "random", "hardest_only"):
        print(f"| {arm} | {cell(column(rows, arm, 'avg'))} | {statistics.mean(column(rows, arm, 'seconds')):.0f} |")
    base, rand, hard = (column(rows, arm, "avg") for arm in ("base", "random", "hardest_only"))
    (mr, sr), (mh, sh) = mean_sd(rand), mean_sd(hard)
    return {
        "3 GRPO (random schedule) raises in-loop Average@K above base by > 2 SD": separated(rand, base, 0, 2),
        "4 hardest-only vs random curriculum > 2 SD apart": abs(mr - mh) > 2 * max(sr, sh),
    }


def reward_checks(rows: list[dict[str, Any]]) -> dict[str, bool]:
    arms = [a for a in dict.fromkeys(r["arm"] for r in rows) if a != "base"]
    base, reference = column(rows, "base", "avg"), column(rows, "reference", "avg")
    print(
        "\n| reward | in-loop Average@K | in-loop Pass@K | held-out Macro Average@K | zero-variance share | s/Trial |"
    )
    print("|---|---|---|---|---|---|")
    print(f"| base (untrained) | {cell(base)} | | | | |")
    for arm in arms:
        cells = [cell(column(rows, arm, k)) for k in ("avg", "pass", "heldout_avg")]
        share = statistics.mean(column(rows, arm, "zero_variance"))
        print(
            f"| {arm} | "
            + " | ".join(cells)
            + f" | {share:.2f} | {statistics.mean(column(rows, arm, 'seconds')):.0f} |"
        )
    held = mean_sd(column(rows, "reference", "heldout_avg"))[0]
    winners = [
        arm
        for arm in arms
        if arm not in ("reference", "outcome_only", "hackable_format")
        and separated(column(rows, arm, "avg"), reference, 0, 2)
        and mean_sd(column(rows, arm, "heldout_avg"))[0] > held
    ]
    print(f"catalog rewards above the reference by > 2 SD, held-out in the same direction: {winners or 'none'}")
    return {
        "R1 outcome-only reference beats Base by > 2 SD (in-loop)": separated(reference, base, 0, 2),
        "R2 a catalog reward beats the reference by > 2 SD in-loop, held-out in the same direction": bool(winners),
        "R3 the hackable control falls below the reference by > 2 SD (in-loop)": separated(
            reference, column(rows, "hackable_format", "avg"), 0, 2
        ),
    }


def report(checks: dict[str, bool]) -> bool:
    for name, ok in checks.items():
        print(f"{'PASS' if ok else 'FAIL'}  {name}")
    return all(checks.values())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument(
        "--first-seed", type=int, default=0, help="seeds run from here (extend a screened study: --first-seed 3)"
    )
    parser.add_argument(
        "--only",
        default="sft,rft,reward",
        help="comma-separated: sft, rft (GRPO and curricula), reward (Reward Design)",
    )
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--json", type=Path, help="also write every Trial's row here")
    parser.add_argument("--model", help="base model directory to validate instead of the world's shipped base")
    parser.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="config override for every arm (repeatable)"
    )
    parser.add_argument("--arms", help="comma-separated subset of arms to run (default: all)")
    parser.add_argument(
        "--report", type=Path, nargs="+", help="only print the tables and checks of saved --json files (merged)"
    )
    parser.add_argument("--quick", action="store_true", help="one seed at toy sizes, checks skipped (seconds; CI)")
    parser.add_argument(
        "--sft-target",
        action="store_true",
        help="SFT study on the SFT target (model.target = tiny-sft), with its untrained base arm and targets",
    )
    args = parser.parse_args()
    if args.report:
        saved = [row for path in args.report for row in json.loads(path.read_text())]
        return 0 if report_all(saved, {r["study"] for r in saved}) else 1
    studies = set(args.only.split(","))
    extra = ([f"model.target={Path(args.model).resolve()}"] if args.model else []) + args.set
    sft_extra, rft_extra = (QUICK_SFT + extra, QUICK_RFT + extra) if args.quick else (extra, extra)
    if args.sft_target and not args.model:  # --model DIR then names a candidate SFT target
        sft_extra = [*sft_extra, "model.target=tiny-sft"]
    if args.quick:
        args.seeds = 1
    wanted = set(args.arms.split(",")) if args.arms else None
    from ade_core.config import load_config
    from ade_core.tiny.world import world_dir

    world_dir("tiny")  # build the data once, before workers race for it
    size = load_config(SFT_CONFIG, sft_extra).experiment.data.select_size or 200
    rows: list[dict[str, Any]] = []
    context = multiprocessing.get_context("spawn")
    with tempfile.TemporaryDirectory() as work, ProcessPoolExecutor(args.workers, mp_context=context) as pool:
        futures = []  # (study, future): both studies have an arm named "random"
        for seed in range(args.first_seed, args.first_seed + args.seeds):
            if "sft" in studies:
                if args.sft_target and (wanted is None or "base" in wanted):
                    futures.append(("sft", pool.submit(base_scores, seed, sft_extra, SFT_CONFIG)))
                futures += [
                    ("sft", pool.submit(sft_trial, n, ids, seed, work, sft_extra))
                    for n, ids in selections(size, seed).items()
                    if wanted is None or n in wanted
                ]
            if "rft" in studies:
                if wanted is None or "base" in wanted:
                    futures.append(("rft", pool.submit(base_scores, seed, rft_extra)))
                futures += [
                    ("rft", pool.submit(rft_trial, n, s, seed, work, rft_extra))
                    for n, s in schedules(seed, rft_extra).items()
                    if wanted is None or n in wanted
                ]
            if "reward" in studies:
                if wanted is None or "base" in wanted:
                    futures.append(("reward", pool.submit(base_scores, seed, rft_extra, REWARD_CONFIG)))
                futures += [
                    ("reward", pool.submit(reward_trial, n, source, seed, work, rft_extra))
                    for n, source in reward_sources().items()
                    if wanted is None or n in wanted
                ]
        for study, future in futures:
            row = {**future.result(), "study": study}
            rows.append(row)
            print(
                f"  seed {row['seed']} {row['arm']:13} Average@K {row['avg']:5.1f}  ({row['seconds']:.0f} s)",
                flush=True,
            )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    if wanted is not None:
        return 0  # a subset of arms is a probe: the rows above are its result
    if args.quick:
        report_all(rows, studies, checks=False)
        print("quick: toy sizes and one seed; the four properties are not checked (run without --quick)")
        return 0
    return 0 if report_all(rows, studies) else 1


def report_all(rows: list[dict[str, Any]], studies: set[str], checks: bool = True) -> bool:
    """Print each study's table and, with ``checks``, its properties; whether every property holds."""
    ok = True
    for study, table in (("sft", sft_checks), ("rft", rft_checks), ("reward", reward_checks)):
        if study in studies:
            found = table([r for r in rows if r["study"] == study])
            ok &= report(found) if checks else True
    return ok


if __name__ == "__main__":
    sys.exit(main())
