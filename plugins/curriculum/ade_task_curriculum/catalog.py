"""Strategy families of the Curriculum task: schedulers with declared parameters.

Each template is a complete ``build_curriculum`` once its ``$name`` fields are filled. They share one
selection rule — least-used first, ties broken by a fixed seeded order — so a family differs from
another only in which problems each step may take. ``hardest_only`` is a negative control: it trains
on the hardest levels alone, where most rollout groups are all wrong and carry no outcome gradient.
"""

from __future__ import annotations

from ade_core import StrategyFamily

TASK = "curriculum"

# Shared text: the fixed tie order and the least-used pick.
_PICK = """

def _tie_rank(rows, seed):
    order = [row["problem_id"] for row in sorted(rows, key=lambda row: (row["source_order"], row["problem_id"]))]
    state = seed
    for index in range(len(order) - 1, 0, -1):
        state = (1103515245 * state + 12345) % 2147483648
        other = state % (index + 1)
        order[index], order[other] = order[other], order[index]
    return {pid: rank for rank, pid in enumerate(order)}


def _least_used(pool, slots, uses, rank, limit=None):
    # The ``slots`` least-used problems of ``pool`` (fixed ties), skipping any used ``limit`` times.
    ranked = sorted(pool, key=lambda pid: (uses[pid], rank[pid]))
    if limit is not None:
        fresh = [pid for pid in ranked if uses[pid] < limit]
        if len(fresh) >= slots:
            ranked = fresh
    chosen = ranked[:slots]
    for pid in chosen:
        uses[pid] += 1
    return chosen


def _fill(primary, everything, slots, uses, rank, limit=None):
    # Least-used of ``primary``, topped up from the rest of ``everything`` when ``primary`` is too small.
    chosen = _least_used(primary, min(slots, len(primary)), uses, rank, limit)
    if len(chosen) < slots:
        taken = set(chosen)
        chosen += _least_used([p for p in everything if p not in taken], slots - len(chosen), uses, rank)
    return chosen
"""

_EASY_TO_HARD = (
    '''"""Easy to hard: the admissible levels widen from the easiest to all of them over the first PACE of training;
each step also revisits already-seen problems for a REVIEW share of its slots."""

PACE = $pace
REVIEW = $review
SEED = 7
'''
    + _PICK
    + """

async def build_curriculum(candidate_inventory, total_steps, prompts_per_step, judge_batch):
    rank = _tie_rank(candidate_inventory, SEED)
    levels = sorted({row["level"] for row in candidate_inventory})
    everything = [row["problem_id"] for row in candidate_inventory]
    level_of = {row["problem_id"]: row["level"] for row in candidate_inventory}
    uses = {pid: 0 for pid in everything}
    schedule = []
    for step in range(total_steps):
        progress = min(1.0, (step + 1) / max(1.0, PACE * total_steps))
        top = levels[min(len(levels) - 1, int(progress * (len(levels) - 1) + 1e-9))]
        admissible = [pid for pid in everything if level_of[pid] <= top]
        review = int(REVIEW * prompts_per_step)
        seen = [pid for pid in admissible if uses[pid] > 0]
        ids = _least_used(seen, min(review, len(seen)), uses, rank)
        taken = set(ids)
        ids += _fill([p for p in admissible if p not in taken], [p for p in everything if p not in taken],
                     prompts_per_step - len(ids), uses, rank)
        schedule.append(ids)
    return schedule
"""
)

_LEVEL_MATCHED = (
    '''"""In-loop-matched levels: only problems of the LEVELS the evaluation asks about, least-used first;
other levels only top up a step when those run short."""

LEVELS = $levels
SEED = 11
'''
    + _PICK
    + """

async def build_curriculum(candidate_inventory, total_steps, prompts_per_step, judge_batch):
    rank = _tie_rank(candidate_inventory, SEED)
    everything = [row["problem_id"] for row in candidate_inventory]
    matched = [row["problem_id"] for row in candidate_inventory if row["level"] in LEVELS]
    uses = {pid: 0 for pid in everything}
    return [_fill(matched, everything, prompts_per_step, uses, rank) for _ in range(total_steps)]
"""
)

_FRONTIER = (
    '''"""Frontier targeting: problems the base model solves sometimes (base_pass_rate in [LOW, HIGH]), so every
rollout group is likely to mix right and wrong answers and carry an outcome gradient. Without the
base_pass_rate column, the level nearest the middle of the inventory stands in for the frontier."""

LOW = $low
HIGH = $high
SEED = 13
'''
    + _PICK
    + """

async def build_curriculum(candidate_inventory, total_steps, prompts_per_step, judge_batch):
    rank = _tie_rank(candidate_inventory, SEED)
    everything = [row["problem_id"] for row in candidate_inventory]
    if all("base_pass_rate" in row for row in candidate_inventory):
        closeness = {row["problem_id"]: abs(row["base_pass_rate"] - (LOW + HIGH) / 2) for row in candidate_inventory}
        frontier = [row["problem_id"] for row in candidate_inventory if LOW <= row["base_pass_rate"] <= HIGH]
    else:
        levels = sorted(row["level"] for row in candidate_inventory)
        middle = levels[len(levels) // 2]
        closeness = {row["problem_id"]: abs(row["level"] - middle) for row in candidate_inventory}
        frontier = [row["problem_id"] for row in candidate_inventory if row["level"] == middle]
    nearest = sorted(everything, key=lambda pid: (closeness[pid], rank[pid]))
    uses = {pid: 0 for pid in everything}
    return [_fill(frontier, nearest, prompts_per_step, uses, rank) for _ in range(total_steps)]
"""
)

_ROUND_ROBIN = (
    '''"""Subject round-robin: every step spreads its slots evenly over the subjects (the subject order rotates
with the step), least-used first within a subject."""

SEED = $seed
'''
    + _PICK
    + """

async def build_curriculum(candidate_inventory, total_steps, prompts_per_step, judge_batch):
    rank = _tie_rank(candidate_inventory, SEED)
    everything = [row["problem_id"] for row in candidate_inventory]
    subjects = sorted({row["subject"] for row in candidate_inventory})
    by_subject = {s: [row["problem_id"] for row in candidate_inventory if row["subject"] == s] for s in subjects}
    uses = {pid: 0 for pid in everything}
    schedule = []
    for step in range(total_steps):
        order = subjects[step % len(subjects):] + subjects[:step % len(subjects)]
        share, extra = divmod(prompts_per_step, len(subjects))
        ids = []
        for position, subject in enumerate(order):
            wanted = share + (1 if position < extra else 0)
            pool = [pid for pid in by_subject[subject] if pid not in ids]
            ids += _least_used(pool, min(wanted, len(pool)), uses, rank)
        taken = set(ids)
        ids += _least_used([p for p in everything if p not in taken], prompts_per_step - len(ids), uses, rank)
        schedule.append(ids)
    return schedule
"""
)

_BAND_CYCLING = (
    '''"""Band cycling with reuse limits: foundation (levels 0-2), bridge (3) and challenge (4-5) steps in the
repeating ORDER, least-used first within the band, a problem reused at most MAX_REUSE times while the band
has others left."""

ORDER = $order
MAX_REUSE = $max_reuse
SEED = 17
BANDS = {"f": (0, 1, 2), "b": (3,), "c": (4, 5)}
'''
    + _PICK
    + """

async def build_curriculum(candidate_inventory, total_steps, prompts_per_step, judge_batch):
    rank = _tie_rank(candidate_inventory, SEED)
    everything = [row["problem_id"] for row in candidate_inventory]
    members = {band: [row["problem_id"] for row in candidate_inventory if row["level"] in levels]
               for band, levels in BANDS.items()}
    uses = {pid: 0 for pid in everything}
    schedule = []
    for step in range(total_steps):
        band = ORDER[step % len(ORDER)]
        schedule.append(_fill(members[band], everything, prompts_per_step, uses, rank, MAX_REUSE))
    return schedule
"""
)

_HARDEST_ONLY = (
    '''"""Negative control: the hardest LEVELS only, least-used first; most rollout groups are all wrong."""

LEVELS = $levels
SEED = 19
'''
    + _PICK
    + """

async def build_curriculum(candidate_inventory, total_steps, prompts_per_step, judge_batch):
    rank = _tie_rank(candidate_inventory, SEED)
    everything = [row["problem_id"] for row in candidate_inventory]
    hardest = [row["problem_id"] for row in candidate_inventory if row["level"] in LEVELS]
    uses = {pid: 0 for pid in everything}
    level_of = {row["problem_id"]: row["level"] for row in candidate_inventory}
    by_level = sorted(everything, key=lambda pid: -level_of[pid])
    return [_fill(hardest, by_level, prompts_per_step, uses, rank) for _ in range(total_steps)]
"""
)

CATALOG: tuple[StrategyFamily, ...] = (
    StrategyFamily(
        name="frontier",
        task=TASK,
        description="Frontier targeting by base_pass_rate: problems the base solves sometimes, so rollout "
        "groups mix right and wrong answers and the outcome reward has a gradient.",
        targets=("zero_variance_groups", "wasted_steps"),
        template=_FRONTIER,
        parameters={"low": (0.25, 0.125), "high": (0.75, 0.875)},
    ),
    StrategyFamily(
        name="level_matched",
        task=TASK,
        description="In-loop-matched levels: train on the levels the evaluation asks about, least-used first.",
        targets=("level_mismatch",),
        template=_LEVEL_MATCHED,
        parameters={"levels": ((1, 2, 3), (2, 3), (1, 2, 3, 4))},
    ),
    StrategyFamily(
        name="easy_to_hard",
        task=TASK,
        description="Easy to hard by level: the admissible levels widen over training, with a review share of "
        "problems already seen.",
        targets=("early_all_wrong_groups", "forgetting"),
        template=_EASY_TO_HARD,
        parameters={"pace": (0.75, 0.5, 1.0), "review": (0.25, 0.0)},
    ),
    StrategyFamily(
        name="subject_round_robin",
        task=TASK,
        description="Subject round-robin: every step spreads its slots evenly over the subjects.",
        targets=("subject_imbalance",),
        template=_ROUND_ROBIN,
        parameters={"seed": (23, 29)},
    ),
    StrategyFamily(
        name="band_cycling",
        task=TASK,
        description="Band cycling with reuse limits: foundation, bridge and challenge steps in a fixed order.",
        targets=("coverage", "reuse"),
        template=_BAND_CYCLING,
        parameters={"order": ("fbcb", "fbfbc", "ffbc"), "max_reuse": (2, 4, 8)},
    ),
    StrategyFamily(
        name="hardest_only",
        task=TASK,
        description="Negative control: the hardest levels only, where most groups are all wrong.",
        targets=("control",),
        template=_HARDEST_ONLY,
        parameters={"levels": ((5,), (4, 5))},
    ),
)
