"""``ade status RUN``: where a run stands, read from its store (no controller needed)."""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

from ade_core.harness.liveness import controller_running
from ade_core.harness.operator import operator_state
from ade_core.harness.run import frozen_config
from ade_core.harness.snapshot import Snapshot
from ade_core.schemas.trial import Attempt, Unavailable
from ade_core.store import RunStore, state_digest

# Paper Fig. 4: where Plan time goes, by the role (or Engine) that spends it.
STAGES = {
    "coordinator": "proposal",
    "builder": "build",
    "analyzer": "analysis",
    "review_worker": "analysis",
    "plan_summarizer": "memory_update",
    "run_summarizer": "memory_update",
}


SETTLED_PHASES = ("completed", "cancelled", "suspended")  # nothing runs until the operator acts

USAGE_FIELDS = ("calls", "prompt_tokens", "completion_tokens", "tokens")

# What each output mode an endpoint is moved to means (agents' structured-output fallback).
MODE_MEANING = {
    "json_object": ": replies asked for as a JSON object constrained by the schema",
    "text": ": replies asked for as JSON in plain text",
}


def _plain(value: Any) -> Any:
    return {"unavailable": value.reason} if isinstance(value, Unavailable) else value


def trial_of(subject: str) -> str | None:
    """The Trial an agent call served: Trial steps are ``<trial_id>#<step>``; a Plan proposal serves none."""
    return subject.partition("#")[0] if "#" in subject else None


def token_usage(store: RunStore) -> dict[str, Any]:
    """Agent calls and tokens per role, per Trial and role, and of calls that serve no Trial (Plan proposals).

    Accepted deliveries count as calls; a refused or failed call adds only the tokens it spent. The
    parts add up: ``per_trial`` plus ``outside_trials`` equals ``per_role``, whose sum is the total.
    """
    per_role: defaultdict[str, Counter[str]] = defaultdict(Counter)
    per_trial: defaultdict[str, defaultdict[str, Counter[str]]] = defaultdict(lambda: defaultdict(Counter))
    outside: defaultdict[str, Counter[str]] = defaultdict(Counter)
    for event in store.events():
        if event.kind == "delivery_accepted" and "details" in event.payload:
            role, details = event.actor, event.payload["details"]
            used = Counter({"calls": 1, **{k: int(details.get(k, 0)) for k in USAGE_FIELDS[1:]}})
        elif event.payload.get("spent_tokens"):  # a refused or failed call: its tokens count all the same
            role = event.payload["role"]
            used = Counter({k: int(event.payload.get(f"spent_{k}", 0)) for k in USAGE_FIELDS[1:]})
        else:
            continue
        trial = trial_of(event.subject)
        per_role[role].update(used)
        (per_trial[trial][role] if trial else outside[role]).update(used)

    def plain(counter: Counter[str]) -> dict[str, int]:
        return {k: counter.get(k, 0) for k in USAGE_FIELDS}

    return {
        "calls": {role: c["calls"] for role, c in per_role.items()},
        "tokens": {role: c["tokens"] for role, c in per_role.items()},
        "tokens_total": sum(c["tokens"] for c in per_role.values()),
        "prompt_tokens_total": sum(c["prompt_tokens"] for c in per_role.values()),
        "completion_tokens_total": sum(c["completion_tokens"] for c in per_role.values()),
        "per_role": {role: plain(c) for role, c in per_role.items()},
        "per_trial": {t: {role: plain(c) for role, c in roles.items()} for t, roles in per_trial.items()},
        "outside_trials": {role: plain(c) for role, c in outside.items()},
    }


def agent_failures(store: RunStore) -> dict[str, Any]:
    """Agent calls that produced no delivery, per role (count, seconds spent, the last error as the server
    gave it: operator-only), and every endpoint switched to plain-text replies, with why."""
    per_role: dict[str, dict[str, Any]] = {}
    downgrades = []
    for event in store.events():
        if event.kind == "agent_output_downgraded":
            downgrades.append({k: event.payload.get(k) for k in ("role", "endpoint", "status", "reason", "mode")})
        elif event.payload.get("refused") == "agent_error" and "role" in event.payload:
            failed = per_role.setdefault(event.payload["role"], {"calls": 0, "seconds": 0.0, "last_error": ""})
            failed["calls"] += 1
            failed["seconds"] = round(failed["seconds"] + float(event.payload.get("spent_seconds", 0.0)), 3)
            failed["last_error"] = str(event.payload.get("operator_detail", ""))[:300]
    return {"per_role": per_role, "output_downgrades": downgrades}


RESEARCH_ROLES = ("coordinator", "builder")  # the roles whose deliveries are the Run's research


def research_delivered(store: RunStore) -> bool:
    """Whether any Coordinator or Builder delivery was accepted: without one, a Run researched nothing."""
    return any(e.kind == "delivery_accepted" and e.actor in RESEARCH_ROLES for e in store.events())


def _dev_checks(trial: Any) -> list[dict[str, Any]]:
    """The development checks of a Trial's Builder rounds (Builder-only evidence, listed for the operator)."""
    return [
        {"round": r.round, "diagnostics": r.dev_check, "admitted": r.admitted, "failed_checks": list(r.failed_checks)}
        for r in trial.build_rounds
        if r.dev_check
    ]


def run_status(store: RunStore) -> dict[str, Any]:
    """Phase, operator state, per-Plan/Trial phase, active attempts, budget, agent usage, stage times, digest."""
    record = store.get_model("run", "run")
    if record is None:
        return {"phase": "uninitialized", "state_digest": state_digest(store)}
    config = frozen_config(store, record)
    snap = Snapshot.read(store)
    budget = config.budget
    usage = token_usage(store)
    plans = []
    for plan in snap.plans:
        trials = snap.trials_of(plan.plan_id)
        plans.append(
            {
                "plan_id": plan.plan_id,
                "coordinator": plan.coordinator,
                "relation": plan.relation,
                "sources": list(plan.sources),
                "direction": plan.direction,
                "status": "completed" if snap.plan_completed(plan, budget.trials_per_plan) else "active",
                "trials": [
                    {
                        "trial_id": t.trial_id,
                        "status": t.status,
                        "failure": t.failure,
                        "attempts": len(t.attempts),
                        "build_rounds": len(t.build_rounds),
                        "dev_checks": _dev_checks(t),
                        "agent_usage": usage["per_trial"].get(t.trial_id, {}),
                        "scores": _plain(t.scores),
                        "conclusions": {k: _plain(v) for k, v in t.conclusions.model_dump().items()},
                    }
                    for t in trials
                ],
            }
        )
    attempts = [Attempt.model_validate(d.document) for d in store.list("attempt")]
    active = [
        {"attempt_id": a.attempt_id, "trial_id": a.trial_id, "resources": a.resources}
        for a in attempts
        if a.status == "running"
    ]
    stage_seconds: defaultdict[str, float] = defaultdict(float)
    for event in store.events():
        if event.kind == "delivery_accepted" and "details" in event.payload:
            stage_seconds[STAGES.get(event.actor, event.actor)] += float(event.payload["details"].get("seconds", 0.0))
        elif "spent_seconds" in event.payload and "role" in event.payload:  # a failed call's time, in its stage
            role = event.payload["role"]
            stage_seconds[STAGES.get(role, role)] += float(event.payload["spent_seconds"])
    for attempt in attempts:
        if attempt.ended_at is not None:
            waited = attempt.waited_s or 0.0  # in the executor's queue, not yet on a slot
            stage_seconds["waiting"] += waited
            stage_seconds["execution"] += max(0.0, (attempt.ended_at - attempt.started_at).total_seconds() - waited)
    used = Counter(p.coordinator for p in snap.plans if p.coordinator > 0)
    operator = operator_state(store)
    controller = "running" if controller_running(store.run_dir) else "none"
    return {
        "run_id": record.run_id,
        "run_dir": str(store.run_dir),
        "task": record.task,
        "dry_run": record.dry_run,
        "phase": record.phase,
        "operator": operator,
        "controller": controller,
        # no process drives a Run that is not done, and the operator did not pause it: Ctrl-C, a kill, a crash
        "interrupted": controller == "none" and record.phase not in SETTLED_PHASES and operator != "paused",
        "forked_from": record.forked_from,
        "held_out": held_out_status(store, record),
        "suspended": record.suspended.model_dump(mode="json") if record.suspended else None,
        "revision": store.revision,
        "budget": {
            "coordinators": budget.coordinators,
            "plans_per_coordinator": budget.plans_per_coordinator,
            "trials_per_plan": budget.trials_per_plan,
            "plans_used": {f"C{c}": used.get(c, 0) for c in range(1, budget.coordinators + 1)},
            "trials_used": len([t for t in snap.trials if t.plan_id != "P000"]),
        },
        "plans": plans,
        "active_attempts": active,
        "agents": usage,
        "agent_failures": agent_failures(store),
        "seconds_per_stage": {k: round(v, 3) for k, v in sorted(stage_seconds.items())},
        "base_model": _plain(record.base_model),
        "simulated": record.dry_run,  # every score here is simulated (a dry run): not a result
        "selection": _plain(record.selection.model_dump(mode="json"))
        if record.selection is not None and not isinstance(record.selection, Unavailable)
        else _plain(record.selection),
        "state_digest": state_digest(store),
    }


def held_out_status(store: RunStore, record: Any) -> dict[str, Any]:
    """Operator-only: which held-out evaluations exist and whether they are fresh (no scores: see ``ade heldout``)."""
    from ade_core.harness.heldout import HELDOUT_DIR, HeldOutStore

    evaluations = HeldOutStore(store.run_dir).evaluations()
    return {
        "seen_before_fork": list(record.held_out_seen),
        "evaluations": [
            {
                "sequence": e.sequence,
                "scope": e.scope,
                "trial_id": e.trial_id,
                "engine": e.engine,
                "fresh": e.fresh,
                "record": f"{HELDOUT_DIR}/evaluations/{e.sequence:04d}.json",
            }
            for e in evaluations
        ],
    }


def _usage_line(by_role: dict[str, dict[str, int]]) -> str:
    """``N (prompt P, completion C): role prompt/completion, ...``"""
    total, prompt, completion = (
        sum(u[k] for u in by_role.values()) for k in ("tokens", "prompt_tokens", "completion_tokens")
    )
    parts = ", ".join(f"{r} {u['prompt_tokens']}/{u['completion_tokens']}" for r, u in by_role.items())
    return f"{total} (prompt {prompt}, completion {completion}): {parts}"


def format_status(status: dict[str, Any]) -> str:
    """The status as a few readable lines."""
    if status["phase"] == "uninitialized":
        return f"phase: uninitialized\nstate_digest: {status['state_digest']}"
    state = (
        f"interrupted (no process is driving it; continue it with: ade resume {status['run_dir']})"
        if status["interrupted"]
        else f"operator {status['operator']}"
    )
    lines = [
        f"run {status['run_id']} ({status['task']}{', dry run' if status['dry_run'] else ''}): "
        f"phase {status['phase']}, {state}, revision {status['revision']}",
    ]
    budget = status["budget"]
    used = ", ".join(f"{c} {n}/{budget['plans_per_coordinator']}" for c, n in budget["plans_used"].items())
    lines.append(f"plans used: {used}; B_T = {budget['trials_per_plan']}")
    for plan in status["plans"]:
        lines.append(f"  {plan['plan_id']:8} {plan['status']:9} {plan['relation']:10} {plan['direction'][:70]}")
        for trial in plan["trials"]:
            scores = trial["scores"]
            shown = ", ".join(f"{k} {v:.2f}" for k, v in scores.items()) if "unavailable" not in scores else "-"
            shown += " (simulated)" if status["simulated"] and shown != "-" else ""
            extra = f" ({trial['failure']})" if trial["failure"] else ""
            lines.append(f"    {trial['trial_id']:12} {trial['status']:18} {shown}{extra}")
            if trial["agent_usage"]:
                lines.append(f"      tokens {_usage_line(trial['agent_usage'])}")
            for check in trial["dev_checks"]:
                verdict = "passed" if check["admitted"] else f"failed ({'; '.join(check['failed_checks'])[:80]})"
                lines.append(f"      dev check in build round {check['round']}: {verdict}")
    for attempt in status["active_attempts"]:
        lines.append(f"  running: {attempt['attempt_id']} on {attempt['resources']}")
    stages = ", ".join(f"{k} {v:.0f}s" for k, v in status["seconds_per_stage"].items())
    agents = status["agents"]
    lines.append(
        f"time per stage: {stages or '-'}; agent tokens {agents['tokens_total']} "
        f"(prompt {agents['prompt_tokens_total']}, completion {agents['completion_tokens_total']})"
    )
    if agents["per_role"]:
        lines.append(f"  tokens by role: {_usage_line(agents['per_role'])}")
    if agents["outside_trials"]:
        lines.append(f"  tokens outside Trials (Plan proposals): {_usage_line(agents['outside_trials'])}")
    failures = status["agent_failures"]
    for role, failed in failures["per_role"].items():
        lines.append(
            f"  {role}: {failed['calls']} call(s) got no answer ({failed['seconds']:.0f}s); "
            f"last: {failed['last_error']}"
        )
    for switch in failures["output_downgrades"]:
        lines.append(
            f"  output mode of {switch['endpoint']} now {switch['mode']} (from {switch['role']}'s call; it "
            f"answered {switch['status']}: {switch['reason']}){MODE_MEANING.get(switch['mode'], '')}"
        )
    selection = status["selection"]
    if isinstance(selection, dict) and "trial_id" in selection:
        simulated = " (simulated)" if status["simulated"] else ""
        lines.append(f"selected: {selection['plan_id']} ({selection['trial_id']}) {selection['scores']}{simulated}")
    if status["suspended"]:
        s = status["suspended"]
        lines.append(
            f"SUSPENDED: recovery budget of {s['trial_id']} spent ({s['failures']} failed attempts, last "
            f"{s['last_failure']}); fix the cause, then `ade resume` grants it a fresh budget"
        )
    held = status["held_out"]
    for e in held["evaluations"]:
        fresh = "fresh" if e["fresh"] else "NOT FRESH"
        engine = "simulated: dry run" if e["engine"] == "simulated" else e["engine"]
        lines.append(f"held-out #{e['sequence']}: {e['trial_id']} ({engine}), {fresh} -> {e['record']}")
    if held["seen_before_fork"]:
        lines.append(
            f"forked after held-out evaluation ({', '.join(held['seen_before_fork'])}): held-out results not fresh"
        )
    lines.append(f"state_digest: {status['state_digest']}")
    return "\n".join(lines)
