"""``kvplan analyze``: a trace's whole LRU curve and reuse statistics, before any simulation.

    kvplan analyze trace.jsonl [--model Qwen3-32B] [--cost-model position] [--json] [--plot DIR]

Reads the trace once into flat arrays (8 bytes per block access plus a few per request), runs
the stack-distance pass (``simulator.kvcache.lru_curve``) and prints: the exact LRU block-hit
and compute-saving ratio at log-spaced cache sizes (equal to ``kvplan replay --algo lru`` at
those sizes), the capacity reaching 90/95/99 % of the maximum in blocks, tokens and (with
``--model``) GiB, and the reuse-distance, reuse-time, block-lifetime, sharing, session
footprint and request-length distributions. ``--plot DIR`` writes PNG figures there.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from hardware import BYTES_PER_ELEMENT, load_catalog
from optimizer.cli._output import console, print_json
from optimizer.cli.analyze_plot import write_plots
from optimizer.cli.trace_options import BlockIdOpt, CostModelOpt, choice_of
from simulator.kvcache.analyze import Analysis, analyze, to_json
from simulator.kvcache.cost import parse_cost_model
from simulator.kvcache.lru_curve import TraceArrays
from simulator.kvcache.replay import MATCH_MODES, REPLAY_ORDERS
from simulator.kvcache.trace_stats import Distribution
from simulator.workload import BLOCK_ID_MODES, open_trace
from slo.inputfile import InputError

__all__ = ["register"]


def _num(value: float) -> str:
    """At most 5 characters: 3 significant digits, k/M suffixes from 10,000 on."""
    if abs(value) >= 1e6:
        return f"{value / 1e6:.3g}M"
    if abs(value) >= 1e4:
        return f"{value / 1e3:.3g}k"
    return f"{value:.0f}" if abs(value) >= 100 else f"{value:.3g}"


def _dist_row(table: Table, name: str, unit: str, d: Distribution) -> None:
    p = d.percentiles
    table.add_row(
        name,
        unit,
        _num(d.n),
        _num(d.mean),
        *(_num(p[k]) for k in ("p50", "p90", "p99", "p99.9")),
        _num(d.max),
    )


def _show(a: Analysis, trace: Path, model: str | None) -> None:
    console.print(
        f"trace {trace}: {a.n_requests:,} requests, {a.n_blocks:,} block accesses,"
        f" {a.n_unique_blocks:,} unique blocks of {a.block_size_tokens} tokens;"
        f" cost model {a.cost_model}",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )
    best = a.max_point
    curve = Table(title="Exact LRU curve (stack distance)", title_justify="left")
    for header in ("cache (blocks)", "tokens", "block hit", "compute saving"):
        curve.add_column(header, justify="right", no_wrap=True)
    for p in a.points:
        curve.add_row(
            f"{p.cache_size:,}",
            f"{p.cache_size * a.block_size_tokens:,}",
            f"{p.block_hit_ratio:.4f}",
            f"{p.compute_saving_ratio:.4f}",
        )
    console.print(curve)
    console.print(
        f"maximum (every block cached): block hit {best.block_hit_ratio:.4f}, compute saving"
        f" {best.compute_saving_ratio:.4f}; exact at every size ≥ {a.curve.d_max:,} blocks"
        " (the largest request) and at the listed sizes below it",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )
    cap = Table(title="Capacity for a share of the maximum", title_justify="left")
    for header in ("metric", "share", "reached", "blocks", "tokens", f"GiB {model or ''}"):
        cap.add_column(header, justify="right", no_wrap=True)
    for row in a.capacities:
        cap.add_row(
            "hit" if row.metric == "block_hit_ratio" else "saving",
            f"{row.fraction:.0%}",
            f"{row.ratio:.4f}",
            f"{row.blocks:,}",
            f"{row.tokens:,}",
            "-" if row.gib is None else f"{row.gib:,.2f}",
        )
    console.print(cap)
    s = a.stats
    dist = Table(title="Distributions", title_justify="left")
    dist.add_column("what", no_wrap=True)
    for header in ("unit", "n", "mean", "p50", "p90", "p99", "p99.9", "max"):
        dist.add_column(header, justify="right", no_wrap=True)
    for name, unit, d in (
        ("reuse distance", "blk", s.reuse_distance_blocks),
        ("reuse time", "s", s.reuse_time_s),
        ("reuse time", "req", s.reuse_time_requests),
        ("lifetime", "s", s.lifetime_s),
        ("lifetime", "req", s.lifetime_requests),
        ("session size", "blk", s.session_footprint_blocks),
        ("request", "blk", s.request_blocks),
        ("input", "tok", s.input_tokens),
        ("output", "tok", s.output_tokens),
    ):
        _dist_row(dist, name, unit, d)
    console.print(dist)
    sh = s.sharing
    who = "sessions" if sh.sessions_known else "requests (the trace has no session ids)"
    console.print(
        f"prefix sharing across {sh.n_sessions:,} {who}: {sh.shared_blocks:,} of"
        f" {sh.n_blocks:,} blocks ({sh.shared_block_share:.1%}) are shared, covering"
        f" {sh.shared_access_share:.1%} of block accesses",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )


def _kv_bytes(model: str | None, precision: str) -> float | None:
    if model is None:
        return None
    spec = load_catalog().model(model)
    return float(spec.kv_bytes_per_token(precision))


def analyze_command(
    trace: Annotated[Path, typer.Argument(help="Trace file: Mooncake/Qwen JSONL or lcp.")],
    *,
    model: Annotated[
        str | None,
        typer.Option("--model", help="Catalog model for GiB columns (e.g. Qwen3-32B)."),
    ] = None,
    kv_precision: Annotated[
        str, typer.Option("--kv-precision", help="KV-cache precision for GiB (bf16, fp8).")
    ] = "bf16",
    cost_model: CostModelOpt = "uniform",
    block_id: BlockIdOpt = "prefix",
    match: Annotated[
        str, typer.Option("--match", help="all (hits past gaps) | stop-at-first-miss.")
    ] = "all",
    replay_order: Annotated[
        str, typer.Option("--replay-order", help="deepest-first | prefix-order.")
    ] = "deepest-first",
    points: Annotated[
        int, typer.Option("--points", min=2, help="Curve sizes to print (log-spaced).")
    ] = 24,
    json_out: Annotated[bool, typer.Option("--json", help="Print JSON instead of tables.")] = False,
    plot: Annotated[
        Path | None, typer.Option("--plot", help="Directory for PNG figures (created).")
    ] = None,
    skip_bad_lines: Annotated[
        bool, typer.Option("--skip-bad-lines", help="Skip and count corrupt JSONL lines.")
    ] = False,
) -> None:
    """Exact LRU hit/saving curve for every cache size, plus reuse and sharing statistics."""
    model_cost = parse_cost_model(cost_model)
    choice_of("--match", match, MATCH_MODES)
    choice_of("--replay-order", replay_order, REPLAY_ORDERS)
    choice_of("--block-id", block_id, sorted(BLOCK_ID_MODES))
    choice_of("--kv-precision", kv_precision, sorted(BYTES_PER_ELEMENT))
    kv_bytes = _kv_bytes(model, kv_precision)
    reader = open_trace(trace, block_id=block_id, skip_bad_lines=skip_bad_lines)
    arrays = TraceArrays.from_requests(reader.requests())
    if arrays.n_requests == 0:
        raise InputError(f"{trace}: no requests with blocks")
    result = analyze(
        arrays,
        reader.info.block_size_tokens,
        cost_model=model_cost,
        stop_at_first_miss=match == "stop-at-first-miss",
        deepest_first=replay_order == "deepest-first",
        kv_bytes_per_token=kv_bytes,
        n_points=points,
    )
    if plot is not None:
        write_plots(result, plot)
    if json_out:
        data = to_json(result)
        data["trace"] = str(trace)
        data["model"] = model
        print_json(data)
        return
    _show(result, trace, model)
    if plot is not None:
        console.print(f"figures written to {plot}/", markup=False, highlight=False)


def register(app: typer.Typer) -> None:
    """Add ``kvplan analyze`` to ``app``."""
    app.command("analyze")(analyze_command)
