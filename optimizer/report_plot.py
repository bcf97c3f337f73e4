"""The interactive front for ``report.html``: plotly scatter panels with SLO and budget lines.

One panel per pair of objectives (cost on the x axis when there is a cost objective, so every
panel reads "what does it buy for the money"); every feasible trial in grey, the Pareto front
in red, each pick as its own legend entry (a star) — the legend, not text next to the points,
names them, so labels never overlap. Hovering a point shows its trial, configuration and
objective values with units. A latency objective with an SLO target gets a dashed line at the
target, a cost objective with an hourly budget a dashed line at the budget.

The figure is written with plotly.js inlined, so the report opens offline.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from optimizer.picks import ObjectiveInfo
from optimizer.results import StudyResult, TrialRecord, settings_text

__all__ = ["PLOT_ID", "front_figure_html"]

#: The ``id`` of the plot's ``<div>`` in report.html (tests look for it).
PLOT_ID = "kvplan-front"
_PICK_COLOURS = ("#1f77b4", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b")


def _pairs(infos: Mapping[str, ObjectiveInfo]) -> list[tuple[str, str]]:
    """(x role, y role) panels: each other objective against cost, or every pair."""
    roles = list(infos)
    if "cost" in infos and len(roles) > 1:
        return [("cost", role) for role in roles if role != "cost"]
    return list(itertools.combinations(roles, 2)) or [(roles[0], roles[0])]


def _hover(record: TrialRecord, infos: Mapping[str, ObjectiveInfo]) -> str:
    config = settings_text(record.params)
    values = "<br>".join(
        f"{info.label}: {info.text(record.objectives[role])}" for role, info in infos.items()
    )
    return f"trial {record.number}<br>{values}<br>{config}"


def _scatter(
    records: Sequence[TrialRecord],
    x: ObjectiveInfo,
    y: ObjectiveInfo,
    infos: Mapping[str, ObjectiveInfo],
    **style: object,
) -> go.Scatter:
    return go.Scatter(
        x=[r.objectives[x.role] for r in records],
        y=[r.objectives[y.role] for r in records],
        mode="markers",
        hovertext=[_hover(r, infos) for r in records],
        hoverinfo="text",
        **style,
    )


def front_figure_html(
    result: StudyResult,
    records: Sequence[TrialRecord],
    picks: Sequence[tuple[str, TrialRecord]],
    *,
    budget_usd_per_hour: float | None = None,
) -> str:
    """The figure as an HTML ``<div id=PLOT_ID>`` with plotly.js inlined."""
    infos = result.objectives
    pairs = _pairs(infos)
    fig = make_subplots(rows=1, cols=len(pairs), horizontal_spacing=0.12)
    front_ids = {r.number for r in result.front}
    feasible = [r for r in records if r.feasible and r.number not in front_ids]
    for col, (xr, yr) in enumerate(pairs, start=1):
        x, y = infos[xr], infos[yr]
        first = col == 1
        fig.add_trace(
            _scatter(feasible, x, y, infos, name="feasible", legendgroup="feasible",
                     marker={"color": "#b0b0b0", "size": 6}, showlegend=first),
            row=1, col=col,
        )  # fmt: skip
        fig.add_trace(
            _scatter(result.front, x, y, infos, name="Pareto front", legendgroup="front",
                     marker={"color": "#d62728", "size": 9}, showlegend=first),
            row=1, col=col,
        )  # fmt: skip
        for (label, trial), colour in zip(picks, itertools.cycle(_PICK_COLOURS), strict=False):
            fig.add_trace(
                _scatter([trial], x, y, infos, name=f"{label} (trial {trial.number})",
                         legendgroup=label, showlegend=first,
                         marker={"color": colour, "size": 16, "symbol": "star",
                                 "line": {"color": "black", "width": 1}}),
                row=1, col=col,
            )  # fmt: skip
        fig.update_xaxes(title_text=x.label, row=1, col=col)
        fig.update_yaxes(title_text=y.label, row=1, col=col)
        _limit_lines(fig, x, y, col, budget_usd_per_hour)
    fig.update_layout(
        height=480,
        margin={"l": 60, "r": 20, "t": 40, "b": 60},
        legend={"orientation": "h", "y": -0.25},
        hovermode="closest",
        template="plotly_white",
    )
    html: str = fig.to_html(full_html=False, include_plotlyjs=True, div_id=PLOT_ID)
    return html


def _limit_lines(
    fig: go.Figure, x: ObjectiveInfo, y: ObjectiveInfo, col: int, budget: float | None
) -> None:
    """Dashed SLO-target and budget lines on the panel's axes.

    Their labels go to opposite corners so they never meet: a horizontal line's above its
    left end, a vertical line's right of its foot. (Both at plotly's default, the top right,
    put an SLO target at the top of the range on the budget's label.) Right of a budget line
    is empty (every feasible point is within the budget), as is the space above an SLO
    target's left end (every feasible point is below it).
    """
    for info, horizontal in ((y, True), (x, False)):
        bound = "≤" if info.sign > 0 else "≥"
        if info.target is not None:
            value, text = info.target, f"SLO {info.name} {bound} {info.text(info.target)}"
        elif info.role == "cost" and budget is not None:
            value, text = budget, f"budget {info.text(budget)}"
        else:
            continue
        line = {"dash": "dash", "color": "#555"}
        if horizontal:
            fig.add_hline(
                y=value, line=line, annotation_text=text, annotation_position="top left",
                row=1, col=col,
            )  # fmt: skip
        else:
            fig.add_vline(
                x=value, line=line, annotation_text=text, annotation_position="bottom right",
                row=1, col=col,
            )  # fmt: skip
