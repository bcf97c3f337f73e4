"""The KV pool measured benchmark rows imply: simulate them with the pool forced.

    python bench/implied_pool.py --lines 92,93,94,95,96,97 --pools 4000,7500,11000,22460
        [--silicon CSV] [--rounds 5] [--jobs 2]

For capacity-bound rows the measured TTFT depends steeply on how many KV tokens the engine
held, which no row records. This bench simulates the chosen rows of a silicon CSV as
``kvplan validate`` does (``validate.simulate_row``), once as the memory rules size the pool
and once per pool of ``--pools`` with ``kv_capacity_tokens`` forced, and prints simulated /
measured TTFT and TPOT per row, then each pool's mean |log(simulated / measured)| of TTFT over
the rows (the smallest marked). One pool that fits every row of a deployment, TTFT and TPOT
alike, says the engine held about that much; the gap to the rule's pool (``kvplan models show
MODEL --gpu GPU --tp N --backend B`` prints it and how it came about) is what a memory rule
misses — bench/README.md, "What pool the SGLang 0.5.8 TP1 rows ran with". It says nothing of
*why*: only the engine's logs do.
"""

from __future__ import annotations

import argparse
import math
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from _silicon import DEFAULT_SILICON

from hardware.catalog import load_catalog
from simulator.validation.silicon.rows import MeasuredRow
from simulator.validation.validate import (
    RowResult,
    read_silicon,
    row_config,
    simulate_row,
)


def _args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--silicon", type=Path, default=DEFAULT_SILICON)
    parser.add_argument("--lines", required=True, help="comma-separated CSV line numbers")
    parser.add_argument("--pools", required=True, help="comma-separated KV pools, tokens")
    parser.add_argument("--rounds", type=int, default=5, help="requests per user simulated")
    parser.add_argument("--jobs", type=int, default=2)
    return parser.parse_args(argv)


def _simulate(row: MeasuredRow, pool: int | None, rounds: int) -> RowResult | str:
    """``row`` simulated with the rule's pool (``pool`` None) or ``pool`` tokens forced."""
    overrides = None if pool is None else {"kv_capacity_tokens": pool}
    outcome = simulate_row(
        row, latency_model="auto", catalog=load_catalog(), rounds=rounds, overrides=overrides
    )
    return outcome if isinstance(outcome, RowResult) else outcome.reason


def _ints(text: str, what: str) -> list[int]:
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise SystemExit(f"--{what}: expected comma-separated integers, got {text!r}") from None
    if not values or min(values) < 1:
        raise SystemExit(f"--{what}: expected positive integers, got {text!r}")
    return values


def main(argv: list[str] | None = None) -> int:
    args = _args(argv)
    if not args.silicon.is_file():
        print(f"{args.silicon}: no such file", file=sys.stderr)
        return 2
    lines, pools = _ints(args.lines, "lines"), _ints(args.pools, "pools")
    rows = {row.line: row for row in read_silicon(args.silicon)[0] if row.line in lines}
    missing = sorted(set(lines) - set(rows))
    if missing:
        print(f"{args.silicon}: no measured row at line(s) {missing}", file=sys.stderr)
        return 2
    first = rows[lines[0]]
    config = row_config(first, load_catalog(), latency_model="auto")
    print(f"line {first.line}: {first.id}")
    if isinstance(config, str):
        print(f"  cannot be expressed: {config}")
        return 2
    jobs = [(line, pool) for pool in [None, *pools] for line in lines]
    with ProcessPoolExecutor(max_workers=max(1, args.jobs)) as executor:
        futures = {
            job: executor.submit(_simulate, rows[job[0]], job[1], args.rounds) for job in jobs
        }
        results = {job: future.result() for job, future in futures.items()}
    scores: dict[int | None, float] = {}
    for pool in [None, *pools]:
        label = "rule's pool" if pool is None else f"{pool:,} tokens"
        print(f"\n{label}: simulated / measured")
        errors = []
        for line in lines:
            result, row = results[(line, pool)], rows[line]
            if isinstance(result, str):
                print(f"  line {line}: skipped ({result})")
                continue
            errors.append(abs(math.log(result.predicted_ttft_ms / row.measured_ttft_ms)))
            print(
                f"  line {line} ({row.concurrency} users, {row.isl}/{row.osl}): TTFT "
                f"{result.predicted_ttft_ms:,.0f} / {row.measured_ttft_ms:,.0f} ms, TPOT "
                f"{result.predicted_tpot_ms:.1f} / {row.measured_tpot_ms:.1f} ms"
            )
        if errors:
            scores[pool] = sum(errors) / len(errors)
    print("\nmean |log(simulated / measured)| of TTFT:")
    best = min(scores, key=lambda pool: scores[pool]) if scores else None
    for pool, score in scores.items():
        label = "rule's pool" if pool is None else f"{pool:,} tokens"
        print(f"  {label:>16}: {score:.3f}{'  <- best' if pool == best else ''}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
