"""The files ``kvplan simulate --out DIR`` writes for an autoscaled run: ``fleet.csv`` and
``fleet.png``.

``fleet.csv`` holds one row per pool and window (``FleetSummary.windows``) at a finer grain than
the printed table — six windows per table row, i.e. 10 minutes for a day-long run — so the
curve of instances against latency can be drawn or analysed elsewhere. ``fleet.png`` draws it:
the serving and paid-for instance counts over time (every change, from the autoscaler's log),
TTFT and TPOT p90 per window with the SLO file's p90 targets as lines, and with an SLO file the
share of each window's requests that met every target against the attainment asked for.
Windows are by request arrival; a window nobody arrived in has no latency (a gap in the line).
"""

from __future__ import annotations

import csv
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from optimizer.cli.simulate_output import fleet_windows, window_seconds
from simulator.api import SimResult
from slo import SloSpec

__all__ = ["FLEET_COLUMNS", "write_fleet_files"]

#: Columns of ``fleet.csv`` (latencies in ms; times in seconds from the start of the run).
FLEET_COLUMNS = (
    "pool",
    "start_s",
    "end_s",
    "requests",
    "serving",
    "paid",
    "ttft_p90_ms",
    "tpot_p90_ms",
    "attainment",
)

#: Windows of the files per window of the printed table.
_FINER = 6


def write_fleet_files(result: SimResult, spec: SloSpec | None, directory: Path) -> list[Path]:
    """Write ``fleet.csv`` and ``fleet.png`` into ``directory`` (which exists) for every
    autoscaled pool of ``result``; nothing for a fixed fleet. Returns the paths written."""
    if not result.fleets:
        return []
    rows: list[dict[str, Any]] = []
    for pool, fleet in result.fleets.items():
        window = window_seconds(fleet.period_s) / _FINER
        rows += [{"pool": pool, **row} for row in fleet_windows(result, spec, pool, window)]
    table = directory / "fleet.csv"
    with table.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=FLEET_COLUMNS, restval="")
        writer.writeheader()
        writer.writerows(rows)
    return [table, _plot(result, spec, rows, directory / "fleet.png")]


def _plot(
    result: SimResult, spec: SloSpec | None, rows: Sequence[dict[str, Any]], path: Path
) -> Path:
    import matplotlib  # noqa: PLC0415  (plotting is loaded only when files are asked for)

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    with_attainment = spec is not None and spec.attainment is not None
    panels = 4 if with_attainment else 3
    fig, axes = plt.subplots(panels, 1, figsize=(10, 2.4 * panels), sharex=True)
    ax = axes[0]
    for pool, fleet in result.fleets.items():
        log = fleet.log
        hours = [t / 3600 for t in log.times_s] + [fleet.period_s / 3600]
        label = "" if pool == "instances" else f"{pool} "
        # Every change, faintly (a busy autoscaler changes its count many times an hour),
        # under the time-averaged counts per window.
        line = ax.step(hours, [*log.serving, log.serving[-1]], where="post", alpha=0.25, lw=0.7)
        pool_rows = [row for row in rows if row["pool"] == pool]
        middle = [(row["start_s"] + row["end_s"]) / 7200 for row in pool_rows]
        color = line[0].get_color()
        ax.plot(middle, [r["serving"] for r in pool_rows], color=color, label=f"{label}serving")
        ax.plot(
            middle,
            [r["paid"] for r in pool_rows],
            color=color,
            linestyle="--",
            label=f"{label}paid for (incl. starting, draining)",
        )
    ax.set_ylabel("instances\n(window mean; faint: every change)")
    ax.set_ylim(bottom=0)
    ax.legend(loc="upper left", ncol=2, fontsize="small")
    # Every pool's windows hold the same requests: draw the latencies of the first pool's.
    first = next(iter(result.fleets))
    mine = [row for row in rows if row["pool"] == first]
    middle = [(row["start_s"] + row["end_s"]) / 7200 for row in mine]
    for ax, metric in ((axes[1], "ttft"), (axes[2], "tpot")):
        values = [_finite(row[f"{metric}_p90_ms"]) for row in mine]
        ax.plot(middle, values, marker=".", label="p90 per window")
        limit = _p90_target(spec, f"{metric}_ms")
        if limit is not None:
            ax.axhline(limit, color="tab:red", linestyle=":", label=f"SLO p90 {limit:g} ms")
        ax.set_ylabel(f"{metric.upper()} p90 (ms)")
        shown = [v for v in values if v > 0]  # NaN compares False: gaps drop out
        if shown and max(shown) > 10 * min(shown):  # a log axis only for a wide range
            ax.set_yscale("log")
        ax.legend(loc="upper left", fontsize="small")
    if with_attainment:
        assert spec is not None and spec.attainment is not None  # noqa: PT018 (narrowing)
        ax = axes[3]
        ax.plot(middle, [_finite(row.get("attainment")) for row in mine], marker=".")
        ax.axhline(
            spec.attainment, color="tab:red", linestyle=":", label=f"SLO {spec.attainment:g}"
        )
        ax.set_ylabel("requests meeting\nevery target")
        ax.set_ylim(0, 1.02)
        ax.legend(loc="lower left", fontsize="small")
    axes[-1].set_xlabel("hours since the start of the run")
    title = f"{result.config.model}: autoscaled fleet over {mine[-1]['end_s'] / 3600:.1f} h"
    if result.summary is not None:  # the period's average price (the fleets as they ran)
        title += f" (USD {result.summary.cost.usd_per_hour:,.2f}/h on average)"
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _p90_target(spec: SloSpec | None, metric: str) -> float | None:
    """The SLO file's p90 limit on ``metric`` (ms), if it sets one."""
    if spec is None:
        return None
    stats: dict[str, float] = dict(spec.targets.get(metric, {}))  # type: ignore[call-overload]
    return stats.get("p90")


def _finite(value: Any) -> float:
    """A plotted number: NaN (a gap) for a missing or infinite one."""
    if value is None:
        return math.nan
    number = float(value)
    return number if math.isfinite(number) else math.nan
