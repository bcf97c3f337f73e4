"""The planning report: Markdown + self-contained HTML with plots, from a ``StudyResult``.

Sections: what was searched, the recommended picks (config, metrics, why, monthly cost, launch
lines), the feasible front, what each cache tier buys (when the planner measured it), headroom
(load scale at which each pick breaks its SLO, when measured) and the comparison with a
baseline (when given). Plots: Pareto projections of every feasible trial with the front
highlighted, and the cache-tier value per pick.

What this is not: it runs no simulation; every number comes from the study's stored trials or
from ``Planning`` (which ``optimizer.planning`` computes).
"""

from __future__ import annotations

import base64
import html
import io
import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from optimizer.launch import launch_commands
from optimizer.results import StudyResult, TrialRecord

__all__ = ["Planning", "grouped_picks", "write_report"]

HOURS_PER_MONTH = 730.0


@dataclass(frozen=True, slots=True)
class Planning:
    """Cost-benefit figures measured for the picks by extra simulations (all optional)."""

    tier_value: Mapping[str, list[dict[str, Any]]] = field(default_factory=dict)
    """Pick label -> rows ``{"variant", "feasible", "instances", "usd_per_hour", ...}``."""
    headroom: Mapping[str, dict[str, Any]] = field(default_factory=dict)
    """Pick label -> ``{"load_scale": k, "requests_per_s": y, ...}`` from capacity search."""
    baseline: dict[str, Any] | None = None
    """``{"params": ..., "metrics": ..., "feasible": bool}`` for the user's baseline."""


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        if math.isnan(value):
            return "–"
        return f"{value:,.3g}" if abs(value) < 1000 else f"{value:,.0f}"
    return str(value)


def _params_text(params: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={_fmt(v)}" for k, v in params.items() if k != "model")


def _md_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(_fmt(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def _front_rows(front: Sequence[TrialRecord]) -> tuple[list[str], list[list[Any]]]:
    headers = [
        "trial",
        "configuration",
        "TTFT p90 ms",
        "TPOT p90 ms",
        "goodput tok/s",
        "USD/h",
        "USD/1M tok",
    ]
    rows = [
        [
            r.number,
            _params_text(r.params),
            r.metrics.get("ttft_ms.p90", float("nan")),
            r.metrics.get("tpot_ms.p90", float("nan")),
            r.metrics.get("goodput_tokens_per_s", float("nan")),
            r.metrics.get("usd_per_hour", float("nan")),
            r.metrics.get("usd_per_million_output_tokens", float("nan")),
        ]
        for r in front
    ]
    return headers, rows


def _plot_png(result: StudyResult, records: Sequence[TrialRecord]) -> bytes | None:
    try:
        import matplotlib  # noqa: PLC0415  (plotting is optional at import time)

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt  # noqa: PLC0415
    except ImportError:
        return None
    names = list(result.directions)
    pairs = list(itertools.combinations(names, 2))
    feasible = [r for r in records if r.feasible]
    fig, axes = plt.subplots(1, len(pairs), figsize=(5 * len(pairs), 4), squeeze=False)
    front_ids = {r.number for r in result.front}
    for ax, (x, y) in zip(axes[0], pairs, strict=True):
        others = [r for r in feasible if r.number not in front_ids]
        ax.scatter(
            [r.objectives[x] for r in others],
            [r.objectives[y] for r in others],
            s=12,
            c="#b0b0b0",
            label="feasible",
        )
        ax.scatter(
            [r.objectives[x] for r in result.front],
            [r.objectives[y] for r in result.front],
            s=28,
            c="#d62728",
            label="Pareto front",
        )
        for label, trial in grouped_picks(result):
            ax.annotate(
                label,
                (trial.objectives[x], trial.objectives[y]),
                fontsize=7,
                xytext=(4, 4),
                textcoords="offset points",
            )
        ax.set_xlabel(f"{x} ({result.directions[x]})")
        ax.set_ylabel(f"{y} ({result.directions[y]})")
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=8)
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110)
    plt.close(fig)
    return buffer.getvalue()


def grouped_picks(result: StudyResult) -> list[tuple[str, TrialRecord]]:
    """Picks merged per trial: ``("best latency, balanced", trial)`` in first-pick order."""
    groups: dict[int, tuple[list[str], TrialRecord]] = {}
    for pick in result.picks:
        groups.setdefault(pick.trial.number, ([], pick.trial))[0].append(pick.label)
    return [(", ".join(labels), trial) for labels, trial in groups.values()]


def _pick_sections(result: StudyResult) -> list[str]:
    out: list[str] = []
    why = {p.label: p.why for p in result.picks}
    for label, r in grouped_picks(result):
        usd_h = float(r.metrics.get("usd_per_hour", float("nan")))
        out.append(f"### {label} — trial {r.number}\n")
        reasons = "; ".join(why[part] for part in label.split(", "))
        out.append(f"*Why:* {reasons}.\n")
        out.append(f"*Configuration:* {_params_text(r.params)}\n")
        objectives = ", ".join(f"{k} = {_fmt(v)}" for k, v in r.objectives.items())
        out.append(
            f"*Objectives:* {objectives}; monthly cost ≈ USD {usd_h * HOURS_PER_MONTH:,.0f}"
            f" (USD {usd_h:,.2f}/h × {HOURS_PER_MONTH:.0f} h).\n"
        )
        for engine, cmd in launch_commands(r.params).items():
            title = f"{engine} (simulated)" if cmd["simulated"] else engine
            out.append(f"{title}:\n\n```\n{cmd['command']}\n```\n")
            out.extend(f"- {note}\n" for note in cmd["notes"])
    return out


def _planning_sections(planning: Planning) -> list[str]:
    out: list[str] = []
    if planning.tier_value:
        out.append("## What each cache tier buys\n")
        out.append(
            "Each pick re-simulated with a tier removed (same workload and seed); the "
            "instance count is raised until the SLO holds again, so the difference in "
            "GPUs and dollars is what the tier saves.\n"
        )
        for label, tier_rows in planning.tier_value.items():
            out.append(f"**{label}**\n")
            headers = list(tier_rows[0]) if tier_rows else []
            cells = [[row[h] for h in headers] for row in tier_rows]
            out.append(_md_table(headers, cells) + "\n")
    if planning.headroom:
        out.append("## Headroom\n")
        head_rows = [
            [label, h.get("load_scale"), h.get("requests_per_s")]
            for label, h in planning.headroom.items()
        ]
        out.append(
            _md_table(["pick", "max load scale meeting SLO", "requests/s"], head_rows) + "\n"
        )
    if planning.baseline is not None:
        out.append("## Against your baseline\n")
        base = planning.baseline
        out.append(
            f"Baseline: {_params_text(base.get('params', {}))}; feasible: {base.get('feasible')}.\n"
        )
        base_rows = [[k, v] for k, v in base.get("comparison", {}).items()]
        if base_rows:
            out.append(_md_table(["pick", "saving / trade-off"], base_rows) + "\n")
    return out


def write_report(
    out_dir: Path,
    *,
    title: str,
    result: StudyResult,
    records: Sequence[TrialRecord],
    context: Mapping[str, Any],
    planning: Planning | None = None,
) -> tuple[Path, Path]:
    """Write ``report.md`` and ``report.html`` (plot embedded) into ``out_dir``; return both."""
    out_dir.mkdir(parents=True, exist_ok=True)
    md: list[str] = [f"# {title}\n"]
    md.append(_md_table(["setting", "value"], list(context.items())) + "\n")
    md.append(
        f"{result.n_trials} trials, {result.n_feasible} feasible, "
        f"{len(result.front)} on the Pareto front.\n"
    )
    png = _plot_png(result, records) if result.front else None
    if png is not None:
        (out_dir / "pareto.png").write_bytes(png)
        md.append("![Pareto front projections](pareto.png)\n")
    if result.picks:
        md.append("## Recommendations\n")
        md.extend(_pick_sections(result))
        headers, rows = _front_rows(result.front)
        md.append("## Feasible Pareto front\n")
        md.append(_md_table(headers, rows) + "\n")
    else:
        md.append(
            "## No feasible configuration\n\nNo trial met every SLO target and budget. "
            "Widen the space, relax the SLO, or run more trials.\n"
        )
    md.extend(_planning_sections(planning or Planning()))
    md_text = "\n".join(md)
    md_path = out_dir / "report.md"
    md_path.write_text(md_text, encoding="utf-8")
    html_path = out_dir / "report.html"
    html_path.write_text(_to_html(title, md_text, png), encoding="utf-8")
    return md_path, html_path


def _html_line(line: str, png: bytes | None) -> str:
    """One non-table, non-code Markdown line as HTML ('' for a blank line)."""
    if line.startswith("!["):
        if png is None:
            return ""
        data = base64.b64encode(png).decode()
        return f'<img alt="Pareto front" src="data:image/png;base64,{data}">'
    if line.startswith("#"):
        level = len(line) - len(line.lstrip("#"))
        return f"<h{level}>{html.escape(line[level:].strip())}</h{level}>"
    if line.startswith("- "):
        return f"<li>{html.escape(line[2:])}</li>"
    return f"<p>{html.escape(line)}</p>" if line.strip() else ""


def _html_table(table: list[list[str]]) -> list[str]:
    head, *rows = table
    out = ["<table><tr>" + "".join(f"<th>{c}</th>" for c in head) + "</tr>"]
    out += ["<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows]
    out.append("</table>")
    return out


def _to_html(title: str, md_text: str, png: bytes | None) -> str:
    """A small, dependency-free Markdown subset → HTML (headings, tables, code, lists, images)."""
    body: list[str] = []
    in_code = False
    table: list[list[str]] = []
    for line in md_text.splitlines():
        if table and not line.startswith("|"):
            body += _html_table(table)
            table = []
        if line.startswith("```"):
            body.append("</pre>" if in_code else "<pre>")
            in_code = not in_code
        elif in_code:
            body.append(html.escape(line))
        elif line.startswith("|"):
            cells = [html.escape(c.strip()) for c in line.strip("|").split("|")]
            if not all(set(c) <= {"-"} for c in cells):
                table.append(cells)
        else:
            body.append(_html_line(line, png))
    if table:
        body += _html_table(table)
    style = (
        "body{font-family:sans-serif;max-width:72rem;margin:2rem auto;padding:0 1rem}"
        "table{border-collapse:collapse;margin:1rem 0}td,th{border:1px solid #ccc;"
        "padding:.25rem .5rem;font-size:.85rem}pre{background:#f4f4f4;padding:.5rem;"
        "white-space:pre-wrap}img{max-width:100%}"
    )
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}"
        f"</title><style>{style}</style></head><body>\n"
        + "\n".join(b for b in body if b)
        + "\n</body></html>"
    )
