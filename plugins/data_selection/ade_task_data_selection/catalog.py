"""Strategy families of the Data Selection task: named selection mechanisms and their parameter spaces.

Each family's template is a complete strategy module once its ``$name`` fields are filled. Every
member ranks all candidate groups (the ones its mechanism keeps first, then the rest by the
family's own signal) and packs whole groups in that order to exactly ``select_size`` trajectories,
so a strict filter never returns fewer (paper Appendix D.1: no split groups, no post-hoc subset).
The shared pieces below are plain source text joined into each template.
"""

from __future__ import annotations

from typing import Any

from ade_core import StrategyFamily
from ade_core.errors import did_you_mean

TASK = "data_selection"

_SHUFFLE = """

def _shuffled(items, seed):
    # Fisher-Yates with a linear congruential generator (no `random` import is allowed).
    items = list(items)
    state = seed
    for index in range(len(items) - 1, 0, -1):
        state = (1664525 * state + 1013904223) % 4294967296
        swap = state % (index + 1)
        items[index], items[swap] = items[swap], items[index]
    return items


def _seeded_groups(candidate_inventory, seed):
    return _shuffled(sorted(candidate_inventory, key=lambda group: group["candidate_id"]), seed)
"""

_PACK = """

def _first_fit(ranked, select_size, reach):
    chosen = []
    for index, group in enumerate(ranked):
        ids = [t["trajectory_id"] for t in group["trajectories"]]
        room = select_size - len(chosen)
        if len(ids) <= room and (reach is None or (reach[index + 1] >> (room - len(ids))) & 1):
            chosen.extend(ids)
        if len(chosen) == select_size:
            break
    return chosen


def _pack(ranked, select_size):
    # Whole groups in rank order to exactly select_size trajectories. When plain first-fit falls
    # short (group sizes), skip only groups whose taking would leave no exact fill among later ones.
    chosen = _first_fit(ranked, select_size, None)
    if len(chosen) == select_size:
        return chosen
    mask = (2 << select_size) - 1
    reach = [1] * (len(ranked) + 1)  # bit s of reach[i]: groups i.. can hold exactly s trajectories
    for index in range(len(ranked) - 1, -1, -1):
        later = reach[index + 1]
        reach[index] = (later | (later << len(ranked[index]["trajectories"]))) & mask
    if not (reach[0] >> select_size) & 1:
        total = sum(len(group["trajectories"]) for group in ranked)
        raise ValueError(f"no set of whole groups holds exactly {select_size} of the {total} trajectories")
    return _first_fit(ranked, select_size, reach)
"""

_MESSAGES = """

def _texts(trajectory, role):
    texts = [m.get("content") for m in trajectory.get("messages", []) if m.get("role") == role]
    return [text for text in texts if isinstance(text, str)]


def _question(trajectory):
    return (_texts(trajectory, "user") or [""])[0]


def _assistant(trajectory):
    return (_texts(trajectory, "assistant") or [""])[-1]


def _think(text):
    # The think span: closed, or running to the end when the trajectory was cut at the cap.
    start = text.find("<think>")
    if start < 0:
        return ""
    end = text.find("</think>", start)
    return text[start + len("<think>") : end if end >= 0 else len(text)]
"""

_COMPLETE = """

def _boxed(answer):
    # Content of the last balanced \\\\boxed{...}, or None.
    start = answer.rfind("\\\\boxed{")
    if start < 0:
        return None
    depth = 1
    for index in range(start + len("\\\\boxed{"), len(answer)):
        depth += {"{": 1, "}": -1}.get(answer[index], 0)
        if depth == 0:
            return answer[start + len("\\\\boxed{") : index]
    return None


def _faults(trajectory, domain, require_boxed):
    # Why the trajectory is not a complete training target; empty when it is one.
    text = _assistant(trajectory)
    faults = []
    opened, closed = text.find("<think>"), text.find("</think>")
    if text.count("<think>") != 1 or text.count("</think>") != 1 or closed < opened:
        faults.append("think_span")
    answer = text.split("</think>", 1)[1].strip() if "</think>" in text else ""
    if not answer:
        faults.append("empty_answer")
    elif require_boxed and domain == "math" and not (_boxed(answer) or "").strip():
        faults.append("missing_box")
    if trajectory.get("length_bin") == "over_cap" or trajectory.get("over_cap") is True:
        faults.append("over_cap")
    return faults


def _group_faults(group, require_boxed):
    return sum(len(_faults(t, group["domain"], require_boxed)) for t in group["trajectories"])


def _mean_tokens(group):
    counts = [t.get("token_count", 0) for t in group["trajectories"]]
    return sum(counts) / len(counts) if counts else 0
"""

_BINS = """

BIN_ORDER = ("short", "medium", "long", "over_cap")


def _truncated(trajectory):
    text = _assistant(trajectory)
    return trajectory.get("over_cap") is True or ("<think>" in text and "</think>" not in text)


def _group_bins(candidate_inventory):
    # Each group's length bin (its longest trajectory's). The inventory's length_bin where given;
    # otherwise over_cap when flagged or when the think span never closes (cut at the cap), and
    # tertiles of the pool's token_count for the rest.
    counts = sorted(
        t.get("token_count", 0) for g in candidate_inventory for t in g["trajectories"] if not _truncated(t)
    )
    cuts = (counts[len(counts) // 3], counts[2 * len(counts) // 3]) if counts else (0, 0)
    bins = {}
    for group in candidate_inventory:
        worst = 0
        for trajectory in group["trajectories"]:
            label = trajectory.get("length_bin")
            if label not in BIN_ORDER:
                tokens = trajectory.get("token_count", 0)
                if _truncated(trajectory):
                    label = "over_cap"
                else:
                    label = "short" if tokens < cuts[0] else "medium" if tokens < cuts[1] else "long"
            worst = max(worst, BIN_ORDER.index(label))
        bins[group["candidate_id"]] = BIN_ORDER[worst]
    return bins
"""

_JUDGE = """

MAX_ITEMS_PER_CALL = 4096
MAX_CALLS = 64


async def _projected_scores(judge, requests):
    # One projected score per request; None where the judge gave no evidence. An unavailable answer,
    # a failed call or a request past the call quota is no evidence, never a zero; so is a fallback
    # answer, whose unassessed dimensions stand at a default level rather than a measurement.
    scores = [None] * len(requests)
    starts = list(range(0, len(requests), MAX_ITEMS_PER_CALL))[:MAX_CALLS]
    for start in starts:
        batch = requests[start : start + MAX_ITEMS_PER_CALL]
        try:
            answers = await judge(batch)
        except Exception:
            continue
        if not isinstance(answers, list) or len(answers) != len(batch):
            continue
        for offset, answer in enumerate(answers):
            if isinstance(answer, dict) and answer.get("status") == "completed" and not answer.get("fallback"):
                score = answer.get("projected_score")
                if isinstance(score, (int, float)) and not isinstance(score, bool):
                    scores[start + offset] = float(score)
    return scores
"""

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

CATALOG: tuple[StrategyFamily, ...] = (
    StrategyFamily(
        name="random",
        task=TASK,
        description="Seeded uniform random whole groups: measures seed-to-seed variance of the reference draw, "
        "the noise floor any quality signal has to beat.",
        targets=("selection_variance",),
        template=_RANDOM,
        parameters={"seed": (20240601, 1, 2)},
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
