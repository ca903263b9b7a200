"""How well does the offline process judge agree with the truth of the working it reads?

Reward Design asks the judge for three process dimensions (``conclusion_support``,
``derivation_soundness``, ``substantive_relevance``, levels {0, 0.5, 1}). This script writes
tiny-world responses to the RFT pool's problems — the clean worked solution, each math defect of
the world's candidate pool (``tiny/candidates.py``), and the clean working of *another* problem
answered under this one (a corruption of this script's own: working that ignores the question) —
and judges each once with that rubric. A response is *flagged* on a dimension when its level is
below the top one; each dimension is compared with the truth it is meant to find:

* derivation_soundness — a worked step is wrong (the ``wrong_step`` defect, or working for
  another question, whose steps do not re-derive this one; a second row leaves the latter out);
* conclusion_support — the final boxed answer is not the last step's result (``wrong_answer``,
  ``missing_box``, ``truncated``);
* substantive_relevance — the working is for another question.

Agreement is the share of responses where flag and truth agree; precision and recall are those
of the flag for the truth. The labels are used only here: the judge sees question and response.
Run at the default ``[judge].error_rate`` (``JudgeConfig``) and at 0.

``--quick`` judges 60 problems (CI keeps the script working; its figures are not measurements).
Run: .venv/bin/python benchmarks/process_judge_agreement.py [--quick]
"""

from __future__ import annotations

import argparse
import random
import time

LEVELS = [0, 0.5, 1]
RUBRIC = {
    "dimensions": [
        {
            "name": "conclusion_support",
            "criterion": "the final boxed answer follows from the last worked step",
            "levels": LEVELS,
            "weight": 0.4,
        },
        {
            "name": "derivation_soundness",
            "criterion": "every worked step is right when re-derived from the question",
            "levels": LEVELS,
            "weight": 0.3,
        },
        {
            "name": "substantive_relevance",
            "criterion": "the working uses the question's numbers",
            "levels": LEVELS,
            "weight": 0.3,
        },
    ]
}
OTHER_QUESTION = "other_question"
# Each row: a dimension, the variants that carry the flaw it is meant to find, and variants left out.
TRUTH = (
    ("derivation_soundness", {"wrong_step", OTHER_QUESTION}, set()),
    ("derivation_soundness", {"wrong_step"}, {OTHER_QUESTION}),
    ("conclusion_support", {"wrong_answer", "missing_box", "truncated"}, set()),
    ("substantive_relevance", {OTHER_QUESTION}, set()),
)


def responses(quick: bool) -> list[tuple[str, str, str]]:
    """``(variant, question, response)`` for every problem and variant, in a fixed order."""
    from ade_core.tiny.candidates import DEFECTS, math_trajectory
    from ade_core.tiny.world import PRESETS, build_splits

    problems = build_splits(PRESETS["tiny"])["rft_pool"]
    if quick:
        problems = problems[:60]
    rng = random.Random(0)
    variants = [None, *(d for d in DEFECTS if d != "duplicate_question")]
    rows = []
    for index, problem in enumerate(problems):
        for defect in variants:
            rows.append((defect or "clean", problem.problem, math_trajectory(problem, defect, rng, cap_chars=200)))
        other = problems[(index + 1) % len(problems)]
        rows.append((OTHER_QUESTION, problem.problem, math_trajectory(other, None, rng, cap_chars=200)))
    return rows


def agreement(rows: list[tuple[str, str, str]], answers: list[dict]) -> list[str]:
    lines = [
        "| dimension | flaw it should find | n | unavailable | agreement | precision | recall |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for dimension, flawed, left_out in TRUTH:
        kept = [(variant, answer) for (variant, _, _), answer in zip(rows, answers, strict=True)]
        kept = [(variant, answer) for variant, answer in kept if variant not in left_out]
        pairs = [
            (variant in flawed, answer["scores_by_dimension"][dimension] < 1)
            for variant, answer in kept
            if answer["status"] == "completed"
        ]
        hits = sum(truth and flag for truth, flag in pairs)
        flagged, positives = sum(flag for _, flag in pairs), sum(truth for truth, _ in pairs)
        agree = sum(truth == flag for truth, flag in pairs) / len(pairs)
        precision = f"{hits / flagged:.3f}" if flagged else "n/a"
        recall = f"{hits / positives:.3f}" if positives else "n/a"
        lines.append(
            f"| {dimension} | {', '.join(sorted(flawed))} | {len(pairs)} | {len(kept) - len(pairs)} | "
            f"{agree:.3f} | {precision} | {recall} |"
        )
    return lines


def main() -> None:
    from ade_core.judging import Judge, OfflineProvider
    from ade_core.schemas.config import JudgeConfig

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="judge 60 problems (a smoke run, not a measurement)")
    args = parser.parse_args()
    defaults = JudgeConfig()
    started = time.monotonic()
    rows = responses(args.quick)
    requests = [{"question": q, "response": r, "rubric": RUBRIC} for _, q, r in rows]
    problems = sum(variant == "clean" for variant, _, _ in rows)
    for error_rate in (defaults.error_rate, 0.0):
        answers = Judge(OfflineProvider(error_rate, defaults.seed))(requests)
        print(f"offline process judge, error_rate={error_rate:g}, seed={defaults.seed}: {problems} problems")
        print("\n".join(agreement(rows, answers)))
        print()
    print(f"({time.monotonic() - started:.1f} s)")


if __name__ == "__main__":
    main()
