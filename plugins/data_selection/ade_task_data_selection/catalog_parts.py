"""Source fragments shared by the Data Selection catalog's templates (plain text joined into each).

Strategies may import only ``json``, so every template carries its helpers as source; these are
those helpers, written once.
"""

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


def _seeded_rows(candidate_inventory, seed):
    return _shuffled(sorted(candidate_inventory, key=lambda row: row["candidate_id"]), seed)
"""

_PACK = """

def _first_fit(ranked, select_size, reach):
    chosen = []
    for index, row in enumerate(ranked):
        ids = list(row["trajectory_ids"])
        room = select_size - len(chosen)
        if len(ids) <= room and (reach is None or (reach[index + 1] >> (room - len(ids))) & 1):
            chosen.extend(ids)
        if len(chosen) == select_size:
            break
    return chosen


def _pack(ranked, select_size):
    # Whole rows in rank order to exactly select_size trajectory ids. When plain first-fit falls
    # short (rows of several ids), skip only rows whose taking would leave no exact fill among later ones.
    chosen = _first_fit(ranked, select_size, None)
    if len(chosen) == select_size:
        return chosen
    mask = (2 << select_size) - 1
    reach = [1] * (len(ranked) + 1)  # bit s of reach[i]: rows i.. can hold exactly s trajectories
    for index in range(len(ranked) - 1, -1, -1):
        later = reach[index + 1]
        reach[index] = (later | (later << len(ranked[index]["trajectory_ids"]))) & mask
    if not (reach[0] >> select_size) & 1:
        total = sum(len(row["trajectory_ids"]) for row in ranked)
        raise ValueError(f"no set of whole rows holds exactly {select_size} of the {total} trajectories")
    return _first_fit(ranked, select_size, reach)
"""

_MESSAGES = """

def _texts(row, role):
    texts = [m.get("content") for m in row.get("messages", []) if m.get("role") == role]
    return [text for text in texts if isinstance(text, str)]


def _question(row):
    return (_texts(row, "user") or [""])[0]


def _assistant(row):
    return (_texts(row, "assistant") or [""])[-1]


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


def _faults(row, require_boxed):
    # Why the row's trajectory is not a complete training target; empty when it is one.
    text = _assistant(row)
    faults = []
    opened, closed = text.find("<think>"), text.find("</think>")
    if text.count("<think>") != 1 or text.count("</think>") != 1 or closed < opened:
        faults.append("think_span")
    answer = text.split("</think>", 1)[1].strip() if "</think>" in text else ""
    if not answer:
        faults.append("empty_answer")
    elif require_boxed and row.get("domain") == "math" and not (_boxed(answer) or "").strip():
        faults.append("missing_box")
    if row.get("over_cap") is True:
        faults.append("over_cap")
    return faults


def _fault_count(row, require_boxed):
    return len(_faults(row, require_boxed))
"""

_BINS = """

# The inventory's three length bins, then over_cap: the strategy's own band for rows cut at the cap.
BIN_ORDER = ("le_4096", "4097_8192", "8193_16384", "over_cap")


def _truncated(row):
    text = _assistant(row)
    return row.get("over_cap") is True or ("<think>" in text and "</think>" not in text)


def _row_bins(candidate_inventory):
    # Each row's band: over_cap when flagged or when the think span never closes (cut at the cap);
    # otherwise the inventory's length_bin where given, and tertiles of the pool's token_count if not.
    counts = sorted(r.get("token_count", 0) for r in candidate_inventory if not _truncated(r))
    cuts = (counts[len(counts) // 3], counts[2 * len(counts) // 3]) if counts else (0, 0)
    bins = {}
    for row in candidate_inventory:
        label = row.get("length_bin")
        if _truncated(row):
            label = "over_cap"
        elif label not in BIN_ORDER:
            tokens = row.get("token_count", 0)
            label = BIN_ORDER[0] if tokens < cuts[0] else BIN_ORDER[1] if tokens < cuts[1] else BIN_ORDER[2]
        bins[row["candidate_id"]] = label
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
