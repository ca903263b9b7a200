"""The report's figures, rendered with matplotlib (Agg) into PNG bytes: paper Figs. 3, 4 and 6.

matplotlib is imported inside each function: ``ade --help`` and every other command that never
draws must not pay for it.
"""

from __future__ import annotations

import io
from typing import TYPE_CHECKING, Any

from ade_core.report.data import STAGE_ORDER, Lineage, ReportData, metric_label

if TYPE_CHECKING:
    from matplotlib.figure import Figure

STAGE_COLORS = {
    "proposal": "#4c72b0",
    "build": "#dd8452",
    "waiting": "#bbbbbb",
    "execution": "#55a868",
    "analysis": "#c44e52",
    "memory_update": "#8172b3",
}
RELATION_COLORS = {"revisit": "#1f77b4", "combine": "#2ca02c", "contradict": "#d62728", "new": "#7f7f7f"}


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg", force=True)  # no display, no GUI toolkit: a report is written from a headless run
    import matplotlib.pyplot as plt

    return plt


def _png(fig: Figure) -> bytes:
    """The figure as PNG bytes (no metadata, so the same run gives the same bytes)."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=100, bbox_inches="tight", metadata={"Software": None})
    _pyplot().close(fig)
    return buffer.getvalue()


def _unit(seconds: float) -> tuple[float, str]:
    """A divisor and unit name that keep the time axis readable."""
    if seconds >= 2 * 3600:
        return 3600.0, "h"
    if seconds >= 2 * 60:
        return 60.0, "min"
    return 1.0, "s"


def score_over_time(data: ReportData) -> bytes:
    """Fig. 3: best-so-far in-loop score and the held-out score of the current best, from Base on."""
    plt = _pyplot()
    metrics = data.shown_metrics or tuple(sorted(data.timeline[0].in_loop) if data.timeline else ())
    fig, axes = plt.subplots(1, max(1, len(metrics)), figsize=(6.0 * max(1, len(metrics)), 3.8), squeeze=False)
    points = data.timeline
    stop = max([data.search_seconds, *(p.seconds for p in points)])  # the lines run to the end of search
    end = max(stop * 1.05, stop + 1.0)
    divisor, unit = _unit(end)
    for ax, metric in zip(axes[0], metrics, strict=False):
        if not points:
            ax.text(0.5, 0.5, "no scores recorded yet", ha="center", va="center", transform=ax.transAxes)
        else:
            base = [p for p in points if p.trial_id is None]
            steps = [p for p in points if p.trial_id is not None]
            for p in base:  # the reference level: a dashed line across the whole run
                ax.axhline(p.in_loop.get(metric, float("nan")), color="#7f7f7f", linestyle="--", linewidth=1.2)
                ax.scatter([p.seconds / divisor], [p.in_loop.get(metric, float("nan"))], color="#7f7f7f", s=18)
                ax.annotate(
                    "Base",
                    (p.seconds / divisor, p.in_loop.get(metric, 0.0)),
                    textcoords="offset points",
                    xytext=(3, 4),
                    fontsize=7,
                    color="#555555",
                )
            xs = [p.seconds / divisor for p in steps] + [stop / divisor]
            ys = [p.in_loop.get(metric, float("nan")) for p in steps]
            if steps:
                ax.step(xs, [*ys, ys[-1]], where="post", color="#1f77b4", linewidth=2, label="in-loop best so far")
                ax.scatter(xs[:-1], ys, color="#1f77b4", zorder=3, s=18)
            for p, x, y in zip(steps, xs, ys, strict=False):
                ax.annotate(
                    (p.trial_id or "").rsplit("/", 1)[0], (x, y), textcoords="offset points", xytext=(3, 4), fontsize=7
                )
            held = [
                (xs[i], xs[i + 1], p.heldout[metric])
                for i, p in enumerate(steps)
                if p.heldout is not None and metric in p.heldout
            ]
            for i, (x0, x1, y) in enumerate(held):
                ax.hlines(
                    y, x0, x1, colors="#ff7f0e", linewidth=2, label="held-out of current best" if i == 0 else None
                )
                ax.scatter([x0], [y], color="#ff7f0e", zorder=3, s=18, marker="s")
            for p in base:
                if p.heldout is not None and metric in p.heldout:
                    ax.axhline(p.heldout[metric], color="#ff7f0e", linestyle=":", linewidth=1.2)
            ax.set_xlim(0.0, end / divisor)
        label = metric_label(metric) + (" (simulated)" if data.simulated else "")
        ax.set_title(label)
        ax.set_xlabel(f"time ({unit}{', virtual' if data.dry_run else ''})")
        ax.set_ylabel(f"{label} (%)")
        ax.grid(alpha=0.3)
        if points:
            # below the axes: the lines can sit anywhere in the plot
            ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=2, fontsize=8, frameon=False)
    if data.simulated:
        fig.suptitle("SIMULATED (dry run): not results", color="#c44e52", fontweight="bold")
    fig.tight_layout()
    return _png(fig)


def stage_times(data: ReportData) -> bytes:
    """Fig. 4: time per stage per Plan, as stacked horizontal bars (admission order, top to bottom)."""
    plt = _pyplot()
    plans = [row.plan_id for row in data.rows if row.plan_id in data.stage_seconds]
    plans += [p for p in data.stage_seconds if p not in plans]
    stages = [s for s in STAGE_ORDER if any(data.stage_seconds[p].get(s) for p in plans)]
    stages += sorted({s for p in plans for s in data.stage_seconds[p]} - set(STAGE_ORDER))
    total = max((sum(data.stage_seconds[p].values()) for p in plans), default=0.0)
    divisor, unit = _unit(total)
    fig, ax = plt.subplots(figsize=(9.0, 0.45 * max(3, len(plans)) + 1.2))
    if not plans:
        ax.text(0.5, 0.5, "no stage times recorded yet", ha="center", va="center", transform=ax.transAxes)
    lefts = [0.0] * len(plans)
    for stage in stages:
        widths = [data.stage_seconds[p].get(stage, 0.0) / divisor for p in plans]
        ax.barh(plans, widths, left=lefts, color=STAGE_COLORS.get(stage, "#999999"), label=stage.replace("_", " "))
        lefts = [a + b for a, b in zip(lefts, widths, strict=True)]
    ax.invert_yaxis()
    ax.set_xlabel(f"time ({unit}{', virtual' if data.dry_run else ''})")
    ax.grid(axis="x", alpha=0.3)
    if plans:
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.22), fontsize=8, ncol=6, frameon=False)
    fig.tight_layout()
    return _png(fig)


def layers(lineage: Lineage) -> dict[str, int]:
    """Each Plan's layer: 0 for Plans that build on nothing, else one past the deepest Plan it builds on.

    Both edge kinds count; Plans are admitted after their sources, so admission order is a
    topological order and one pass suffices.
    """
    parents: dict[str, set[str]] = {n: set() for n in lineage.nodes}
    for source, target, _ in (*lineage.artifact_edges, *lineage.citation_edges):
        parents[target].add(source)
    out: dict[str, int] = {}
    for node in lineage.nodes:
        out[node] = 1 + max((out.get(p, 0) for p in parents[node]), default=-1)
    return out


def lineage_graph(data: ReportData) -> bytes:
    """Fig. 6: the Plan lineage graph; artifact edges solid (by relation), finding citations dashed."""
    plt = _pyplot()
    from matplotlib.lines import Line2D

    lineage = data.lineage
    depth = layers(lineage)
    columns: dict[int, list[str]] = {}
    for node in lineage.nodes:
        columns.setdefault(depth[node], []).append(node)
    widest = max((len(c) for c in columns.values()), default=1)
    # Top to bottom by layer (the report is wider than tall), each layer centred.
    position = {
        node: (i - (len(nodes) - 1) / 2, -float(layer))
        for layer, nodes in columns.items()
        for i, node in enumerate(nodes)
    }
    fig, ax = plt.subplots(figsize=(max(6.0, 1.05 * widest + 1.0), max(2.5, 1.5 * len(columns) + 1.0)))
    best = {row.plan_id for row in data.rows if row.best}
    for source, target, relation in lineage.artifact_edges:
        ax.annotate(
            "",
            xy=position[target],
            xytext=position[source],
            arrowprops={
                "arrowstyle": "-|>",
                "color": RELATION_COLORS.get(relation, "#333333"),
                "lw": 2.2,
                "shrinkA": 18,
                "shrinkB": 18,
            },
        )
    for source, target, _ in lineage.citation_edges:
        ax.annotate(
            "",
            xy=position[target],
            xytext=position[source],
            arrowprops={
                "arrowstyle": "-|>",
                "color": "#9467bd",
                "lw": 1.2,
                "linestyle": "--",
                "connectionstyle": "arc3,rad=0.3",
                "shrinkA": 18,
                "shrinkB": 18,
            },
        )
    for node, (x, y) in position.items():
        ax.text(
            x,
            y,
            node,
            ha="center",
            va="center",
            fontsize=9,
            bbox={
                "boxstyle": "round,pad=0.4",
                "facecolor": "#fff3c4" if node in best else "#e8eef7",
                "edgecolor": "#d4a017" if node in best else "#4c72b0",
                "linewidth": 2.5 if node in best else 1,
            },
        )
    xs = [x for x, _ in position.values()] or [0.0]
    ys = [y for _, y in position.values()] or [0.0]
    ax.set_xlim(min(xs) - 0.7, max(xs) + 0.7)
    ax.set_ylim(min(ys) - 0.5, max(ys) + 0.5)
    ax.axis("off")
    handles = [Line2D([], [], color=RELATION_COLORS[r], lw=2.2, label=f"artifact: {r}") for r in ("revisit", "combine")]
    handles += [
        Line2D([], [], color=RELATION_COLORS["contradict"], lw=2.2, label="artifact: contradict"),
        Line2D([], [], color="#9467bd", lw=1.2, linestyle="--", label="cites a finding of"),
    ]
    ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.02), ncol=4, fontsize=8, frameon=False)
    fig.tight_layout()
    return _png(fig)


def render_figures(data: ReportData) -> dict[str, bytes]:
    """Every figure of the report as PNG bytes, by name; no lineage graph when no Plan builds on another."""
    figures = {"score_over_time": score_over_time(data), "stage_times": stage_times(data)}
    if data.lineage.artifact_edges or data.lineage.citation_edges:
        figures["lineage"] = lineage_graph(data)
    if data.training is not None:
        from ade_core.report.training import diagnostics_figure

        figures["grpo_diagnostics"] = diagnostics_figure(data.training)
        if data.training.schedules:
            from ade_core.report.training import schedule_figure

            figures["schedule"] = schedule_figure(data.training)
    return figures
