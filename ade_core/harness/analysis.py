"""Blinded analysis of a packaged Trial (paper App. C.5): review design -> record review -> analysis.

The Analyzer first designs a record-level review. The Harness validates each request against
the task's review pools (pool, selection mode, ids, coverage), binds it to exact records, and
only then calls the Review Worker, whose judgments must cover exactly the bound records. The
Analyzer then interprets the evidence with the frozen review. An unavailable step stays
explicit in the Trial record; the Trial still completes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ade_core.errors import did_you_mean
from ade_core.harness.core import AgentFailed, HarnessRefusal
from ade_core.harness.views import analyzer_view, review_worker_view, reviewable_records
from ade_core.schemas.deliveries import Analysis, ReviewDesign, ReviewJudgments
from ade_core.schemas.trial import Trial, TrialRecords, Unavailable
from ade_core.schemas.views import BoundRecords
from ade_core.store import Transition

if TYPE_CHECKING:
    from ade_core.harness.core import Harness

# Sec 4 / App. C.5: review covers whole pools (all selected examples, all in-loop responses), so
# nothing bound is ever cut; a large review reaches the Review Worker in batches of this many records.
REVIEW_BATCH_RECORDS = 500


def bind_review(h: Harness, trial: Trial, design: ReviewDesign) -> list[BoundRecords]:
    """Validate every request against the task's review pools and bind it to records; refuse otherwise."""
    pools = {p.name: p for p in h.review_pools}
    families = reviewable_records(trial)
    problems, bound = [], []
    for index, request in enumerate(design.requests):
        pool = pools.get(request.pool)
        if pool is None:
            problems.append(f"request {index}: unknown review pool {request.pool!r}{did_you_mean(request.pool, pools)}")
            continue
        if request.selection not in pool.selections:
            problems.append(
                f"request {index}: pool {pool.name!r} allows {list(pool.selections)}, not {request.selection!r}"
            )
            continue
        rows = families.get(pool.record)
        if not rows:
            problems.append(f"request {index}: the package has no {pool.record!r} records to review")
            continue
        if request.selection == "all":
            chosen, covered = rows, 1.0
        elif request.selection == "records":
            known = {str(r["id"]) for r in rows}
            unknown = sorted(set(request.ids) - known)
            if unknown:
                problems.append(f"request {index}: unknown record ids {unknown[:5]}")
                continue
            chosen = [r for r in rows if str(r["id"]) in set(request.ids)]
            covered = len(chosen) / len(rows)
        else:
            group_key = pool.group_key
            assert group_key is not None, f"pool {pool.name!r} allows 'groups', so it names a group_key"
            groups = {str(r.get(group_key)) for r in rows}
            unknown = sorted(set(request.ids) - groups)
            if unknown:
                problems.append(f"request {index}: unknown {group_key} groups {unknown[:5]}")
                continue
            chosen = [r for r in rows if str(r.get(group_key)) in set(request.ids)]
            covered = len(set(request.ids)) / len(groups)
        if covered + 1e-9 < pool.min_coverage:
            problems.append(
                f"request {index}: covers {covered:.0%} of pool {pool.name!r}, which requires {pool.min_coverage:.0%}"
            )
            continue
        bound.append(
            BoundRecords(
                request=index,
                pool=pool.name,
                question=request.question,
                records=tuple(chosen),
            )
        )
    reviewable = [pool.name for pool in h.review_pools if families.get(pool.record)]
    if not design.requests and reviewable:
        problems.append(
            f"the design requests no review, but pools {reviewable} hold this Trial's records; request at least one, "
            "covering each pool as its coverage rule requires"
        )
    if problems:
        raise HarnessRefusal("malformed", problems)
    return bound


def pool_sizes(h: Harness, trial: Trial) -> dict[str, int]:
    """How many records each review pool of ``trial``'s package holds (the denominators of coverage)."""
    families = reviewable_records(trial)
    return {p.name: len(families[p.record]) for p in h.review_pools if families.get(p.record)}


def review_batches(bound: list[dict[str, Any]], size: int = REVIEW_BATCH_RECORDS) -> list[list[dict[str, Any]]]:
    """The bound requests cut into Review Worker batches of at most ``size`` records, in order; a
    request larger than a batch is split across batches (its records keep their request index)."""
    batches: list[list[dict[str, Any]]] = [[]]
    room = size
    for request in bound:
        records = list(request["records"])
        while records:
            if room == 0:
                batches.append([])
                room = size
            batches[-1].append({**request, "records": records[:room]})
            records, room = records[room:], room - len(records[:room])
    return [batch for batch in batches if batch]


def review_coverage(bound: list[dict[str, Any]], judgments: list[dict[str, Any]], sizes: dict[str, int]):
    """Per pool: records in the package, records judged, and the fraction, counted from the judgments."""
    pool_of = {b["request"]: b["pool"] for b in bound}
    judged: dict[str, set[str]] = {}
    for judgment in judgments:
        judged.setdefault(pool_of[judgment["request"]], set()).add(str(judgment["record_id"]))
    return {
        pool: {
            "records": sizes.get(pool, 0),
            "reviewed": len(ids),
            "coverage": len(ids) / sizes[pool] if sizes.get(pool) else 0.0,
        }
        for pool, ids in sorted(judged.items())
    }


def check_judgments(bound: list[dict[str, Any]], judgments: ReviewJudgments) -> None:
    """Judgments must cover exactly the bound records, each once."""
    expected = {(b["request"], str(r["id"])) for b in bound for r in b["records"]}
    given = [(j.request, j.record_id) for j in judgments.judgments]
    problems = []
    foreign = sorted(set(given) - expected)
    if foreign:
        problems.append(f"judgments of records that were not bound: {foreign[:5]}")
    missing = sorted(expected - set(given))
    if missing:
        problems.append(f"bound records left unjudged: {missing[:5]}")
    if len(given) != len(set(given)):
        problems.append("a record was judged more than once")
    if problems:
        raise HarnessRefusal("malformed", problems)


def check_references(trial: Trial, analysis: Analysis) -> None:
    """An observation may cite only this Trial and its package's record families."""
    families = set(reviewable_records(trial))
    allowed = {f"trial:{trial.trial_id}"} | {f"record:{trial.trial_id}/{name}" for name in families}
    bad = sorted({ref for o in analysis.observations for ref in o.references} - allowed)
    if bad:
        raise HarnessRefusal(
            "malformed", [f"references outside this Trial's evidence: {bad[:5]}; allowed {sorted(allowed)}"]
        )


def _with_records(h: Harness, tx: Transition, trial: Trial, **records: Any) -> Trial:
    updated = trial.model_copy(update={"records": trial.records.model_copy(update=records)})
    updated = Trial.model_validate(updated.model_dump(mode="json"))
    tx.put("trial", trial.trial_id, updated)
    return updated


def _finished(trial: Trial) -> str:
    return "completed" if getattr(trial.package, "status", None) == "completed" else "evaluation_missing"


async def analyze(h: Harness, trial: Trial, key: str) -> Trial:
    """Advance the analysis of ``trial`` by one committed step."""
    tid = trial.trial_id
    records: TrialRecords = trial.records
    method = h.method
    if records.review_design is None and not method.review:  # Sec 4.3: methods without record review
        why = Unavailable(reason=f"research method {method.method} has no record review")
        if method.analysis:
            with h.transition("review_not_in_method", tid, {"method": method.method}) as tx:
                return _with_records(h, tx, trial, review_design=why, review=why)
        no_analysis = Unavailable(reason=f"research method {method.method} has no Analyzer")
        with h.transition("analysis_not_in_method", tid, {"method": method.method}) as tx:
            done = trial.model_copy(update={"status": _finished(trial)})
            return _with_records(h, tx, done, review_design=why, review=why, analysis=no_analysis)
    if records.review_design is None:

        async def bind_design(design: ReviewDesign) -> str:
            bound = bind_review(h, trial, design)
            return h.store.objects.put_json(
                {
                    "design": design.model_dump(mode="json"),
                    "bound": [b.model_dump(mode="json") for b in bound],
                    "pool_sizes": pool_sizes(h, trial),
                }
            )

        try:
            return await h.ask(
                "analyzer",
                f"{tid}#review-design",
                key=key,
                model=ReviewDesign,
                prepare=bind_design,
                view=lambda basis, fb: analyzer_view(h, f"{tid}#review-design", basis, fb, tid, "design"),
                accept=lambda tx, _, digest: _with_records(h, tx, trial, review_design=digest),
            )
        except AgentFailed as exc:
            why = Unavailable(reason=f"no review design: {exc}")
            with h.transition("review_unavailable", tid) as tx:
                return _with_records(h, tx, trial, review_design=why, review=why)
    if records.review is None:
        assert isinstance(records.review_design, str)
        stored = h.store.objects.read_json(records.review_design)
        if not stored["bound"]:
            with h.transition("review_skipped", tid) as tx:
                return _with_records(h, tx, trial, review=Unavailable(reason="the review design requested no review"))

        batches = review_batches(stored["bound"], REVIEW_BATCH_RECORDS)
        subjects = [f"{tid}#review" if i == 0 else f"{tid}#review/{i + 1}" for i in range(len(batches))]
        delivered = [h.accepted("review_worker", subject) for subject in subjects]
        index = next(i for i, payload in enumerate(delivered) if payload is None)  # one batch per committed step
        batch, subject = batches[index], subjects[index]

        async def check(judgments: ReviewJudgments) -> str:
            check_judgments(batch, judgments)
            if index < len(batches) - 1:
                return ""
            merged = [j for payload in delivered[:index] for j in payload["judgments"]]  # type: ignore[index]  # every batch before index has a committed payload
            merged += [j.model_dump(mode="json") for j in judgments.judgments]
            coverage = review_coverage(stored["bound"], merged, stored.get("pool_sizes", {}))
            return h.store.objects.put_json({"judgments": merged, "batches": len(batches), "coverage": coverage})

        def accept_batch(tx: Transition, _: ReviewJudgments, digest: str) -> Trial:
            if index < len(batches) - 1:
                return trial  # this batch's delivery is committed; the next step asks for the next one
            return _with_records(h, tx, trial, review=digest)

        try:
            return await h.ask(
                "review_worker",
                subject,
                key=key,
                model=ReviewJudgments,
                prepare=check,
                view=lambda basis, fb: review_worker_view(h, subject, basis, fb, tid, batch),
                accept=accept_batch,
            )
        except AgentFailed as exc:
            with h.transition("review_unavailable", tid) as tx:
                return _with_records(h, tx, trial, review=Unavailable(reason=f"no review: {exc}"))

    async def check_analysis(analysis: Analysis) -> str:
        check_references(trial, analysis)
        return h.store.objects.put_json(analysis.model_dump(mode="json"))

    def accept(tx: Transition, _: Analysis, digest: str) -> Trial:
        done = trial.model_copy(update={"status": _finished(trial)})
        return _with_records(h, tx, done, analysis=digest)

    try:
        return await h.ask(
            "analyzer",
            f"{tid}#analysis",
            key=key,
            model=Analysis,
            prepare=check_analysis,
            view=lambda basis, fb: analyzer_view(h, f"{tid}#analysis", basis, fb, tid, "interpret"),
            accept=accept,
        )
    except AgentFailed as exc:
        with h.transition("analysis_unavailable", tid) as tx:
            done = trial.model_copy(update={"status": _finished(trial)})
            return _with_records(h, tx, done, analysis=Unavailable(reason=f"no analysis: {exc}"))
