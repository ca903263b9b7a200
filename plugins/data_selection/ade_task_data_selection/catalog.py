"""Strategy families of the Data Selection task: named selection mechanisms and their parameter spaces.

Each family's template is a complete strategy module once its ``$name`` fields are filled. Every
member ranks all candidate groups (the ones its mechanism keeps first, then the rest by the
family's own signal) and packs whole groups in that order to exactly ``select_size`` trajectories,
so a strict filter never returns fewer (paper Appendix D.1: no split groups, no post-hoc subset).
The shared pieces (``catalog_parts``) are plain source text joined into each template.
"""

from __future__ import annotations

from typing import Any

from ade_core import StrategyFamily
from ade_core.errors import did_you_mean
from ade_task_data_selection.catalog_parts import _BINS, _COMPLETE, _JUDGE, _MESSAGES, _PACK, _SHUFFLE

TASK = "data_selection"

_RANDOM = (
    '''"""Seeded uniform random draw of whole candidate groups (the reference's mechanism, other seeds)."""

SEED = $seed
'''
    + _SHUFFLE
    + _PACK
    + """

async def select_trajectories(candidate_inventory, select_size, judge):
    return _pack(_seeded_groups(candidate_inventory, SEED), select_size)
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
    groups = _seeded_groups(candidate_inventory, SEED)
    bins = _group_bins(candidate_inventory)
    allowed = [g for g in groups if ALLOW_OVER_CAP or bins[g["candidate_id"]] != "over_cap"]
    barred = [g for g in groups if not ALLOW_OVER_CAP and bins[g["candidate_id"]] == "over_cap"]
    sizes = {}
    for group in allowed:
        label = bins[group["candidate_id"]]
        sizes[label] = sizes.get(label, 0) + len(group["trajectories"])
    quotas = _quotas(sizes, min(select_size, sum(sizes.values())))
    in_band, rest = [], []
    for group in allowed:
        label = bins[group["candidate_id"]]
        if len(group["trajectories"]) <= quotas[label]:
            quotas[label] -= len(group["trajectories"])
            in_band.append(group)
        else:
            rest.append(group)
    # Fill at random from the allowed bins, and from over_cap only if nothing else is left.
    return _pack(in_band + rest + barred, select_size)
"""
)

_REPETITION_FILTER = (
    '''"""Literal repetition filter: drop groups whose think span repeats word windows, fill from the rest."""

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
    groups = _seeded_groups(candidate_inventory, SEED)
    repetition = {
        g["candidate_id"]: max(
            (_repeated_fraction(_think(_assistant(t)), WINDOW) for t in g["trajectories"]), default=0.0
        )
        for g in groups
    }
    kept = [g for g in groups if repetition[g["candidate_id"]] <= THRESHOLD]
    dropped = sorted(
        (g for g in groups if repetition[g["candidate_id"]] > THRESHOLD), key=lambda g: repetition[g["candidate_id"]]
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
    groups = _seeded_groups(candidate_inventory, SEED)
    # Complete groups first in seeded order; the fill takes the fewest faults first.
    ranked = sorted(groups, key=lambda group: _group_faults(group, REQUIRE_BOXED))
    return _pack(ranked, select_size)
"""
)

_JUDGE_CORRECTNESS = (
    '''"""Judge-gated correctness: keep groups the judge scores above a threshold; no evidence falls back to
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
    groups = _seeded_groups(candidate_inventory, SEED)
    rubric = _rubric()
    owners, requests = [], []
    for group in groups:
        for trajectory in group["trajectories"]:
            owners.append(group["candidate_id"])
            requests.append({"question": _question(trajectory), "response": _assistant(trajectory), "rubric": rubric})
    scores = {}
    for owner, score in zip(owners, await _projected_scores(judge, requests), strict=True):
        scores.setdefault(owner, []).append(score)

    def rank(group):
        values = scores.get(group["candidate_id"], [])
        if values and None not in values:  # judged: the group is as good as its weakest trajectory
            return (0, 0.0) if min(values) > THRESHOLD else (1, -min(values))
        faults = _group_faults(group, REQUIRE_BOXED)
        return (0, 0.0) if faults == 0 else (2, faults)

    return _pack(sorted(groups, key=rank), select_size)
"""
)

_QUESTION_DEDUP = (
    '''"""Question dedup: one group per normalized question, the shortest complete one."""

SEED = $seed
REQUIRE_BOXED = True
'''
    + _SHUFFLE
    + _PACK
    + _MESSAGES
    + _COMPLETE
    + """

def _key(group):
    question = _question(group["trajectories"][0]) if group["trajectories"] else ""
    return " ".join(question.lower().split())


async def select_trajectories(candidate_inventory, select_size, judge):
    groups = _seeded_groups(candidate_inventory, SEED)
    quality = {g["candidate_id"]: (_group_faults(g, REQUIRE_BOXED) > 0, _mean_tokens(g)) for g in groups}
    best = {}
    for group in sorted(groups, key=lambda g: quality[g["candidate_id"]]):  # ties keep the seeded order
        best.setdefault(_key(group), group["candidate_id"])
    kept_ids = set(best.values())
    kept = [g for g in groups if g["candidate_id"] in kept_ids]
    repeats = sorted((g for g in groups if g["candidate_id"] not in kept_ids), key=lambda g: quality[g["candidate_id"]])
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
    groups = _seeded_groups(candidate_inventory, SEED)
    quota = min(select_size, int(SHARE * select_size + 0.5))
    preferred, taken = [], 0
    for group in groups:
        if group["domain"] == TARGET_DOMAIN and taken + len(group["trajectories"]) <= quota:
            preferred.append(group)
            taken += len(group["trajectories"])
    chosen = {g["candidate_id"] for g in preferred}
    return _pack(preferred + [g for g in groups if g["candidate_id"] not in chosen], select_size)
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
        description="Literal repetition filter: drops groups whose think span has more than a threshold "
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
        "with format) and groups whose weakest trajectory projects above the threshold are kept; an "
        "unavailable answer is no evidence and falls back to the complete-target rule; tests whether "
        "wrong answers and wrong steps in the targets cost accuracy.",
        targets=("wrong_answer", "wrong_step", "missing_box"),
        template=_JUDGE_CORRECTNESS,
        parameters={"threshold": (0.5, 0.25, 0.75), "include_format": (False, True)},
    ),
    StrategyFamily(
        name="question_dedup",
        task=TASK,
        description="Question dedup: one group per normalized question text (lowercase, collapsed spaces), the "
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
        "is drawn at random from the remaining groups; tests whether matching the training mix to "
        "the objective's domain helps.",
        targets=("domain_mix",),
        template=_DOMAIN_ALIGNMENT,
        parameters={"target_domain": ("math", "code"), "share": (1.0, 0.8)},
    ),
    StrategyFamily(
        name="length_band",
        task=TASK,
        description="Length-band matched draw: largest-remainder quotas keep the pool's distribution over "
        "short/medium/long/over_cap bins, random within a bin; tests whether length shift, not quality, "
        "moves the score, and (without over_cap) whether over-cap targets hurt.",
        targets=("length_shift", "truncated", "meandering"),
        template=_LENGTH_BAND,
        parameters={"seed": (20240601, 7), "allow_over_cap": (False, True)},
    ),
    StrategyFamily(
        name="random",
        task=TASK,
        description="Seeded uniform random whole groups at seeds other than the reference's: measures "
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
    for member in CATALOG:
        if member.name == name:
            return member
    raise KeyError(f"no strategy family {name!r}{did_you_mean(name, [f.name for f in CATALOG])}")


def render(family: StrategyFamily, **choices: Any) -> str:
    """Source of one member: ``choices`` override the first allowed value of each parameter."""
    unknown = sorted(set(choices) - set(family.parameters))
    if unknown:
        hint = did_you_mean(unknown[0], list(family.parameters))
        raise KeyError(f"family {family.name!r} has no parameter {unknown[0]!r}{hint}")
    for key, value in choices.items():
        if value not in family.parameters[key]:
            raise ValueError(
                f"family {family.name!r}: {key}={value!r} is not an allowed value; "
                f"choose one of {list(family.parameters[key])}"
            )
    values = {key: allowed[0] for key, allowed in family.parameters.items()} | choices
    return family.render(**values)  # string.Template.substitute over repr() of each value
