"""Memory publication (paper App. C.7): Plan Memory first, then the single Run-Memory writer.

After a terminal Trial the Plan Summarizer proposes the Plan-Memory successor. The Harness
admits it (finding ids, source Trials, references), publishes the immutable version and, in
the same transition, enqueues the Trial's Run-Memory update under its persistent commit key.
A single writer takes the queue head only, asks the Run Summarizer to integrate it, and
publishes the Run-Memory version together with the dequeue. A crash between the Run
Summarizer's accepted delivery and publication replays that delivery (never re-asks); a key
already published is acknowledged, never merged twice. If a Summarizer cannot deliver, the
Harness publishes a mechanical update, so every terminal Trial still yields exactly one of each.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ade_core.harness.core import AgentFailed, HarnessRefusal
from ade_core.harness.snapshot import commit_key, latest_plan_memory
from ade_core.harness.views import plan_summarizer_view, run_summarizer_view
from ade_core.schemas.common import sha256_digest
from ade_core.schemas.deliveries import MemoryProposal, PlanSummary, ProposedFinding, RunSummary
from ade_core.schemas.memory import Finding, PlanMemory, RunMemory
from ade_core.schemas.trial import Trial, Unavailable
from ade_core.store import QueueEntry, Transition

if TYPE_CHECKING:
    from ade_core.harness.core import Harness

WRITER_KEY = "W"


def content_digest(memory: PlanMemory) -> str:
    """A memory version's digest without its commit position (which shifts when a run is replayed)."""
    return sha256_digest(memory.model_dump(mode="json", exclude={"revision"}))


def admit_findings(
    h: Harness, proposal: MemoryProposal, known: dict[str, Finding], prefix: str, allowed_trials: set[str]
) -> tuple[Finding, ...]:
    """Findings with Harness-assigned ids; refuse unknown ids, Trials or references."""
    problems: list[str] = []
    numbers = [
        int(fid.rsplit("F", 1)[1]) for fid in known if fid.startswith(prefix) and fid.rsplit("F", 1)[1].isdigit()
    ]
    next_number = max(numbers, default=0) + 1
    findings = []
    for item in proposal.findings:
        if item.finding_id is not None and item.finding_id not in known:
            problems.append(f"finding id {item.finding_id!r} is not in the parent memory or the update")
        foreign = sorted(set(item.source_trials) - allowed_trials)
        if foreign:
            problems.append(f"finding {item.statement[:40]!r} cites Trials it may not: {foreign}")
        for ref in item.references:
            kind, _, target = ref.partition(":")
            ok = (
                (kind == "trial" and target in allowed_trials)
                or (kind == "finding" and target in known)
                or (kind == "record" and target.split("/")[:-1] and "/".join(target.split("/")[:-1]) in allowed_trials)
            )
            if not ok:
                problems.append(f"reference {ref!r} names no evidence this memory may cite")
        finding_id = item.finding_id
        if finding_id is None:
            finding_id = f"{prefix}F{next_number}"
            next_number += 1
        findings.append(_finding(finding_id, item))
    if problems:
        raise HarnessRefusal("malformed", problems)
    return tuple(findings)


def _finding(finding_id: str, item: ProposedFinding) -> Finding:
    return Finding(
        finding_id=finding_id,
        statement=item.statement,
        source_trials=item.source_trials,
        scope=item.scope,
        status=item.status,
        assessment=item.assessment,
        references=item.references,
    )


def _plan_memory(
    h: Harness, trial: Trial, parent: PlanMemory, findings: tuple[Finding, ...], proposal: MemoryProposal, revision: int
) -> PlanMemory:
    sources = tuple(
        d for d in (trial.strategy_digest, trial.command_digest, trial.records.analysis) if isinstance(d, str)
    )
    return PlanMemory(
        plan_id=trial.plan_id,
        version=parent.version + 1,
        parent=parent.version,
        revision=revision,
        source_trials=(*parent.source_trials, trial.trial_id),
        source_digests=tuple(dict.fromkeys((*parent.source_digests, *sources))),
        findings=findings,
        contradictions=proposal.contradictions,
        open_questions=proposal.open_questions,
    )


def _publish_plan_memory(
    h: Harness, tx: Transition, trial: Trial, memory: PlanMemory, hypothesis: Any, summary_ref: Any
) -> Trial:
    key = f"{memory.plan_id}@v{memory.version}"
    tx.put("plan_memory", key, memory)
    tx.enqueue_run_memory_update(commit_key(trial.trial_id), key)
    conclusions = trial.conclusions.model_copy(update={"hypothesis": hypothesis})
    records = trial.records.model_copy(update={"plan_summary": summary_ref})
    updated = Trial.model_validate(
        trial.model_copy(update={"conclusions": conclusions, "records": records, "plan_memory": key}).model_dump(
            mode="json"
        )
    )
    tx.put("trial", trial.trial_id, updated)
    return updated


async def publish_plan_memory(h: Harness, trial: Trial, key: str) -> Trial:
    """The terminal Trial's one Plan-Memory update and its Run-Memory queue entry."""
    if trial.plan_memory is not None:
        return trial
    parent = latest_plan_memory(h.store, trial.plan_id)
    subject = f"{trial.trial_id}#plan-summary"
    known = {f.finding_id: f for f in parent.findings}
    allowed = set(parent.source_trials) | {trial.trial_id}
    prefix = f"{trial.plan_id}/"

    def accept(tx: Transition, summary: PlanSummary, _: object) -> Trial:
        findings = admit_findings(h, summary.memory, known, prefix, allowed)
        memory = _plan_memory(h, trial, parent, findings, summary.memory, tx.revision)
        summary_ref = h.store.objects.put_json(summary.model_dump(mode="json"))
        return _publish_plan_memory(h, tx, trial, memory, summary.hypothesis, summary_ref)

    if not h.method.summarizers:  # Sec 4.3: reduced methods keep deterministic outcome records
        why = Unavailable(reason=f"research method {h.method.method} has no Plan Summarizer")
        proposal = MemoryProposal(findings=(*_kept(parent), outcome_record(trial)), open_questions=())
        with h.transition("plan_memory_outcome_record", trial.trial_id, {"method": h.method.method}) as tx:
            findings = admit_findings(h, proposal, known, prefix, allowed)
            memory = _plan_memory(h, trial, parent, findings, proposal, tx.revision)
            return _publish_plan_memory(h, tx, trial, memory, why, why)
    try:
        return await h.ask(
            "plan_summarizer",
            subject,
            key=key,
            model=PlanSummary,
            accept=accept,
            view=lambda basis, fb: plan_summarizer_view(h, subject, basis, fb, trial.trial_id),
        )
    except AgentFailed as exc:
        why = Unavailable(reason=f"the Plan Summarizer did not deliver: {exc}")
        item = ProposedFinding(
            statement=f"{trial.trial_id} ended {trial.status}.",
            source_trials=(trial.trial_id,),
            references=(f"trial:{trial.trial_id}",),
        )
        proposal = MemoryProposal(findings=(*_kept(parent), item), open_questions=parent.open_questions)
        with h.transition("plan_memory_by_harness", trial.trial_id, {"reason": str(exc)}) as tx:
            findings = admit_findings(h, proposal, known, prefix, allowed)
            memory = _plan_memory(h, trial, parent, findings, proposal, tx.revision)
            return _publish_plan_memory(h, tx, trial, memory, why, why)


def outcome_record(trial: Trial) -> ProposedFinding:
    """A Trial's deterministic outcome: status, execution facts and scalar scores, nothing interpreted."""
    facts = [f"status {trial.status}"]
    if trial.failure:
        facts.append(f"failure: {trial.failure}")
    if not isinstance(trial.conclusions.realization, Unavailable):
        facts.append(f"realization {trial.conclusions.realization}")
    facts.append(f"{len(trial.build_rounds)} build round(s), {len(trial.attempts)} Engine attempt(s)")
    if isinstance(trial.scores, dict):
        facts.append("scores " + ", ".join(f"{k} {v:.4f}" for k, v in trial.scores.items()))
    if not isinstance(trial.conclusions.portfolio, Unavailable):
        facts.append(f"portfolio {trial.conclusions.portfolio}")
    return ProposedFinding(
        statement=f"Outcome of {trial.trial_id}: " + "; ".join(facts) + ".",
        source_trials=(trial.trial_id,),
        scope="outcome record (written by the Harness)",
        references=(f"trial:{trial.trial_id}",),
    )


def _kept(memory: PlanMemory | RunMemory) -> tuple[ProposedFinding, ...]:
    return tuple(ProposedFinding.kept(f) for f in memory.findings)


def run_memory_successor(h: Harness, head_key: str, pm_ref: str, proposal: MemoryProposal) -> RunMemory:
    """Admit the Run Summarizer's proposal as the successor of the latest Run Memory merging ``head_key``."""
    latest = h.store.latest_run_memory()
    assert latest is not None
    update = h.store.get_model("plan_memory", pm_ref)
    assert update is not None
    known = {f.finding_id: f for f in latest.findings} | {f.finding_id: f for f in update.findings}
    allowed = {t.key for t in h.store.list("trial")}
    findings = admit_findings(h, proposal, known, "R/", allowed)
    return RunMemory(
        version=latest.version + 1,
        parent=latest.version,
        revision=h.store.revision + 1,
        source_trials=tuple(dict.fromkeys((*latest.source_trials, *update.source_trials))),
        source_digests=tuple(dict.fromkeys((*latest.source_digests, content_digest(update)))),
        findings=findings,
        contradictions=proposal.contradictions,
        open_questions=proposal.open_questions,
        commit_keys=(*latest.commit_keys, head_key),
    )


def publish(h: Harness, head_key: str, memory: RunMemory) -> None:
    h.check_frozen()
    h.store.publish_run_memory(head_key, memory, details={"vt": h.clock.now()})
    h.crash.point(before=True)
    h.crash.point(before=False)
    h.notify()


async def merge_head(h: Harness, entry: QueueEntry) -> None:
    """Ask the Run Summarizer to integrate the queue head and publish the successor with the dequeue."""

    def accept(tx: Transition, summary: RunSummary, _: object) -> RunMemory:
        return run_memory_successor(h, entry.commit_key, entry.plan_memory_ref, summary.memory)

    if not h.method.summarizers:  # Sec 4.3: the Harness appends the outcome records
        publish(h, entry.commit_key, mechanical_run_memory(h, entry))
        return
    try:
        memory = await h.ask(
            "run_summarizer",
            entry.commit_key,
            key=WRITER_KEY,
            model=RunSummary,
            accept=accept,
            view=lambda basis, fb: run_summarizer_view(h, entry.commit_key, basis, fb, entry.plan_memory_ref),
        )
    except AgentFailed:  # the Harness merges mechanically: the update still lands exactly once
        memory = mechanical_run_memory(h, entry)
    publish(h, entry.commit_key, memory)


def mechanical_run_memory(h: Harness, entry: QueueEntry) -> RunMemory:
    """The Run-Memory successor that appends the update's new findings, written by the Harness."""
    latest = h.store.latest_run_memory()
    update = h.store.get_model("plan_memory", entry.plan_memory_ref)
    assert latest is not None and update is not None
    known = {f.finding_id for f in latest.findings}
    proposal = MemoryProposal(
        findings=(*_kept(latest), *(p for p in _kept(update) if p.finding_id not in known)),
        open_questions=latest.open_questions,
    )
    return run_memory_successor(h, entry.commit_key, entry.plan_memory_ref, proposal)


async def run_memory_writer(h: Harness, finished: Callable[[], bool], stopped: Callable[[], bool]) -> None:
    """The single Run-Memory writer: publish queue heads in FIFO order until ``finished()`` and the queue is empty."""
    await h.clock.checkpoint(WRITER_KEY)
    published = h.store.queue(status="published")
    if published:  # replay the last publication: acknowledged, never merged twice
        last = published[-1]
        latest = h.store.latest_run_memory()
        assert latest is not None
        h.store.publish_run_memory(last.commit_key, latest)
    while not stopped():
        head = h.store.queue_head()
        if head is None:
            if finished():
                return
            await h.wait_until(lambda: h.store.queue_head() is not None or finished() or stopped(), WRITER_KEY)
            continue
        replay = h.accepted("run_summarizer", head.commit_key)
        if replay is not None:  # accepted before a crash: replay the frozen delivery
            memory = run_memory_successor(
                h, head.commit_key, head.plan_memory_ref, RunSummary.model_validate(replay).memory
            )
            publish(h, head.commit_key, memory)
            continue
        await merge_head(h, head)
