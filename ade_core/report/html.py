"""The report as one self-contained HTML file: inline CSS, figures as base64 PNG data URIs, no scripts.

It must open from a copied run directory on a machine without network access, so nothing in it
refers to anything outside the file.
"""

from __future__ import annotations

import base64
import os
from datetime import UTC, datetime
from html import escape
from pathlib import Path
from typing import Any

from ade_core.report.data import ReportData, TrialDetail, metric_label, report_data
from ade_core.report.training import BROWSER_CSS, rollout_browser

REPORT_FILE = "report.html"

_CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2em auto; max-width: 1200px;
       color: #222; line-height: 1.4; padding: 0 1em; }
h1 { font-size: 1.6em; margin-bottom: 0.2em; } h2 { border-bottom: 1px solid #ccc; margin-top: 2em; }
table { border-collapse: collapse; margin: 0.8em 0; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.3em 0.6em; text-align: left; vertical-align: top; }
th { background: #f0f3f8; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
tr.best td { background: #fff3c4; font-weight: 600; } tr.base td { color: #555; font-style: italic; }
figure { margin: 1em 0; } figure img { max-width: 100%; border: 1px solid #ddd; }
figcaption { font-size: 0.9em; color: #555; }
pre { background: #f7f7f7; border: 1px solid #ddd; padding: 0.8em; overflow-x: auto; font-size: 0.8em; }
section.trial { border: 1px solid #ddd; border-radius: 6px; padding: 0.5em 1em; margin: 1em 0; }
.note { background: #eef6ff; border-left: 4px solid #4c72b0; padding: 0.4em 0.8em; }
.meta { color: #555; } dt { font-weight: 600; } dd { margin: 0 0 0.4em 1.2em; }
.simulated { background: #fff0f0; border: 2px solid #c44e52; color: #8b1c1f; padding: 0.5em 0.8em; font-weight: 600; }
th.group { text-align: center; } tr.macro td { border-top: 2px solid #888; font-weight: 600; }
div.wide { overflow-x: auto; }
td.missing { color: #777; font-style: italic; text-align: center; vertical-align: middle; }
"""

SIMULATED_BANNER = (
    "SIMULATED: this is a dry run. No model was trained or evaluated; every score in this report (in-loop, "
    "Base and held-out) is a deterministic simulation drawn from the configuration and the strategies, for "
    "checking the machinery only. These are not results."
)


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _img(name: str, png: bytes, alt: str) -> str:
    encoded = base64.b64encode(png).decode("ascii")
    return f'<img id="fig-{name}" alt="{escape(alt)}" src="data:image/png;base64,{encoded}">'


def _figure(name: str, png: bytes, alt: str, caption: str) -> str:
    return f"<figure>{_img(name, png, alt)}<figcaption>{caption}</figcaption></figure>"


def _label(metric: str, simulated: bool) -> str:
    return metric_label(metric) + (" (simulated)" if simulated else "")


def _summary_table(data: ReportData) -> str:
    heads = "".join(f"<th>{escape(_label(m, data.dry_run))}</th>" for m in data.shown_metrics)
    lines = [
        f'<table id="summary" data-simulated="{str(data.dry_run).lower()}">',
        f"<tr><th>Plan</th><th>relation (sources)</th><th>Trial</th>{heads}"
        "<th>realization</th><th>hypothesis</th><th>portfolio</th><th>best</th></tr>",
    ]
    if data.base_scores is not None:
        cells = "".join(
            f'<td class="num" data-metric="{escape(m)}" data-value="{data.base_scores.get(m, "")}">'
            f"{_num(data.base_scores.get(m))}</td>"
            for m in data.shown_metrics
        )
        lines.append(
            f'<tr class="base" data-plan="base"><td>Base</td><td>untrained model</td><td>-</td>{cells}'
            "<td></td><td></td><td></td><td></td></tr>"
        )
    for row in data.rows:
        scores = row.scores or {}
        cells = "".join(
            f'<td class="num" data-metric="{escape(m)}" data-value="{scores.get(m, "")}">{_num(scores.get(m))}</td>'
            for m in data.shown_metrics
        )
        relation = row.relation + (f" ({', '.join(row.sources)})" if row.sources else "")
        conclusions = "".join(
            f"<td>{escape(row.conclusions.get(k, '-'))}</td>" for k in ("realization", "hypothesis", "portfolio")
        )
        trial = escape(row.trial_id or "-") + ("" if row.scores is not None else f" ({escape(row.status)})")
        lines.append(
            f'<tr class="{"best" if row.best else "plan"}" data-plan="{escape(row.plan_id)}">'
            f'<td title="{escape(row.direction)}">{escape(row.plan_id)}</td><td>{escape(relation)}</td>'
            f"<td>{trial}</td>{cells}{conclusions}<td>{'★ best' if row.best else ''}</td></tr>"
        )
    lines.append("</table>")
    return "\n".join(lines)


def _heldout_table(data: ReportData) -> str:
    """Each held-out benchmark a row; Base, the generic reference and each Plan's strategy side by side."""
    columns = data.heldout_columns
    if not columns:
        return '<p id="heldout-table" class="note">No held-out evaluations are recorded for this run.</p>'
    simulated = any(c.result is not None and c.result.simulated for c in columns)
    metrics = data.shown_metrics
    groups = "".join(
        f'<th class="group" colspan="{len(metrics)}" data-column="{escape(c.key)}"'
        f' title="{escape(c.trial_id or "untrained model")}">{escape(c.label)}{" ★ selected" if c.best else ""}</th>'
        for c in columns
    )
    heads = "".join(f"<th>{escape(metric_label(m))}</th>" for _ in columns for m in metrics)
    lines = [
        f'<div class="wide"><table id="heldout-table" data-simulated="{str(simulated).lower()}">',
        f'<tr><th rowspan="2">held-out benchmark</th>{groups}</tr>',
        f"<tr>{heads}</tr>",
    ]
    names = [*data.heldout_benchmarks, "macro"]
    for index, name in enumerate(names):
        cells = []
        for column in columns:
            if column.result is None:  # one cell down the whole column
                if index == 0:
                    cells.append(
                        f'<td class="missing" rowspan="{len(names)}" colspan="{len(metrics)}" '
                        f'data-column="{escape(column.key)}">not evaluated on the held-out suite</td>'
                    )
                continue
            scores = column.result.macro_avg if name == "macro" else column.result.benchmarks.get(name)
            for m in metrics:
                value = None if scores is None else scores.get(m)
                cells.append(
                    f'<td class="num" data-column="{escape(column.key)}" data-metric="{escape(m)}" '
                    f'data-value="{"" if value is None else value}">{_num(value)}</td>'
                )
        label = "Macro Avg." if name == "macro" else escape(name)
        kind = ' class="macro"' if name == "macro" else ""
        lines.append(f'<tr{kind} data-benchmark="{escape(name)}"><td>{label}</td>{"".join(cells)}</tr>')
    lines.append("</table></div>")
    return "\n".join(lines)


def _tokens(data: ReportData) -> str:
    roles = sorted({role for by_role in data.tokens.values() for role in by_role})
    if not roles:
        return '<p id="tokens" class="note">Agent tokens: not recorded for this run.</p>'
    totals = {role: sum(by_role.get(role, 0) for by_role in data.tokens.values()) for role in roles}
    head = "".join(f"<th>{escape(r)}</th>" for r in roles)
    lines = [
        '<table id="tokens">',
        f"<tr><th>Trial / Plan</th>{head}<th>total</th></tr>",
    ]
    for owner, by_role in data.tokens.items():
        cells = "".join(f'<td class="num">{by_role.get(r, 0)}</td>' for r in roles)
        lines.append(f"<tr><td>{escape(owner)}</td>{cells}<td class='num'>{sum(by_role.values())}</td></tr>")
    cells = "".join(f'<td class="num">{totals[r]}</td>' for r in roles)
    lines.append(f"<tr><th>all</th>{cells}<th class='num'>{sum(totals.values())}</th></tr>")
    lines.append("</table>")
    return "\n".join(lines)


def _agent_failures(data: ReportData) -> str:
    """Agent calls that got no answer, per role, and endpoints switched to plain-text replies."""
    failures = data.agent_failures or {}
    per_role, switches = failures.get("per_role", {}), failures.get("output_downgrades", [])
    if not per_role and not switches:
        return '<p id="agent-failures" class="note">Every agent call got an answer.</p>'
    lines = ['<table id="agent-failures">', "<tr><th>role</th><th>calls without an answer</th><th>seconds</th>"
             "<th>last error (operator only)</th></tr>"]  # fmt: skip
    for role, failed in per_role.items():
        lines.append(
            f"<tr><td>{escape(role)}</td><td class='num'>{failed['calls']}</td>"
            f"<td class='num'>{failed['seconds']:.0f}</td><td>{escape(failed['last_error'])}</td></tr>"
        )
    lines.append("</table>")
    for switch in switches:
        lines.append(
            f"<p class='note'>Output mode of {escape(str(switch['endpoint']))} moved to "
            f"{escape(str(switch.get('mode', 'text')))} (it answered {switch['status']}: "
            f"{escape(str(switch['reason']))}).</p>"
        )
    return "\n".join(lines)


def _realization(record: dict[str, Any] | None) -> str:
    if not record:
        return "not recorded (the strategy was never realized)"
    parts = [f"verdict {record.get('verdict', '-')}", f"isolation {record.get('isolation', '-')}"]
    if record.get("inputs"):
        parts.append(f"inputs: {record['inputs']}")
    for call in record.get("calls", ()):
        stats = ", ".join(f"{k}={v}" for k, v in sorted((call.get("statistics") or {}).items()))
        parts.append(f"{call.get('entry_point', 'call')}: {call.get('status', '-')}" + (f" ({stats})" if stats else ""))
    if record.get("reasons"):
        parts.append("reasons: " + "; ".join(str(r) for r in record["reasons"]))
    return "; ".join(parts)


def _trial(detail: TrialDetail, metrics: tuple[str, ...], simulated: bool) -> str:
    anchor = "trial-" + detail.trial_id.replace("/", "-")
    scores = (
        ", ".join(f"{metric_label(m)} {_num(detail.scores.get(m))}" for m in metrics)
        if detail.scores is not None
        else "no in-loop scores"
    )
    conclusions = ", ".join(f"{k}: {v}" for k, v in detail.conclusions.items())
    items = "".join(
        f"<li><b>{escape(f.finding_id)}</b> ({escape(f.assessment)}, {escape(f.status)}): {escape(f.statement)}</li>"
        for f in detail.findings
    )
    findings = f"<ul>{items}</ul>" if items else "<p>none</p>"
    rows = [
        ("status", detail.status + (f" — {detail.failure}" if detail.failure else "")),
        ("hypothesis (Plan)", detail.hypothesis or "-"),
        ("in-loop scores (simulated)" if simulated else "in-loop scores", scores),
        ("conclusions", conclusions),
        ("intervention", detail.intervention or "-"),
        ("realization", _realization(detail.realization)),
        ("builder's account", detail.builder_account or "-"),
        ("analysis (blinded)", detail.analysis or "-"),
    ]
    body = "".join(f"<dt>{escape(k)}</dt><dd>{escape(v)}</dd>" for k, v in rows)
    if detail.admission:
        checks = "".join(f"<li>{escape(c)}</li>" for c in detail.admission)
        body += f'<dt>admission (last Builder round)</dt><dd><ul class="checks">{checks}</ul></dd>'
    code = (
        f"<details open><summary>strategy code</summary><pre>{escape(detail.strategy_source)}</pre></details>"
        if detail.strategy_source
        else "<p>strategy code: none (no admitted strategy)</p>"
    )
    return (
        f'<section class="trial" id="{escape(anchor)}" data-trial="{escape(detail.trial_id)}">'
        f"<h3>{escape(detail.trial_id)}</h3><dl>{body}</dl><h4>memory findings</h4>{findings}{code}</section>"
    )


def _lineage(data: ReportData, figures: dict[str, bytes]) -> str:
    if "lineage" not in figures:  # nothing to draw: a row of unconnected boxes says less than this line
        return (
            f'<p id="lineage-none" class="note">Every Plan is new: none of the {len(data.lineage.nodes)} Plans '
            "revisits, combines or contradicts another, and none cites another's finding.</p>"
        )
    return _figure(
        "lineage",
        figures["lineage"],
        "Plan lineage graph",
        "Plans by layer (a Plan sits below every Plan it builds on). Solid arrows: artifact edges "
        "(revisit, combine, contradict: the Plan's relation and sources). Dashed arrows: finding citations, "
        "from the Plan whose Trial produced the cited finding. Gold: the selected Plan.",
    )


def _schedule(data: ReportData, figures: dict[str, bytes]) -> str:
    if "schedule" not in figures or data.training is None:
        return ""
    return _figure(
        "schedule",
        figures["schedule"],
        "curriculum coverage and reuse",
        "The realized schedule, from what each GRPO step consumed: problems seen so far, the mean level of each "
        "step, and how many problems were consumed once, twice, ... or never. "
        + escape(", ".join(data.training.schedules))
        + ".",
    )


def _training(data: ReportData, figures: dict[str, bytes]) -> str:
    if data.training is None:
        return ""
    simulated = " (simulated)" if data.dry_run else ""
    return f"""<h2 id="grpo">GRPO training{simulated}</h2>
{
        _figure(
            "grpo_diagnostics",
            figures["grpo_diagnostics"],
            "per-step GRPO diagnostics",
            "Per optimizer step, from each package's rollout record and the trainer's log: the share of prompt groups "
            "whose training rewards are all equal (no learning signal), mean training reward against the verified "
            "outcome (a reward rising while the outcome falls is gamed), advantage spread, KL and response length. "
            + escape(", ".join(data.training.diagnostics))
            + ".",
        )
    }
{_schedule(data, figures)}
<h3 id="rollout-browser">Rollout browser</h3>
<p>Each prompt group of a step: every response with its verified outcome, the judge's process evidence, the
rule evidence, the row score, the training reward after group credit and the realized advantage.</p>
{rollout_browser(data.training)}
"""


def render_report(data: ReportData, figures: dict[str, bytes]) -> str:
    """The report's HTML text for ``data`` with ``figures`` (PNG bytes by name) embedded."""
    kind = "dry run (simulated Engine, virtual clock)" if data.dry_run else "run"
    notes = "".join(f'<p class="note">{escape(n)}</p>' for n in data.notes)
    held = (
        f"{data.heldout_records} held-out evaluation record(s) read from the operator-only store."
        if data.heldout_records
        else "no held-out records: the held-out line is absent."
    )
    trials = "\n".join(_trial(d, data.shown_metrics, data.dry_run) for d in data.trials)
    banner = f'<p id="simulated-banner" class="simulated">{escape(SIMULATED_BANNER)}</p>' if data.simulated else ""
    simulated = "Simulated scores (dry run). " if data.simulated else ""
    generated = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>ADE report: {escape(data.run_id)}</title>
<style>{_CSS}{BROWSER_CSS}</style></head>
<body>
<h1>ADE run report: {escape(data.run_id)}</h1>
<p class="meta">task {escape(data.task)} · {kind} · phase {escape(data.phase)} · final selection
{escape(data.selection)} · generated {generated} by <code>ade report</code></p>
{banner}
{notes}
<h2 id="table">Summary</h2>
<p>One row per Plan: its best eligible Trial's offline in-loop scores (held-out results never enter
this table or the ranking).</p>
{_summary_table(data)}
<h2 id="progress">Score over time (paper Fig. 3)</h2>
{
        _figure(
            "score_over_time",
            figures["score_over_time"],
            "best-so-far in-loop score and held-out score over time",
            f"{simulated}Best-so-far in-loop score of the Trials (blue) and the held-out score of the current best "
            f"(orange); "
            f"the untrained Base model is the dashed grey line (its held-out score dotted orange, when recorded). "
            f"Time: {escape(data.clock)}. {escape(held)}",
        )
    }
<h2 id="lineage">Plan lineage (paper Fig. 6)</h2>
{_lineage(data, figures)}
<h2 id="heldout">Held-out results per benchmark{" (simulated)" if data.simulated else ""}</h2>
<p>Operator tier, after final selection (paper Sec 3.4): each held-out benchmark a row, with the Base model, the
generic reference and each Plan's evaluated strategy side by side (the latest evaluation of each). These numbers
never enter search or the ranking.</p>
{_heldout_table(data)}
{_training(data, figures)}
<h2 id="stages">Time per stage per Plan (paper Fig. 4)</h2>
{
        _figure(
            "stage_times",
            figures["stage_times"],
            "time per stage per Plan",
            "Agent stages from accepted deliveries; waiting for an executor slot and Engine execution from the "
            "attempts." + (" Dry run: simulated durations." if data.dry_run else ""),
        )
    }
<h2 id="agent-tokens">Agent tokens</h2>
{_tokens(data)}
{_agent_failures(data)}
<h2 id="trials">Trials</h2>
{trials}
</body></html>
"""


def write_report(run_dir: Path | str, out: Path | str | None = None) -> Path:
    """Write ``<run_dir>/report.html`` (or ``out``) from the run's current state; returns its path.

    The file is replaced atomically, so a reader never sees half a report and regenerating it
    (``ade report RUN``) is always safe.
    """
    from ade_core.report.figures import render_figures

    run_dir = Path(run_dir)
    data = report_data(run_dir)
    text = render_report(data, render_figures(data))
    target = Path(out) if out is not None else run_dir / REPORT_FILE
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = target.with_name(f".{target.name}.tmp{os.getpid()}")
    staging.write_text(text, encoding="utf-8")
    os.replace(staging, target)
    return target
