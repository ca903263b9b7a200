"""Does strategy quality show in the tiny world's scores? Exits non-zero when a property fails.

Properties (issue: the embedded default), over N seeds:
  1. SFT on a fixed-size selection: defect-free > random > defect-heavy on in-loop Average@K, each by
     >= 5 points and > 2 seed SDs; defect-free > defect-heavy by > 3 SDs (Pass@K and boxed rate beside).
  2. The same ordering on held-out Macro Average@K.
  3. GRPO from the base model for the tiny RFT budget raises in-loop Average@K above the base by > 2 SDs.
  4. A hardest-level-only curriculum and a random schedule end > 2 SDs apart on in-loop Average@K.
Run: .venv/bin/python benchmarks/tiny_world_validity.py [--seeds 5] [--only sft,grpo,curriculum]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

from ade_core.config import load_config
from ade_core.engine.attempt import run_attempt
from ade_core.engine.evaluation import evaluate
from ade_core.engine.heldout import evaluate_heldout
from ade_core.engine.job import EngineJob
from ade_core.engine.package import open_package
from ade_core.plugins import load_plugins
from ade_core.schemas.artifact import BoundCommand, Intervention, ResourceRequest
from ade_core.tiny.world import world_dir

REPO = Path(__file__).resolve().parents[1]
DIGEST = "sha256:" + "0" * 64


def job_for(config_path: Path, overrides: list[str], intervention: Intervention, seed: int, tag: str) -> EngineJob:
    config = load_config(config_path, [*overrides, f"seeds.training={seed}", f"seeds.evaluation={seed}"]).experiment
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
    directory = world_dir("tiny")
    labels = {
        json.loads(line)["candidate_id"]: json.loads(line)["defect"]
        for line in (directory / "ground_truth" / "defects.jsonl").read_text().splitlines()
    }
    rng = random.Random(seed)
    ids = sorted(labels)
    clean = [i for i in ids if labels[i] is None]
    heavy = [i for i in ids if labels[i] is not None]
    return {
        name: sorted(f"{c}-t0" for c in rng.sample(group, size))
        for name, group in (("defect_free", clean), ("random", ids), ("defect_heavy", heavy))
    }


def boxed_rate(package_path: Path) -> float:
    responses = open_package(package_path).records("eval_responses")
    return 100.0 * sum("\\boxed{" in r["response"] for r in responses) / len(responses)


def mean_sd(values: list[float]) -> tuple[float, float]:
    return statistics.mean(values), statistics.stdev(values) if len(values) > 1 else 0.0


def separated(a: list[float], b: list[float], margin: float, sds: float) -> bool:
    (ma, sa), (mb, sb) = mean_sd(a), mean_sd(b)
    return ma - mb >= margin and ma - mb > sds * max(sa, sb)


def sft_study(seeds: int, work: Path) -> bool:
    config = REPO / "examples" / "tiny-data-selection.toml"
    size = load_config(config).experiment.data.select_size or 200
    results: dict[str, dict[str, list[float]]] = {}
    for seed in range(seeds):
        for name, ids in selections(size, seed).items():
            started = time.monotonic()
            intervention = Intervention(kind="sft_selection", payload={"selected_ids": ids}, summary=name)
            job = job_for(config, [], intervention, seed, name)
            package = run_attempt(job, work / f"{name}-{seed}")
            manifest = open_package(package).manifest
            held = evaluate_heldout(job, Path(manifest.selected_checkpoint), work / "heldout")
            row = results.setdefault(name, {"avg": [], "pass": [], "boxed": [], "heldout_avg": [], "seconds": []})
            row["avg"].append(manifest.in_loop_scores["average_at_k"])
            row["pass"].append(manifest.in_loop_scores["pass_at_k"])
            row["boxed"].append(boxed_rate(package))
            row["heldout_avg"].append(held["macro_avg"]["average_at_k"])
            row["seconds"].append(time.monotonic() - started)
            print(
                f"  seed {seed} {name:13} Average@K {row['avg'][-1]:5.1f}  Pass@K {row['pass'][-1]:5.1f}  "
                f"held-out {row['heldout_avg'][-1]:5.1f}  ({row['seconds'][-1]:.0f} s)",
                flush=True,
            )
    print("\n| selection | in-loop Average@K | in-loop Pass@K | boxed % | held-out Macro Average@K | s/Trial |")
    print("|---|---|---|---|---|---|")
    for name, row in results.items():
        cells = [
            f"{mean_sd(row[k])[0]:.1f} ± {mean_sd(row[k])[1]:.1f}" for k in ("avg", "pass", "boxed", "heldout_avg")
        ]
        print(f"| {name} | " + " | ".join(cells) + f" | {statistics.mean(row['seconds']):.0f} |")
    free, rand, heavy = (results[n] for n in ("defect_free", "random", "defect_heavy"))
    checks = {
        "1a defect-free > random (in-loop, >= 5 pts, > 2 SD)": separated(free["avg"], rand["avg"], 5, 2),
        "1b random > defect-heavy (in-loop, >= 5 pts, > 2 SD)": separated(rand["avg"], heavy["avg"], 5, 2),
        "1c defect-free > defect-heavy (in-loop, > 3 SD)": separated(free["avg"], heavy["avg"], 0, 3),
        "2 same order on held-out Macro Average@K": mean_sd(free["heldout_avg"])[0]
        > mean_sd(rand["heldout_avg"])[0]
        > mean_sd(heavy["heldout_avg"])[0],
    }
    return report(checks)


def rft_study(seeds: int, work: Path, curriculum: bool) -> bool:
    registry = load_plugins()
    config = REPO / "examples" / "tiny-curriculum.toml"
    loaded = load_config(config).experiment
    grpo = loaded.training.grpo
    pool = [json.loads(line) for line in (world_dir("tiny") / "data" / "rft_pool.jsonl").read_text().splitlines()]
    base: list[float] = []
    finals: dict[str, list[float]] = {}
    for seed in range(seeds):
        if not curriculum:
            rows = [
                json.loads(line) for line in (world_dir("tiny") / "data" / "in_loop.jsonl").read_text().splitlines()
            ]
            result = evaluate(
                world_dir("tiny") / "model",
                rows,
                loaded.evaluation.in_loop.k_offline,
                config=loaded,
                grader=registry.graders()["boxed_exact"],
                metrics=registry.task("curriculum").metrics(),
                seed=seed,
            )
            base.append(result.scores["average_at_k"])
        rng = random.Random(seed)
        hardest = [p["unique_id"] for p in pool if p["level"] == 5]
        schedules = {
            "random": [
                rng.sample([p["unique_id"] for p in pool], grpo.prompts_per_step) for _ in range(grpo.total_steps)
            ],
        }
        if curriculum:
            schedules["hardest_only"] = [rng.sample(hardest, grpo.prompts_per_step) for _ in range(grpo.total_steps)]
        for name, schedule in schedules.items():
            intervention = Intervention(kind="schedule", payload={"batches": schedule}, summary=name)
            package = run_attempt(job_for(config, [], intervention, seed, name), work / f"{name}-{seed}")
            finals.setdefault(name, []).append(open_package(package).manifest.in_loop_scores["average_at_k"])
            print(f"  seed {seed} {name:13} Average@K {finals[name][-1]:5.1f}", flush=True)
    if curriculum:
        gap = abs(mean_sd(finals["random"])[0] - mean_sd(finals["hardest_only"])[0])
        spread = 2 * max(mean_sd(finals["random"])[1], mean_sd(finals["hardest_only"])[1])
        return report({"4 hardest-only vs random curriculum > 2 SD apart": gap > spread})
    print(
        f"  base Average@K {mean_sd(base)[0]:.1f} ± {mean_sd(base)[1]:.1f}; "
        f"GRPO {mean_sd(finals['random'])[0]:.1f} ± {mean_sd(finals['random'])[1]:.1f}"
    )
    return report({"3 GRPO raises in-loop Average@K above base by > 2 SD": separated(finals["random"], base, 0, 2)})


def report(checks: dict[str, bool]) -> bool:
    for name, ok in checks.items():
        print(f"{'PASS' if ok else 'FAIL'}  {name}")
    return all(checks.values())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--only", default="sft,grpo,curriculum")
    args = parser.parse_args()
    studies = args.only.split(",")
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        if "sft" in studies:
            print("SFT selections:")
            ok &= sft_study(args.seeds, work)
        if "grpo" in studies:
            print("GRPO from the base model:")
            ok &= rft_study(args.seeds, work, curriculum=False)
        if "curriculum" in studies:
            print("Curricula:")
            ok &= rft_study(args.seeds, work, curriculum=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
