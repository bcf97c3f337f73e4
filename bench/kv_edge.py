"""Which benchmark rows sit on the KV-capacity edge, and how badly they are predicted.

    python bench/kv_edge.py [--silicon CSV] [--fraction 0.1] [--jobs 2] [--limit N]
        [--worst 15] [--json OUT]

Every row of a silicon CSV is simulated as ``kvplan validate`` does (``validate.simulate_row``)
three times: with the pool the memory rules fit, and with it ``--fraction`` smaller and larger
(``ServingConfig.kv_capacity_scale``). A row's *sensitivity* is the largest factor by which
either variant moves its simulated TTFT (infinite where a variant cannot run). The rows are then
split into flat (< 1.1x), sensitive (1.1-1.5x) and edge (>= 1.5x,
``simulator.kv_margin.EDGE_RATIO``) and each group's TTFT error against the measurement is
printed (MAPE, median APE and signed bias, mean |log(simulated / measured)|, rows off by more
than 5x), then the most sensitive rows with the direction their error leans. What it says: how
much of the remaining error sits where the prediction depends steeply on the pool (``kvplan
simulate --kv-margin`` and the optimizer's planning flag such deployments); what it cannot say:
which pool the engine really had.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
from _silicon import DEFAULT_SILICON

from hardware.catalog import load_catalog
from simulator.kv_margin import EDGE_RATIO
from simulator.validation.silicon.rows import MeasuredRow
from simulator.validation.validate import RowResult, read_silicon, select_rows, simulate_row

#: Sensitivity bands: (label, upper bound of the TTFT factor).
BANDS = (("flat (< 1.1x)", 1.1), (f"sensitive (1.1-{EDGE_RATIO:g}x)", EDGE_RATIO))


def _args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--silicon", type=Path, default=DEFAULT_SILICON)
    parser.add_argument("--fraction", type=float, default=0.1, help="pool change, both ways")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--limit", type=int, default=0, help="rows, spread evenly (0: all)")
    parser.add_argument("--worst", type=int, default=15, help="most sensitive rows to list")
    parser.add_argument("--json", type=Path, default=None)
    return parser.parse_args(argv)


def _ttft(job: tuple[MeasuredRow, float]) -> tuple[int, float, float | None, float]:
    """``(line, scale, simulated TTFT or None, measured TTFT)`` of one row at one pool scale."""
    row, scale = job
    overrides = None if scale == 1.0 else {"kv_capacity_scale": scale}
    outcome = simulate_row(row, latency_model="auto", catalog=load_catalog(), overrides=overrides)
    ttft = outcome.predicted_ttft_ms if isinstance(outcome, RowResult) else None
    return row.line, scale, ttft, row.measured_ttft_ms


def _stats(rows: list[dict[str, Any]]) -> dict[str, float]:
    errors = np.array([r["error"] for r in rows])
    logs = np.array([abs(math.log(r["simulated_ms"] / r["measured_ms"])) for r in rows])
    return {
        "rows": len(rows),
        "mape": float(np.mean(np.abs(errors))),
        "median_ape": float(np.median(np.abs(errors))),
        "median_bias": float(np.median(errors)),
        "mean_abs_log": float(np.mean(logs)),
        "over_5x": int(np.sum(logs > math.log(5))),
    }


def main(argv: list[str] | None = None) -> int:
    args = _args(argv)
    if not args.silicon.is_file():
        print(f"{args.silicon}: no such file", file=sys.stderr)
        return 2
    if not 0 < args.fraction < 1:
        print(f"--fraction: expected a value in (0, 1), got {args.fraction}", file=sys.stderr)
        return 2
    rows = select_rows(read_silicon(args.silicon)[0], limit=args.limit or None)
    by_line = {row.line: row for row in rows}
    scales = (1.0, 1 - args.fraction, 1 + args.fraction)
    jobs = [(row, scale) for row in rows for scale in scales]
    with ProcessPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        runs = list(pool.map(_ttft, jobs, chunksize=4))
    ttft: dict[int, dict[float, float]] = {}
    for line, scale, value, _ in runs:
        if value is not None and value > 0:
            ttft.setdefault(line, {})[scale] = value
    table = []
    for line, values in ttft.items():
        if 1.0 not in values:
            continue  # not simulated at the rule's pool: nothing to compare
        base = values[1.0]
        # A variant that cannot run (the pool too small for a request) is the edge itself.
        moves = [values[s] / base if s in values else math.inf for s in scales[1:]]
        measured = by_line[line].measured_ttft_ms
        table.append(
            {
                "line": line,
                "label": _label(by_line[line]),
                "sensitivity": max(max(m, 1 / m) if math.isfinite(m) else m for m in moves),
                "smaller": moves[0],
                "larger": moves[1],
                "simulated_ms": base,
                "measured_ms": measured,
                "error": base / measured - 1,
            }
        )
    print(f"{len(table)} rows simulated at the rule's pool and {args.fraction:.0%} either way")
    groups: dict[str, Any] = {}
    lower = 0.0
    for label, upper in (*BANDS, (f"edge (>= {EDGE_RATIO:g}x)", math.inf)):
        members = [r for r in table if lower <= r["sensitivity"] < upper]
        lower = upper
        if not members:
            continue
        groups[label] = stats = _stats(members)
        print(
            f"  {label:22s} {stats['rows']:4d} rows: TTFT MAPE {stats['mape']:.1%}, median APE "
            f"{stats['median_ape']:.1%}, median bias {stats['median_bias']:+.1%}, mean "
            f"|log| {stats['mean_abs_log']:.3f}, {stats['over_5x']} rows > 5x"
        )
    print(
        f"\nmost sensitive rows (TTFT factor with the pool {args.fraction:.0%} smaller / larger):"
    )
    table.sort(key=lambda r: -r["sensitivity"])
    for r in table[: args.worst]:
        print(
            f"  line {r['line']} {r['label']}: x{r['smaller']:.2f} / x{r['larger']:.2f}, "
            f"simulated {r['simulated_ms']:,.0f} ms vs measured {r['measured_ms']:,.0f} ms "
            f"({r['error']:+.0%})"
        )
    if args.json is not None:
        out = {"fraction": args.fraction, "groups": groups, "rows": table}
        args.json.write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
    return 0


def _label(row: MeasuredRow) -> str:
    tp = getattr(row, "tp", None)  # aggregated rows; a disaggregated one has two pools
    layout = f" TP{tp}" if tp else " disagg"
    name = row.model.rsplit("/", 1)[-1]
    return f"{name} {row.backend}{layout} N={row.concurrency} {row.isl}/{row.osl}"


if __name__ == "__main__":
    raise SystemExit(main())
