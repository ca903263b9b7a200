"""Strategy families of the Data Selection task: named selection mechanisms and their parameter spaces.

Each family's template is a complete strategy module once its ``$name`` fields are filled. Every
member ranks all candidate rows (the ones its mechanism keeps first, then the rest by the
family's own signal) and packs whole rows in that order to exactly ``select_size`` trajectories,
so a strict filter never returns fewer (paper Appendix D.1: no split groups, no post-hoc subset).
The shared pieces (``catalog_parts``) are plain source text joined into each template.
"""

from __future__ import annotations

from typing import Any

from ade_core import StrategyFamily, find_family
from ade_task_data_selection.catalog_parts import _BINS, _COMPLETE, _JUDGE, _MESSAGES, _PACK, _SHUFFLE

TASK = "data_selection"

_RANDOM = (
    '''"""Seeded uniform random draw of whole candidate rows (the reference's mechanism, other seeds)."""

SEED = $seed
'''
    + _SHUFFLE
    + _PACK
    + """

async def select_trajectories(candidate_inventory, select_size, judge):
    return _pack(_seeded_rows(candidate_inventory, SEED), select_size)
"""
)

_LENGTH_BAND = (
    '''"""Length-band matched draw: the selection keeps the pool's distribution over length bins."""

SEED = $seed
ALLOW_OVER_CAP = $allow_over_cap
'''
    + _SHUFFLE
    + _PACK
    + _MESSAGES
    + _BINS
    + """

def _quotas(sizes, select_size):
    # Largest-remainder apportionment of select_size trajectories over the bins, in integers.
    total = sum(sizes.values())
    if total == 0:
        return {label: 0 for label in sizes}
    quotas = {label: select_size * size // total for label, size in sizes.items()}
    remainders = sorted(sizes, key=lambda label: (-(select_size * sizes[label] % total), BIN_ORDER.index(label)))
    for label in remainders[: select_size - sum(quotas.values())]:
        quotas[label] += 1
    return quotas


async def select_trajectories(candidate_inventory, select_size, judge):
    rows = _seeded_rows(candidate_inventory, SEED)
    bins = _row_bins(candidate_inventory)
    allowed = [r for r in rows if ALLOW_OVER_CAP or bins[r["candidate_id"]] != "over_cap"]
    barred = [r for r in rows if not ALLOW_OVER_CAP and bins[r["candidate_id"]] == "over_cap"]
    sizes = {}
    for row in allowed:
        label = bins[row["candidate_id"]]
        sizes[label] = sizes.get(label, 0) + len(row["trajectory_ids"])
    quotas = _quotas(sizes, min(select_size, sum(sizes.values())))
    in_band, rest = [], []
    for row in allowed:
        label = bins[row["candidate_id"]]
        if len(row["trajectory_ids"]) <= quotas[label]:
            quotas[label] -= len(row["trajectory_ids"])
            in_band.append(row)
        else:
            rest.append(row)
    # Fill at random from the allowed bins, and from over_cap only if nothing else is left.
    return _pack(in_band + rest + barred, select_size)
"""
)

_REPETITION_FILTER = (
    '''"""Literal repetition filter: drop rows whose think span repeats word windows, fill from the rest."""

WINDOW = $window
THRESHOLD = $threshold
SEED = 20240601
'''
    + _SHUFFLE
    + _PACK
    + _MESSAGES
    + """

def _repeated_fraction(text, window):
    # Fraction of the words that lie inside a window of `window` words occurring more than once.
    words = text.split()
    starts = range(len(words) - window + 1)
    seen = {}
    for start in starts:
        key = tuple(words[start : start + window])
        seen[key] = seen.get(key, 0) + 1
    covered = [False] * len(words)
    for start in starts:
        if seen[tuple(words[start : start + window])] > 1:
            covered[start : start + window] = [True] * window
    return sum(covered) / len(words) if words else 0.0


async def select_trajectories(candidate_inventory, select_size, judge):
    rows = _seeded_rows(candidate_inventory, SEED)
    repetition = {r["candidate_id"]: _repeated_fraction(_think(_assistant(r)), WINDOW) for r in rows}
    kept = [r for r in rows if repetition[r["candidate_id"]] <= THRESHOLD]
    dropped = sorted(
        (r for r in rows if repetition[r["candidate_id"]] > THRESHOLD), key=lambda r: repetition[r["candidate_id"]]
    )
    return _pack(kept + dropped, select_size)
"""
)

_COMPLETE_TARGET = (
    '''"""Complete targets only: one closed think span, a non-empty final answer (boxed for math), under the cap."""

REQUIRE_BOXED = $require_boxed
SEED = $seed
'''
    + _SHUFFLE
    + _PACK
    + _MESSAGES
    + _COMPLETE
    + """

async def select_trajectories(candidate_inventory, select_size, judge):
    rows = _seeded_rows(candidate_inventory, SEED)
    # Complete rows first in seeded order; the fill takes the fewest faults first.
    ranked = sorted(rows, key=lambda row: _fault_count(row, REQUIRE_BOXED))
    return _pack(ranked, select_size)
"""
)

_JUDGE_CORRECTNESS = (
    '''"""Judge-gated correctness: keep rows the judge scores above a threshold; no evidence falls back to
the complete-target rule."""

THRESHOLD = $threshold
INCLUDE_FORMAT = $include_format
SEED = 20240601
REQUIRE_BOXED = True
CORRECTNESS = {
    "name": "correctness",
    "criterion": "1: the final answer is correct for the question and every step that reaches it is sound; "
    "0.5: the final answer is correct but a step is wrong or unsupported; 0: the final answer is wrong or missing.",
    "levels": [0.0, 0.5, 1.0],
}
FORMAT = {
    "name": "format",
    "criterion": "1: one closed <think>...</think> span, then a non-empty final answer, in \\\\boxed{} for math; "
    "0.5: the answer is present but not in the expected form; 0: no final answer after the think span.",
    "levels": [0.0, 0.5, 1.0],
}
'''
    + _SHUFFLE
    + _PACK
    + _MESSAGES
    + _COMPLETE
    + _JUDGE
    + """

def _rubric():
    if not INCLUDE_FORMAT:
        return {"dimensions": [dict(CORRECTNESS, weight=1.0)]}
    return {"dimensions": [dict(CORRECTNESS, weight=0.75), dict(FORMAT, weight=0.25)]}


async def select_trajectories(candidate_inventory, select_size, judge):
    rows = _seeded_rows(candidate_inventory, SEED)
    rubric = _rubric()
    requests = [{"question": _question(r), "response": _assistant(r), "rubric": rubric} for r in rows]
    scores = dict(zip([r["candidate_id"] for r in rows], await _projected_scores(judge, requests), strict=True))

    def rank(row):
        score = scores.get(row["candidate_id"])
        if score is not None:  # judged
            return (0, 0.0) if score > THRESHOLD else (1, -score)
        faults = _fault_count(row, REQUIRE_BOXED)
        return (0, 0.0) if faults == 0 else (2, faults)

    return _pack(sorted(rows, key=rank), select_size)
"""
)

_QUESTION_DEDUP = (
    '''"""Question dedup: one row per normalized question, the shortest complete one."""

SEED = $seed
REQUIRE_BOXED = True
'''
    + _SHUFFLE
    + _PACK
    + _MESSAGES
    + _COMPLETE
    + """

def _key(row):
    return " ".join(_question(row).lower().split())


async def select_trajectories(candidate_inventory, select_size, judge):
    rows = _seeded_rows(candidate_inventory, SEED)
    quality = {r["candidate_id"]: (_fault_count(r, REQUIRE_BOXED) > 0, r.get("token_count", 0)) for r in rows}
    best = {}
    for row in sorted(rows, key=lambda r: quality[r["candidate_id"]]):  # ties keep the seeded order
        best.setdefault(_key(row), row["candidate_id"])
    kept_ids = set(best.values())
    kept = [r for r in rows if r["candidate_id"] in kept_ids]
    repeats = sorted((r for r in rows if r["candidate_id"] not in kept_ids), key=lambda r: quality[r["candidate_id"]])
    return _pack(kept + repeats, select_size)
"""
)

_DOMAIN_ALIGNMENT = (
    '''"""Domain alignment: the target domain fills up to a share of the selection, the rest is drawn at random."""

TARGET_DOMAIN = $target_domain
SHARE = $share
SEED = 20240601
'''
    + _SHUFFLE
    + _PACK
    + """

async def select_trajectories(candidate_inventory, select_size, judge):
    rows = _seeded_rows(candidate_inventory, SEED)
    quota = min(select_size, int(SHARE * select_size + 0.5))
    preferred, taken = [], 0
    for row in rows:
        if row["domain"] == TARGET_DOMAIN and taken + len(row["trajectory_ids"]) <= quota:
            preferred.append(row)
            taken += len(row["trajectory_ids"])
    chosen = {r["candidate_id"] for r in preferred}
    return _pack(preferred + [r for r in rows if r["candidate_id"] not in chosen], select_size)
"""
)

# The offline Coordinator explores untried families in this order, so it is the order a researcher
# with no evidence yet would try them in: the form of the targets (complete, not looping), then their
# correctness (a judge), then duplication and domain mix; the controls come last (a length-matched
# draw and a plain re-draw, which measure what moves the score without any quality signal).
CATALOG: tuple[StrategyFamily, ...] = (
    StrategyFamily(
        name="complete_target",
        task=TASK,
        description="Complete targets only: exactly one closed think span and a non-empty final answer after "
        "it (boxed for math when required), not over the cap; tests whether incomplete targets teach "
        "the model to stop early or answer in the wrong form.",
        targets=("truncated", "missing_box"),
        template=_COMPLETE_TARGET,
        parameters={"require_boxed": (True, False), "seed": (20240601, 7)},
    ),
    StrategyFamily(
        name="repetition_filter",
        task=TASK,
        description="Literal repetition filter: drops rows whose think span has more than a threshold "
        "fraction of words inside repeated k-word windows, then fills from the least repetitive; tests "
        "whether training on looping reasoning teaches loops.",
        targets=("repetition_loop", "meandering", "off_domain"),
        template=_REPETITION_FILTER,
        parameters={"window": (16, 8, 4), "threshold": (0.3, 0.5, 0.15)},
    ),
    StrategyFamily(
        name="judge_correctness",
        task=TASK,
        description="Judge-gated correctness: the judge scores each trajectory on a correctness rubric (optionally "
        "with format) and rows whose projected score is above the threshold are kept; an "
        "unavailable answer is no evidence and falls back to the complete-target rule; tests whether "
        "wrong answers and wrong steps in the targets cost accuracy.",
        targets=("wrong_answer", "wrong_step", "missing_box"),
        template=_JUDGE_CORRECTNESS,
        parameters={"threshold": (0.5, 0.25, 0.75), "include_format": (False, True)},
    ),
    StrategyFamily(
        name="question_dedup",
        task=TASK,
        description="Question dedup: one row per normalized question text (lowercase, collapsed spaces), the "
        "shortest complete one, repeats only as fill; tests whether repeated questions overweight a "
        "few problems.",
        targets=("duplicate_question",),
        template=_QUESTION_DEDUP,
        parameters={"seed": (20240601, 7, 99)},
    ),
    StrategyFamily(
        name="domain_alignment",
        task=TASK,
        description="Domain alignment: a target domain fills up to a share of the selection (seeded), the rest "
        "is drawn at random from the remaining rows; tests whether matching the training mix to "
        "the objective's domain helps.",
        targets=("domain_mix",),
        template=_DOMAIN_ALIGNMENT,
        parameters={"target_domain": ("math", "code"), "share": (1.0, 0.8)},
    ),
    StrategyFamily(
        name="length_band",
        task=TASK,
        description="Length-band matched draw: largest-remainder quotas keep the pool's distribution over "
        "le_4096/4097_8192/8193_16384 bins (over-cap rows apart), random within a bin; tests whether "
        "length shift, not quality, moves the score, and (without over_cap) whether over-cap targets hurt.",
        targets=("length_shift", "truncated", "meandering"),
        template=_LENGTH_BAND,
        parameters={"seed": (20240601, 7), "allow_over_cap": (False, True)},
    ),
    StrategyFamily(
        name="random",
        task=TASK,
        description="Seeded uniform random whole rows at seeds other than the reference's: measures "
        "seed-to-seed variance of the reference draw, the noise floor any quality signal has to beat.",
        targets=("selection_variance",),
        template=_RANDOM,
        # Never the reference's own seed (20240601): that draw is the reference, and its Trial would
        # re-measure P000 instead of the variance around it.
        parameters={"seed": (1, 2, 3)},
    ),
)


def family(name: str) -> StrategyFamily:
    """The catalog family called ``name``; an unknown name suggests the closest one."""
    return find_family(CATALOG, name)


def render(family: StrategyFamily, **choices: Any) -> str:
    """Source of one member: ``choices`` override the first allowed value of each parameter."""
    return family.member(**choices)
