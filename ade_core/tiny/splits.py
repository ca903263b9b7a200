"""Split builders (used for real MATH/OpenThoughts files too): largest-remainder quotas,
stratified seeded sampling, and a seeded pool builder with per-group reservoir sampling."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

T = TypeVar("T")
K = TypeVar("K", bound=Hashable)


def largest_remainder(weights: Mapping[K, float], total: int) -> dict[K, int]:
    """Integer counts summing to ``total``, proportional to ``weights`` (Hamilton's method; ties by key order)."""
    if total < 0 or not weights or any(w < 0 for w in weights.values()) or sum(weights.values()) <= 0:
        raise ValueError(f"need non-negative weights with a positive sum and total >= 0 (got {dict(weights)}, {total})")
    mass = sum(weights.values())
    exact = {key: total * w / mass for key, w in weights.items()}
    counts = {key: int(value) for key, value in exact.items()}
    order = sorted(exact, key=lambda key: (-(exact[key] - counts[key]), list(weights).index(key)))
    for key in order[: total - sum(counts.values())]:
        counts[key] += 1
    return counts


def stratified_sample(
    rows: Sequence[T], stratum: Callable[[T], K], target: Mapping[K, float], size: int, seed: int
) -> list[T]:
    """``size`` rows whose strata follow ``target`` proportions (as MATH-S matches MATH-500's
    subject x level counts): largest-remainder quotas, seeded sampling inside each stratum."""
    by_stratum: dict[K, list[T]] = {}
    for row in rows:
        by_stratum.setdefault(stratum(row), []).append(row)
    quotas = largest_remainder({k: w for k, w in target.items() if w > 0}, size)
    rng = random.Random(seed)
    chosen: list[T] = []
    for key, quota in quotas.items():
        available = by_stratum.get(key, [])
        if len(available) < quota:
            raise ValueError(f"stratum {key!r} has {len(available)} rows, quota needs {quota}")
        chosen += rng.sample(available, quota)
    return chosen


@dataclass(frozen=True)
class PoolReport:
    """What a pool build found and took: availability and realized counts per group."""

    available: dict[str, int]
    allocated: dict[str, int]
    realized: dict[str, int]


def build_pool(
    rows: Sequence[Mapping[str, Any]],
    group_of: Callable[[Mapping[str, Any]], str],
    weights: Mapping[str, float],
    size: int,
    seed: int,
) -> tuple[list[Mapping[str, Any]], PoolReport]:
    """Allocate ``size`` rows across groups by largest remainder, reservoir-sample each group with its own
    seeded stream, then shuffle the pool with the seed (paper Appendix D.1)."""
    allocated = largest_remainder(dict(weights), size)
    reservoirs: dict[str, list[Mapping[str, Any]]] = {g: [] for g in allocated}
    seen: Counter[str] = Counter()
    streams = {g: random.Random(f"{seed}/{g}") for g in allocated}
    for row in rows:
        group = group_of(row)
        if group not in allocated:
            continue
        seen[group] += 1
        want, reservoir = allocated[group], reservoirs[group]
        if len(reservoir) < want:
            reservoir.append(row)
        else:
            slot = streams[group].randrange(seen[group])
            if slot < want:
                reservoir[slot] = row
    short = {g: (seen[g], n) for g, n in allocated.items() if seen[g] < n}
    if short:
        raise ValueError(f"groups with fewer rows than allocated (available, allocated): {short}")
    pool = [row for g in allocated for row in reservoirs[g]]
    random.Random(seed).shuffle(pool)
    realized = Counter(group_of(r) for r in pool)
    report = PoolReport({g: seen[g] for g in allocated}, dict(allocated), {g: realized[g] for g in allocated})
    return pool, report
