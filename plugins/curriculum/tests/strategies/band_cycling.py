"""A curriculum written from the task contract alone: foundation / bridge / challenge bands cycled in
four-step blocks, unseen problems first, then the least-used, with one fixed tie order.

Levels 0-2 are the foundation band, 3 the bridge, 4-5 the challenge. Once every problem has been
seen, a foundation step followed by a bridge step reserves a share of both for one subject, cycling
through the subjects that are usually weakest. It reads only source_order, problem_id, subject and
level, and never calls judge_batch.
"""

BANDS = {0: "foundation", 1: "foundation", 2: "foundation", 3: "bridge", 4: "challenge", 5: "challenge"}
BLOCKS = (
    ("foundation", "bridge", "challenge", "bridge"),
    ("bridge", "challenge", "bridge", "foundation"),
    ("challenge", "bridge", "foundation", "bridge"),
    ("bridge", "foundation", "bridge", "challenge"),
)
FOCUS = ("Counting & Probability", "Geometry", "Intermediate Algebra", "Precalculus")
FOCUS_SLOTS = 36


def _tie_order(ids, seed):
    order = list(ids)
    state = seed
    for index in range(len(order) - 1, 0, -1):
        state = (1103515245 * state + 12345) % 2147483648
        other = state % (index + 1)
        order[index], order[other] = order[other], order[index]
    return {pid: rank for rank, pid in enumerate(order)}


def _pick(pool, slots, uses, rank, subject_of):
    """Unseen problems first (one per subject before the rest), then the least used; fixed ties."""
    chosen = []
    unseen = sorted((pid for pid in pool if uses[pid] == 0), key=rank.get)
    firsts = {}
    for pid in unseen:
        firsts.setdefault(subject_of[pid], pid)
    for pid in sorted(firsts.values(), key=rank.get):
        if len(chosen) < slots:
            chosen.append(pid)
    taken = set(chosen)
    for pid in sorted(pool, key=lambda p: (uses[p], rank[p])):
        if len(chosen) == slots:
            break
        if pid not in taken:
            chosen.append(pid)
            taken.add(pid)
    return chosen


async def build_curriculum(candidate_inventory, total_steps, prompts_per_step, judge_batch):
    rows = sorted(candidate_inventory, key=lambda row: (row["source_order"], row["problem_id"]))
    subject_of = {row["problem_id"]: row["subject"] for row in rows}
    band_of = {row["problem_id"]: BANDS[min(5, max(0, row["level"]))] for row in rows}
    rank = _tie_order([row["problem_id"] for row in rows], 42)
    members = {
        band: [pid for pid in subject_of if band_of[pid] == band] for band in ("foundation", "bridge", "challenge")
    }
    bands = [BLOCKS[(step // 4) % 4][step % 4] for step in range(total_steps)]
    for step, band in enumerate(bands):  # a band too small for a step borrows the next one's problems
        if len(members[band]) < prompts_per_step:
            bands[step] = max(members, key=lambda name: len(members[name]))
    uses = {pid: 0 for pid in subject_of}
    schedule, focus_index, carried = [], 0, None
    for step, band in enumerate(bands):
        focus = carried
        carried = None
        everything_seen = all(count > 0 for count in uses.values())
        if (
            focus is None
            and everything_seen
            and band == "foundation"
            and step + 1 < total_steps
            and bands[step + 1] == "bridge"
        ):
            focus = FOCUS[focus_index % len(FOCUS)]
            focus_index += 1
            carried = focus
        pool = members[band]
        if focus is not None:
            mine = [pid for pid in pool if subject_of[pid] == focus]
            reserved = sorted(mine, key=lambda p: (uses[p], rank[p]))[: min(FOCUS_SLOTS, prompts_per_step)]
            others = [pid for pid in pool if subject_of[pid] != focus]
            ids = reserved + _pick(others, prompts_per_step - len(reserved), uses, rank, subject_of)
        else:
            ids = _pick(pool, prompts_per_step, uses, rank, subject_of)
        for pid in ids:
            uses[pid] += 1
        schedule.append(ids)
    return schedule
