"""The report's GRPO section: per-step diagnostics and a rollout browser, read from Trial packages.

For RFT runs the Engine records every rollout (``training_rollouts``) and per-step diagnostics
(``step_diagnostics``) in the package. The report draws the diagnostics of the selected Trial next
to the generic reference's, and lays out the selected Trial's rollouts step by step, group by group,
with outcome, process evidence, reward and advantage. The browser needs no script: each step is a
``<details>`` element and the group-type filter is a URL fragment (``#rollouts-mixed``) matched by
CSS ``:target``, so the file stays self-contained and static.

A paper-scale run has tens of thousands of rollouts; the browser shows at most ``BROWSER_STEPS``
steps, evenly spaced with the first and the last, and the first ``RESPONSE_CHARS`` characters of
each response, and says so.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from html import escape
from pathlib import Path
from typing import Any

from ade_core.engine.package import PackageTamperedError, open_package
from ade_core.harness.snapshot import REFERENCE_PLAN
from ade_core.reward_contract import GROUP_TYPES, group_type
from ade_core.schemas.trial import PackageRef, Trial

BROWSER_STEPS = 12
RESPONSE_CHARS = 600
DIAGNOSTIC_PANELS = (
    ("zero_variance_share", "zero-variance group share"),
    ("reward_outcome", "mean training reward (solid) vs verified outcome (dashed)"),
    ("advantages", "advantage std (solid) and |max| (dashed)"),
    ("kl", "KL to the reference policy"),
    ("response_length_mean", "mean response length (tokens)"),
)


@dataclass(frozen=True)
class RolloutGroup:
    """One prompt group of one step: its rollouts in the Engine's order."""

    prompt_group_id: str
    problem_id: str
    question: str
    group_type: str
    rollouts: tuple[dict[str, Any], ...]


@dataclass(frozen=True)
class TrainingView:
    """GRPO evidence of a run: diagnostics per labelled Trial, and the browsed Trial's groups by step."""

    diagnostics: dict[str, tuple[dict[str, Any], ...]]  # "selected C1/P1/T1" -> step rows
    browsed_trial: str
    steps: dict[int, tuple[RolloutGroup, ...]]  # shown steps only
    total_steps: int
    # A schedule's realized coverage and reuse (Curriculum's ``consumed_problems`` and
    # ``reuse_distribution`` records), per labelled Trial that has them.
    schedules: dict[str, tuple[tuple[dict[str, Any], ...], tuple[dict[str, Any], ...]]] = field(default_factory=dict)


def _records(ref: PackageRef | Any, name: str) -> list[dict[str, Any]] | None:
    if not isinstance(ref, PackageRef):
        return None
    try:
        opened = open_package(Path(ref.path))
        return opened.records(name) if f"{name}.jsonl" in opened.files else None
    except (OSError, KeyError, PackageTamperedError):
        return None


def _groups(rollouts: list[dict[str, Any]]) -> dict[int, tuple[RolloutGroup, ...]]:
    by_group: dict[str, list[dict[str, Any]]] = {}
    for rollout in rollouts:
        by_group.setdefault(str(rollout["prompt_group_id"]), []).append(rollout)
    steps: dict[int, list[RolloutGroup]] = {}
    for group_id, members in by_group.items():
        first = members[0]
        steps.setdefault(int(first.get("step", 0)), []).append(
            RolloutGroup(
                prompt_group_id=group_id,
                problem_id=str(first.get("problem_id", "")),
                question=str(first.get("question", "")),
                group_type=group_type([float(m.get("outcome", 0.0)) for m in members]),
                rollouts=tuple(members),
            )
        )
    return {step: tuple(groups) for step, groups in sorted(steps.items())}


def shown_steps(steps: list[int], limit: int = BROWSER_STEPS) -> list[int]:
    """At most ``limit`` steps, evenly spaced, always with the first and the last."""
    if len(steps) <= limit:
        return steps
    picks = {round(i * (len(steps) - 1) / (limit - 1)) for i in range(limit)}
    return [steps[i] for i in sorted(picks)]


def training_view(trials: list[Trial], selected_trial: str | None) -> TrainingView | None:
    """The selected Trial's and the reference's GRPO records; None when no package recorded diagnostics."""
    by_id = {t.trial_id: t for t in trials}
    reference = next((t for t in trials if t.plan_id == REFERENCE_PLAN and isinstance(t.package, PackageRef)), None)
    labelled: list[tuple[str, Trial]] = []
    if selected_trial in by_id and (reference is None or selected_trial != reference.trial_id):
        labelled.append((f"selected {selected_trial}", by_id[selected_trial]))
    if reference is not None:
        labelled.append((f"reference {reference.trial_id}", reference))
    diagnostics, schedules = {}, {}
    for label, trial in labelled:
        rows = _records(trial.package, "step_diagnostics")
        if rows:
            diagnostics[label] = tuple(rows)
        consumed = _records(trial.package, "consumed_problems")
        if consumed:
            schedules[label] = (tuple(consumed), tuple(_records(trial.package, "reuse_distribution") or ()))
    if not diagnostics:
        return None
    browsed = labelled[0][1]
    groups = _groups(_records(browsed.package, "training_rollouts") or [])
    shown = shown_steps(list(groups))
    return TrainingView(
        diagnostics=diagnostics,
        browsed_trial=browsed.trial_id,
        steps={s: groups[s] for s in shown},
        total_steps=len(groups),
        schedules=schedules,
    )


# -- figure ------------------------------------------------------------------------------------


def diagnostics_figure(view: TrainingView) -> bytes:
    """Per-step diagnostics, one panel each, the selected Trial and the reference as two colours."""
    from ade_core.report.figures import _png, _pyplot

    plt = _pyplot()
    from matplotlib.ticker import MaxNLocator

    fig, axes = plt.subplots(2, 3, figsize=(15, 7.2))
    colors = ("#4c72b0", "#7f7f7f")
    panels = dict(zip((k for k, _ in DIAGNOSTIC_PANELS), axes.flat, strict=False))
    for (label, rows), color in zip(view.diagnostics.items(), colors, strict=False):
        for panel, key, style, name in (
            ("zero_variance_share", "zero_variance_share", "-", label),
            ("reward_outcome", "reward_mean", "-", label),
            ("reward_outcome", "outcome_mean", "--", f"{label} (outcome)"),
            ("advantages", "advantage_std", "-", label),
            ("advantages", "advantage_abs_max", "--", f"{label} (|max|)"),
            ("kl", "kl", "-", label),
            ("response_length_mean", "response_length_mean", "-", label),
        ):
            points = [(r["step"], r[key]) for r in rows if r.get(key) is not None]
            if points:
                xs, ys = zip(*points, strict=True)
                panels[panel].plot(xs, ys, style, color=color, lw=1.6, marker=".", label=name)
    for key, title in DIAGNOSTIC_PANELS:
        ax = panels[key]
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("GRPO step")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(alpha=0.3)
        if not ax.lines:
            ax.text(0.5, 0.5, "not logged", ha="center", va="center", transform=ax.transAxes, color="#777")
    legend = axes.flat[-1]
    legend.axis("off")
    handles, names = panels["reward_outcome"].get_legend_handles_labels()
    legend.legend(handles, names, loc="center", fontsize=9, frameon=False)
    fig.tight_layout()
    return _png(fig)


def schedule_figure(view: TrainingView) -> bytes:
    """A schedule's coverage (unique problems so far), its level mix per step, and its reuse distribution."""
    from ade_core.report.figures import _png, _pyplot

    plt = _pyplot()
    from matplotlib.ticker import MaxNLocator

    fig, (coverage, levels, reuse) = plt.subplots(1, 3, figsize=(15, 3.8))
    colors = ("#4c72b0", "#7f7f7f")
    width = 0.8 / max(1, len(view.schedules))
    for index, ((label, (steps, uses)), color) in enumerate(zip(view.schedules.items(), colors, strict=False)):
        coverage.plot([r["step"] for r in steps], [r["unique_so_far"] for r in steps], color=color, lw=1.6, label=label)
        mean_level = [
            sum(float(lvl) * n for lvl, n in r["levels"].items() if lvl.lstrip("-").isdigit())
            / max(1, sum(r["levels"].values()))
            for r in steps
        ]
        levels.plot([r["step"] for r in steps], mean_level, color=color, lw=1.6, marker=".", label=label)
        reuse.bar(
            [u["uses"] + index * width for u in uses],
            [u["problems"] for u in uses],
            width=width,
            color=color,
            label=label,
        )
    for ax, title, xlabel in (
        (coverage, "unique problems consumed so far", "GRPO step"),
        (levels, "mean level of the step's problems", "GRPO step"),
        (reuse, "problems by times consumed (0: never)", "times consumed"),
    ):
        ax.set_title(title, fontsize=10)
        ax.set_xlabel(xlabel)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(alpha=0.3)
    reuse.set_yscale("symlog")  # the never-consumed bar dwarfs the rest of a small schedule
    coverage.legend(fontsize=8, frameon=False)
    fig.tight_layout()
    return _png(fig)


# -- rollout browser ---------------------------------------------------------------------------

BROWSER_CSS = """
.rollout-browser details.step { border: 1px solid #ddd; border-radius: 6px; margin: 0.4em 0; padding: 0.2em 0.6em; }
.rollout-browser .group { margin: 0.6em 0; } .rollout-browser pre { margin: 0; white-space: pre-wrap; min-width: 24em; }
.rollout-browser tr.correct td.outcome { color: #2b7a2b; font-weight: 600; }
.filters a { margin-right: 0.8em; } .filter-target { position: fixed; top: 0; } /* a filter never scrolls */
.rollout-browser .group { border-left: 6px solid #999; padding-left: 0.6em; }
.rollout-browser .group.all_wrong { border-left-color: #a3195b; }
.rollout-browser .group.mixed { border-left-color: #e6a100; }
.rollout-browser .group.all_correct { border-left-color: #1a7f5a; }
"""
BROWSER_CSS += "".join(
    f"#rollouts-{kind}:target ~ .rollout-browser .group:not(.{kind}) {{ display: none; }}\n" for kind in GROUP_TYPES
)


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value)


def _process(evidence: Any) -> str:
    if not isinstance(evidence, dict):
        return "not configured"
    if evidence.get("status") != "available":
        return str(evidence.get("status", "-"))
    dims = evidence.get("dimensions") or {}
    return ", ".join(f"{name.split('_')[0]} {_fmt(float(v))}" for name, v in sorted(dims.items()))


def _rule(evidence: Any) -> str:
    if isinstance(evidence, dict) and evidence.get("status") == "available":
        return _fmt(evidence.get("value"))
    return "-"


def _group(group: RolloutGroup) -> str:
    rows = []
    for index, r in enumerate(group.rollouts):
        text = str(r.get("response", ""))
        shown = escape(text[:RESPONSE_CHARS]) + (
            f" … (+{len(text) - RESPONSE_CHARS} chars)" if len(text) > RESPONSE_CHARS else ""
        )
        correct = float(r.get("outcome", 0.0)) == 1.0
        rows.append(
            f'<tr class="{"correct" if correct else "wrong"}"><td>{index}</td>'
            f'<td class="outcome">{_fmt(r.get("outcome"))}</td><td>{escape(_fmt(r.get("extracted_answer")))}</td>'
            f"<td>{escape(_process(r.get('process_evidence')))}</td><td>{_rule(r.get('rule_evidence'))}</td>"
            f'<td class="num">{_fmt(r.get("score"))}</td><td class="num">{_fmt(r.get("reward"))}</td>'
            f'<td class="num">{_fmt(r.get("advantage"))}</td><td>{escape(_fmt(r.get("reward_status")))}</td>'
            f"<td>{escape(_fmt(r.get('credit_mode')))}</td><td><pre>{shown}</pre></td></tr>"
        )
    return (
        f'<div class="group {group.group_type}" data-group="{escape(group.prompt_group_id)}">'
        f"<p><b>group {escape(group.prompt_group_id)}</b> · {group.group_type.replace('_', ' ')} · problem "
        f"{escape(group.problem_id)}: {escape(group.question[:300])}</p>"
        "<table><tr><th>#</th><th>outcome</th><th>answer</th><th>process evidence</th><th>rule</th>"
        "<th>row score</th><th>training reward</th><th>advantage</th><th>row status</th><th>credit</th>"
        f"<th>response</th></tr>{''.join(rows)}</table></div>"
    )


def rollout_browser(view: TrainingView) -> str:
    """The static rollout browser of ``view.browsed_trial``: a filter bar, then one ``<details>`` per shown step."""
    if not view.steps:
        return '<p class="note">No rollouts are recorded for this Trial.</p>'
    kinds = " ".join(f'<a href="#rollouts-{k}">{k.replace("_", " ")}</a>' for k in GROUP_TYPES)
    targets = "".join(f'<span class="filter-target" id="rollouts-{k}"></span>' for k in GROUP_TYPES)
    steps = []
    for position, (step, groups) in enumerate(view.steps.items()):
        counts = ", ".join(f"{sum(g.group_type == k for g in groups)} {k.replace('_', ' ')}" for k in GROUP_TYPES)
        steps.append(
            f'<details class="step" data-step="{step}"{" open" if position == 0 else ""}>'
            f"<summary>step {step}: {len(groups)} groups ({counts})</summary>"
            f"{''.join(_group(g) for g in groups)}</details>"
        )
    note = (
        f"{len(view.steps)} of {view.total_steps} steps shown (evenly spaced, first and last included)"
        if len(view.steps) < view.total_steps
        else f"all {view.total_steps} steps"
    )
    return (
        f'<p class="filters">Trial {escape(view.browsed_trial)}, {note}; responses cut at {RESPONSE_CHARS} '
        f'characters. Show groups: <a href="#rollouts">all</a> {kinds}</p>'
        f'<div id="rollouts">{targets}<div class="rollout-browser">{"".join(steps)}</div></div>'
    )
