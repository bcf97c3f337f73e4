"""What ``kvplan simulate`` shows and writes: the summary (``--json``), the tables for people,
and the per-request CSV (and Parquet) of ``--out``."""

from __future__ import annotations

import importlib.util
import math
from dataclasses import asdict
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from optimizer.cli._output import console
from optimizer.cli.profiles_cmd import config_latency_notes
from simulator.api import SimResult
from simulator.metrics import SUMMARY_STATS
from simulator.pool_config import POOLS
from slo import SloSpec, slo_met_mask
from slo.inputfile import InputError

__all__ = [
    "LATENCY_KEYS",
    "fleet_windows",
    "format_number",
    "note_parquet",
    "print_files",
    "print_fleet",
    "print_tables",
    "simulation_summary",
    "write_requests",
]

#: Latency metrics of the summary, in display order.
LATENCY_KEYS = ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms", "queue_ms")


def simulation_summary(result: SimResult, spec: SloSpec | None = None) -> dict[str, Any]:
    """The ``--json`` object: ``feasible``, ``reason``, latency stats (ms) per metric,
    ``throughput``, ``cache``, ``cost``, ``requests``, ``utilization``, ``load_imbalance``,
    ``config``, ``diagnostics``; ``fleet`` (timeline, bill, windows) for an autoscaled pool,
    or ``fleets`` (one such object per autoscaled PD pool), the windows with SLO attainment
    when ``spec`` is given.

    An infeasible result has the same keys: latencies and hit ratios are None, throughput 0,
    cost per million tokens None (nothing was served).
    """
    summary = result.summary
    data: dict[str, Any] = {"feasible": result.feasible, "reason": result.reason}
    for key in LATENCY_KEYS:
        stats = getattr(summary, key) if summary else None
        data[key] = {s: (getattr(stats, s) if stats else None) for s in SUMMARY_STATS}
    data["throughput"] = {
        "requests_per_s": summary.requests_per_s if summary else 0.0,
        "output_tokens_per_s": summary.output_tokens_per_s if summary else 0.0,
        "input_tokens_per_s": summary.input_tokens_per_s if summary else 0.0,
    }
    hits = summary.hit_ratio if summary else {}
    data["cache"] = {
        "l1_hit_ratio": hits.get("l1"),
        "l2_hit_ratio": hits.get("l2"),
        "l3_hit_ratio": hits.get("l3"),
        "prefill_tokens_saved_ratio": summary.prefill_tokens_saved_ratio if summary else None,
    }
    cost = result.cost
    data["cost"] = {
        "usd_per_hour": cost.usd_per_hour,
        "usd_per_million_output_tokens": summary.usd_per_million_output_tokens if summary else None,
        "gpus": cost.gpus,
        "gpu_usd_per_hour": cost.gpu_usd_per_hour,
        "dram_usd_per_hour": cost.dram_usd_per_hour,
        "l3_usd_per_hour": cost.l3_usd_per_hour,
    }
    data["requests"] = {
        "finished": summary.n_requests if summary else 0,
        "rejected": summary.n_rejected if summary else 0,
        "rejections": dict(summary.rejections) if summary else {},
        "preemptions": summary.preemptions if summary else 0,
        "duration_s": summary.duration_s if summary else 0.0,
    }
    data["utilization"] = {
        "gpu_busy_fraction": summary.gpu_busy_fraction if summary else None,
        "kv_utilization": summary.kv_utilization if summary else None,
        "mean_queue_lengths": dict(summary.mean_queue_lengths) if summary else {},
    }
    data["load_imbalance"] = summary.load_imbalance if summary else None
    data["engine"] = result.engine
    data["seed"] = result.seed
    data["config"] = result.config.model_dump()
    data["diagnostics"] = dict(result.diagnostics)
    fleets = {
        name: fleet.to_dict() | {"windows": fleet_windows(result, spec, name)}
        for name, fleet in result.fleets.items()
    }
    if result.fleet is not None:
        data["fleet"] = fleets["instances"]
    elif fleets:
        data["fleets"] = fleets
    return data


def window_seconds(period_s: float) -> float:
    """The window of the fleet table: an hour for runs of 4 h or more, 10 minutes from 40
    minutes, else a minute (about 4 to 24 rows for runs up to a day)."""
    if period_s >= 4 * 3600:
        return 3600.0
    return 600.0 if period_s >= 2400 else 60.0


def fleet_windows(
    result: SimResult,
    spec: SloSpec | None = None,
    pool: str = "instances",
    window_s: float | None = None,
) -> list[dict[str, Any]]:
    """Per window of an autoscaled run (``window_s``, default ``window_seconds`` of the
    period): requests, mean serving / paid instances of ``pool`` (``SimResult.fleets``), TTFT
    and TPOT p90 (ms), and with ``spec`` the share of the window's requests that met every
    target (its SLO attainment). Empty for a fixed pool."""
    fleet = result.fleets.get(pool)
    if fleet is None:
        return []
    met = None
    if spec is not None and spec.targets:
        per_request = result.per_request_ms()
        n = len(result.records)
        met = slo_met_mask({k: v[:n] for k, v in per_request.items()}, spec)
    rows = []
    length = window_s if window_s is not None else window_seconds(fleet.period_s)
    for window in fleet.windows(result.records, length, met):
        row: dict[str, Any] = asdict(window)
        if met is None:
            del row["attainment"]  # no SLO given: no column
        rows.append(row)
    return rows


def print_fleet(result: SimResult, windows: list[dict[str, Any]], pool: str = "instances") -> None:
    """An autoscaled pool's fleet: starts, stops, the bill, and one row per window
    (``windows``: ``fleet_windows``'s rows for ``pool``)."""
    fleet = result.fleets.get(pool)
    if fleet is None:
        return
    log = fleet.log
    which = "autoscaled" if pool == "instances" else f"{pool} pool autoscaled"
    console.print(
        f"{which}: {fleet.mean_instances:.2f} instances on average (start-up "
        f"{log.startup_s:.0f} s; {log.n_started} started, {log.n_stopped} stopped), "
        f"USD {fleet.usd_for_period:,.2f} for {fleet.period_s / 3600:.2f} h "
        f"(USD {fleet.average_cost.usd_per_hour:,.2f}/h on average)",
        markup=False,
        highlight=False,
    )
    title = "Fleet over time" if pool == "instances" else f"{pool.capitalize()} pool over time"
    table = Table(title=f"{title} (p90 latencies in ms)", title_justify="left")
    columns = ["window", "requests", "serving", "paid", "ttft", "tpot"]
    if windows and "attainment" in windows[0]:
        columns.append("attainment")
    for column in columns:
        table.add_column(column, justify="left" if column == "window" else "right")
    for row in windows:
        cells = [
            f"{row['start_s'] / 3600:.2f}–{row['end_s'] / 3600:.2f} h",
            format_number(row["requests"]),
            f"{row['serving']:.2f}",
            f"{row['paid']:.2f}",
            format_number(row["ttft_p90_ms"]),
            format_number(row["tpot_p90_ms"]),
        ]
        if "attainment" in columns:
            cells.append(format_number(row.get("attainment")))
        table.add_row(*cells)
    console.print(table)


# ----- per-request files ------------------------------------------------------------------------
def write_requests(result: SimResult, directory: Path) -> list[Path]:
    """Write one row per finished request to ``directory`` (created if missing).

    Columns: every ``RequestRecord`` field (seconds) plus ``ttft_ms``, ``tpot_ms``, ``e2e_ms``,
    ``queue_ms``. Always ``requests.csv``; ``requests.parquet`` too when pyarrow is importable.
    Returns the paths written.
    """
    import pandas as pd  # noqa: PLC0415  (~0.5 s to import; only --out needs it)

    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise InputError(f"--out {directory}: cannot create the directory: {err}") from None
    frame = pd.DataFrame([asdict(record) for record in result.records])
    for name, values in result.per_request_ms().items():
        if name != "itl_ms":  # per request that is the worst gap; max_itl_s already holds it
            # Rejected requests trail the arrays as inf rows; they have no record to join.
            frame[name] = values[: len(frame)]
    written = [directory / "requests.csv"]
    frame.to_csv(written[0], index=False)
    if importlib.util.find_spec("pyarrow") is not None:
        written.append(directory / "requests.parquet")
        frame.to_parquet(written[1], index=False)
    return written


# ----- the command ------------------------------------------------------------------------------
def _dp(ranks: int) -> str:
    """`` DP16`` for an instance of attention data-parallel ranks, "" without."""
    return f" DP{ranks}" if ranks > 1 else ""


def _pp(stages: int) -> str:
    """`` PP<n>`` for a pipeline-parallel instance, "" without PP."""
    return f" PP{stages}" if stages > 1 else ""


def print_tables(result: SimResult, workload: dict[str, Any], spec: SloSpec | None = None) -> None:
    data = simulation_summary(result, spec)
    cfg = result.config
    if cfg.pd_mode == "disaggregated":
        pools = [cfg.pool_shape("prefill"), cfg.pool_shape("decode")]
        shape = " + ".join(
            f"{count}× {gpu} TP{tp}{_dp(cfg.pool_attention_dp(role))}{_pp(cfg.pool_pp(role))}"
            f" {role}"
            for role, (gpu, tp, count) in zip(POOLS, pools, strict=True)
        )
    else:
        shape = f"{cfg.instances}× {cfg.gpu} TP{cfg.tp}{_dp(cfg.attention_dp)}{_pp(cfg.pp)}"
    where = f"{cfg.model} on {shape} ({cfg.weight_precision})"
    console.print(
        f"[bold]{where}[/bold], backend {cfg.backend}, latency {cfg.latency_model}", highlight=False
    )
    for note in config_latency_notes(cfg):
        console.print(note, markup=False, highlight=False)
    console.print(f"workload: {_describe(workload)}", markup=False, highlight=False)
    console.print(f"memory: {result.reason}", markup=False, highlight=False)
    console.print(f"engine: {result.engine}", markup=False, highlight=False)
    if result.summary is not None and result.summary.rejections:
        reasons = "; ".join(f"{n} {why}" for why, n in result.summary.rejections.items())
        console.print(
            f"rejected {result.summary.n_rejected} requests: {reasons}",
            markup=False,
            highlight=False,
        )
    latency = Table(title="Latency (ms)", title_justify="left")
    latency.add_column("metric")
    for stat in SUMMARY_STATS:
        latency.add_column(stat, justify="right")
    for key in LATENCY_KEYS:
        latency.add_row(
            key.removesuffix("_ms"), *(format_number(data[key][s]) for s in SUMMARY_STATS)
        )
    console.print(latency)
    figures = Table(title="Throughput, cache and cost", title_justify="left", show_header=False)
    figures.add_column("figure")
    figures.add_column("value", justify="right")
    rows = [
        *((k, v) for k, v in data["requests"].items()),
        *((k, v) for k, v in data["throughput"].items()),
        *((k, v) for k, v in data["cache"].items()),
        *((k, v) for k, v in data["utilization"].items() if not isinstance(v, dict)),
        *((k, v) for k, v in data["cost"].items()),
    ]
    for key, value in rows:
        figures.add_row(key, format_number(value))
    console.print(figures)
    if "fleet" in data:
        print_fleet(result, data["fleet"]["windows"])
    for name, fleet in data.get("fleets", {}).items():
        print_fleet(result, fleet["windows"], name)
    if "fleets" in data and result.summary is not None:
        console.print(
            f"both pools together: USD {result.summary.cost.usd_per_hour:,.2f}/h on average",
            markup=False,
            highlight=False,
        )


def _describe(workload: dict[str, Any]) -> str:
    """``kind`` first, then ``key=value``; a fixed distribution is its value."""
    parts = [str(workload.get("kind", "?"))]
    for key, value in workload.items():
        if key != "kind" and value is not None:
            parts.append(f"{key}={_compact(value)}")
    return " ".join(parts)


def _compact(value: Any) -> str:
    if isinstance(value, dict) and "dist" in value:
        args = {k: v for k, v in value.items() if k != "dist"}
        if value["dist"] == "fixed":
            return _compact(args["value"])
        return f"{value['dist']}({', '.join(f'{k}={_compact(v)}' for k, v in args.items())})"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def print_files(files: list[Path]) -> None:
    for path in files:
        console.print(f"wrote {path}", markup=False, highlight=False)
    note_parquet(files, console)


def note_parquet(files: list[Path], where: Console) -> None:
    if files and not any(p.suffix == ".parquet" for p in files):
        where.print("no Parquet written: pyarrow is not installed", markup=False, highlight=False)


def format_number(value: Any) -> str:
    """Table text of a summary figure: '-' for missing or non-finite, 4 decimals below 1."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.4f}" if abs(value) < 1 else f"{value:,.1f}"
    return str(value)
