"""Tables of ``kvplan replay``: results with RESULT lines, hole statistics, the policy table."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

from rich.table import Table

from optimizer.cli._output import console, err_console, print_json
from simulator.kvcache.holes import HoleStats
from simulator.kvcache.policy_table import policy_table
from simulator.kvcache.replay import RESULT_KEYS, ReplayResult
from simulator.workload.traceinfo import ReadStats, TraceInfo

__all__ = ["describe_pass", "show_holes", "show_policies", "show_results", "warn"]


def show_results(results: list[ReplayResult], trace: Path, cost_model: str, block_id: str) -> None:
    # Eight narrow columns fit an 80-column terminal; request/block totals are in the header.
    table = Table(title="Prefix-cache replay", title_justify="left")
    table.add_column("policy", overflow="fold")  # long names wrap, numbers never do
    for header in ("cache", "hit", "saving", "evicted", "self-ev", "skipped", "unexp"):
        table.add_column(header, justify="right", no_wrap=True)
    for r in results:
        table.add_row(
            r.algo,
            f"{r.cache_size:,}",
            f"{r.block_hit_ratio:.4f}",
            f"{r.compute_saving_ratio:.4f}",
            f"{r.n_eviction:,}",
            f"{r.n_self_eviction:,}",
            f"{r.n_req_skipped:,}",
            f"{r.n_unexpected_eviction:,}",
        )
    console.print(table)
    for r in results:
        fields = [f"trace={trace}", f"algo={r.algo}", f"cache_size={r.cache_size}"]
        fields += [f"cost_model={cost_model}", f"block_id={block_id}"]
        for key in RESULT_KEYS[2:]:
            value = getattr(r, key)
            fields.append(f"{key}={value:.6f}" if isinstance(value, float) else f"{key}={value}")
        console.print("RESULT " + " ".join(fields), markup=False, highlight=False, soft_wrap=True)


def show_policies(json_out: bool) -> None:
    rows = policy_table()
    if json_out:
        print_json([asdict(row) for row in rows])
        return
    table = Table(title="Eviction policies", title_justify="left")
    table.add_column("policy", no_wrap=True)
    for header in ("pins", "future", "context", "clock"):
        table.add_column(header, no_wrap=True)
    table.add_column("parameters", overflow="fold")
    yes = {True: "yes", False: "no"}
    for r in rows:
        table.add_row(
            r.name,
            yes[r.pins_honoured],
            yes[r.needs_future],
            yes[r.needs_context],
            r.clock,
            r.params,
        )
    console.print(table)
    console.print(
        "pins = pins honoured (no self-eviction when replaying traces with pinning,"
        " tests/kvcache/test_pin_safety.py); future = needs the trace's future (oracle);"
        " context = needs request context (session, category, timestamp, prefix tree);"
        " parameters: --algo name:key=value,...",
        markup=False,
        highlight=False,
    )


def show_holes(runs: list[tuple[ReplayResult, HoleStats | None]]) -> None:
    """Per run: holes per request (mean, mean over requests with one, max), hole lengths."""
    table = Table(title="Holes (runs of missed blocks per request)", title_justify="left")
    table.add_column("policy", overflow="fold")
    for header in ("cache", "holes/req", "per missing", "max", "mean len", "max len"):
        table.add_column(header, justify="right", no_wrap=True)
    lines = []
    for r, h in runs:
        if h is None:
            continue
        buckets = " ".join(f"{k}:{v:,}" for k, v in h.buckets().items())
        table.add_row(
            r.algo,
            f"{r.cache_size:,}",
            f"{h.mean_holes:.3f}",
            f"{h.mean_holes_when_missing:.3f}",
            f"{h.max_holes:,}",
            f"{h.mean_length:.1f}",
            f"{h.max_length:,}",
        )
        lines.append(f"hole lengths {r.algo} @ {r.cache_size} (blocks: holes): {buckets}")
    console.print(table)
    for line in lines:
        console.print(line, markup=False, highlight=False, soft_wrap=True)


def describe_pass(stats: ReadStats, info: TraceInfo, trace: Path) -> str:
    """Warn about what the pass saw (bad lines, raw ids); return a one-line description."""
    if stats.n_bad_lines:
        warn(f"{trace}: skipped {stats.n_bad_lines} bad line(s)")
    raw = stats.raw_ids
    if raw is not None and not raw.prefix_unique:
        warn(
            f"{trace}: raw block ids are not prefix-unique ({raw.n_multi_predecessor:,} ids"
            f" under more than one predecessor, {raw.n_multi_position:,} at more than one"
            " position); reuse is over-counted"
        )
    return (
        f"trace {trace}: {stats.n_requests:,} requests, {stats.n_block_accesses:,} block"
        f" accesses, format {info.schema} {info.container}, block-id {info.block_id}"
    )


def warn(message: str) -> None:
    """One ``warning: ...`` line on stderr."""
    err_console.print(f"warning: {message}", markup=False, highlight=False, soft_wrap=True)
