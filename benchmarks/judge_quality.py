"""How good is the offline judge? Per-defect precision and recall against the tiny world's labels.

Every candidate of the tiny world's SFT pool is judged one dimension at a time (repetition,
completeness, correctness, format) by the offline provider at the error rate of
``examples/tiny-data-selection-judge.toml`` (``--error-rate`` overrides it). A candidate is
*flagged* on a dimension when its score is below the top level. For each defect with a dimension
that targets it, recall is the share of the defect's candidates flagged on that dimension, and
precision the share of candidates flagged on that dimension that carry the defect; a request the
judge cannot assess (correctness of a chat answer it cannot re-derive) is ``unavailable`` and is
left out of both. The labels are used only here: the judge never sees them.

``--quick`` judges the first 300 candidates (CI keeps the script working; its figures are not
measurements). Run: .venv/bin/python benchmarks/judge_quality.py [--quick] [--error-rate 0.1]
"""

from __future__ import annotations

import argparse
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PRESET = REPO / "examples" / "tiny-data-selection-judge.toml"
CRITERIA = {
    "repetition": "no step repeats literally in the think span",
    "completeness": "the think span closes and a full answer follows",
    "correctness": "the boxed answer solves the question",
    "format": "one closed think span, then a boxed final answer",
}
# Which dimension is meant to catch which defect (the others no offline detector targets).
TARGETS = {
    "wrong_answer": "correctness",
    "wrong_step": "correctness",
    "repetition_loop": "repetition",
    "truncated": "completeness",
    "missing_box": "format",
}


def candidates(quick: bool) -> list:
    from ade_core.tiny.candidates import build_candidates
    from ade_core.tiny.world import PRESETS, build_splits

    spec = PRESETS["tiny"]
    splits = build_splits(spec)
    pool = build_candidates(splits["sft_problems"], spec.sft_chat, spec.seed + 6, dict(spec.defect_rates))
    if quick:
        return pool[:200] + pool[-100:]  # math and chat candidates both
    return pool


def judged(pool: list, error_rate: float, seed: int) -> dict[str, list[dict]]:
    """Each dimension's answers, in pool order."""
    from ade_core.judging import Judge, OfflineProvider

    judge = Judge(OfflineProvider(error_rate, seed))
    answers = {}
    for name, criterion in CRITERIA.items():
        levels = [0, 1] if name == "correctness" else [0, 0.5, 1]
        rubric = {"dimensions": [{"name": name, "criterion": criterion, "levels": levels, "weight": 1.0}]}
        requests = [
            {"question": c.messages[0]["content"], "response": c.messages[1]["content"], "rubric": rubric} for c in pool
        ]
        answers[name] = judge(requests)
    return answers


def table(pool: list, answers: dict[str, list[dict]]) -> list[str]:
    rows = [
        "| defect | dimension | labelled | unavailable | recall | precision |",
        "|---|---|---:|---:|---:|---:|",
    ]
    labels = Counter(c.defect or "clean" for c in pool)
    targets = [([defect], dimension) for defect, dimension in TARGETS.items()]
    targets.insert(2, (["wrong_answer", "wrong_step"], "correctness"))  # the two defects correctness targets
    for defects, dimension in targets:
        defect = " + ".join(defects)
        assessed = [
            (c.defect in defects, a["scores_by_dimension"][dimension] < 1)
            for c, a in zip(pool, answers[dimension], strict=True)
            if a["status"] == "completed"
        ]
        unavailable = sum(
            1
            for c, a in zip(pool, answers[dimension], strict=True)
            if c.defect in defects and a["status"] != "completed"
        )
        hits = sum(1 for has, flagged in assessed if has and flagged)
        positives = sum(1 for has, _ in assessed if has)
        flagged = sum(1 for _, flag in assessed if flag)
        recall = f"{hits / positives:.2f}" if positives else "n/a"
        precision = f"{hits / flagged:.2f}" if flagged else "n/a"
        labelled = sum(labels[d] for d in defects)
        rows.append(f"| {defect} | {dimension} | {labelled} | {unavailable} | {recall} | {precision} |")
    untargeted = sorted(d for d in labels if d not in TARGETS and d != "clean")
    rows.append(f"| (not targeted: {', '.join(untargeted)}) | — | {sum(labels[d] for d in untargeted)} | | | |")
    rows.append(f"| clean | — | {labels['clean']} | | | |")
    return rows


def main() -> None:
    from ade_core.config import load_config

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="judge 300 candidates (a smoke run, not a measurement)")
    parser.add_argument("--error-rate", type=float, default=None, help="override the preset's [judge].error_rate")
    args = parser.parse_args()
    settings = load_config(PRESET).experiment.judge
    error_rate = settings.error_rate if args.error_rate is None else args.error_rate
    started = time.monotonic()
    pool = candidates(args.quick)
    answers = judged(pool, error_rate, settings.seed)
    print(f"offline judge, error_rate={error_rate:g}, seed={settings.seed}: {len(pool)} candidates")
    print("\n".join(table(pool, answers)))
    print(f"({time.monotonic() - started:.1f} s)")


if __name__ == "__main__":
    main()
