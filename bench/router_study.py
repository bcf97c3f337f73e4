"""Router study: every router on the Mooncake conversation trace, one pool of instances.

Default case: 8 instances of Llama-3.1-8B (bf16, TP1) on H100 SXM, L1 only (the KV pool the
memory fit leaves in HBM, so prefix reuse depends on where requests go), vLLM preset, roofline
latency model, the trace's arrivals at ``--time-scale 0.35`` (2.9× the recorded rate: the
cluster is busy but not hopelessly overloaded). Per router it prints:

- ``L1 hit``: prompt tokens served from L1 at first admission / all prompt tokens;
- ``TTFT p50 / p90`` (ms) and ``TPOT p90`` (ms);
- ``imb tok``: load imbalance = ∫ max_i W_i(t) dt / ∫ mean_i W_i(t) dt, where W_i(t) is the
  outstanding token work of instance i (prompt tokens still to compute + output tokens still
  to generate), reconstructed from the per-request records: a request carries its computed
  prompt tokens (prompt − cache hits) plus its output tokens from arrival to its first token,
  then its output tokens falling linearly to 0 at its finish. 1.0 = perfectly even;
- ``imb req``: the same ratio for outstanding requests (arrival to finish, exact);
- ``share``: the busiest instance's share of requests × instances (1.0 = even).

    python bench/router_study.py                        # the table (a few minutes)
    python bench/router_study.py --max-requests 3000 --routers least_load cache_aware
    python bench/router_study.py --json                 # one JSON object per router

Falls back to the bundled 2,000-request slice when the full trace is absent.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from simulator.api import SimResult, simulate
from simulator.config import ServingConfig
from simulator.records import RequestRecord
from simulator.workload.bundled import bundled_trace_path
from simulator.workload.spec import WorkloadSpec

SHARED_TRACE = (
    Path(__file__).resolve().parents[1].parent
    / "shared/data/traces/mooncake_conversation_trace.jsonl"
)
#: Every router once, plus variants worth comparing on this trace (see bench/README.md).
DEFAULT_ROUTERS = (
    "random",
    "round_robin",
    "least_load",
    "power_of_two",
    # The prompt-token quartiles of the conversation trace: 2 instances per quarter of the
    # prompt tokens (the default single 8192 boundary leaves the long half hopelessly behind).
    "length_bucket:boundaries=12000/22000/42000",
    "cache_aware",
    "cache_aware:fallback=smallest_tree",
    "cache_aware:balance_abs=8,balance_rel=1.2",
    # Trees no larger than the instance's L1 (869 Mooncake blocks in the default case).
    "cache_aware:max_tree_blocks=869",
)


def _args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", type=Path, default=None, help="default: the shared trace")
    parser.add_argument("--max-requests", type=int, default=None)
    parser.add_argument("--time-scale", type=float, default=0.35)
    parser.add_argument("--model", default="meta-llama/Llama-3.1-8B")
    parser.add_argument("--gpu", default="h100_sxm")
    parser.add_argument("--instances", type=int, default=8)
    parser.add_argument("--latency-model", default="roofline")
    parser.add_argument("--l2-gib", type=float, default=0.0, help="host-DRAM L2 per instance")
    parser.add_argument("--routers", nargs="+", default=list(DEFAULT_ROUTERS))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true", help="JSON lines instead of a table")
    return parser.parse_args(argv)


def _active_sum(
    starts: NDArray[np.float64],
    ends: NDArray[np.float64],
    weights: NDArray[np.float64],
    grid: NDArray[np.float64],
) -> NDArray[np.float64]:
    """Σ weights of the intervals [start, end) that contain each grid time."""

    def cumulative(times: NDArray[np.float64]) -> NDArray[np.float64]:
        order = np.argsort(times, kind="stable")
        sums = np.concatenate(([0.0], np.cumsum(weights[order])))
        return sums[np.searchsorted(times[order], grid, side="right")]

    return cumulative(starts) - cumulative(ends)


def _work(records: Sequence[RequestRecord], grid: NDArray[np.float64]) -> NDArray[np.float64]:
    """Outstanding token work of these requests at each grid time (module docstring)."""
    if not records:
        return np.zeros_like(grid)
    a = np.array([r.arrival_s for r in records])
    f = np.array([r.first_token_s for r in records])
    e = np.array([r.finish_s for r in records])
    out = np.array([r.output_tokens for r in records], dtype=np.float64)
    cached = np.array(
        [r.cached_l1_tokens + r.cached_l2_tokens + r.cached_l3_tokens for r in records]
    )
    prefill = np.array([r.input_tokens for r in records]) - cached
    before_first = _active_sum(a, f, prefill + out, grid)
    rate = np.where(e > f, out / np.maximum(e - f, 1e-12), 0.0)
    # Decode phase: out × (e − t) / (e − f) = rate·e − rate·t over [f, e).
    decoding = _active_sum(f, e, rate * e, grid) - grid * _active_sum(f, e, rate, grid)
    return before_first + decoding


def imbalance(
    records: Sequence[RequestRecord], n_instances: int, *, tokens: bool, points: int = 20_000
) -> float:
    """∫ max over instances / ∫ mean over instances of the outstanding load (tokens or
    requests), on a uniform grid from the first arrival to the last finish."""
    if not records:
        return 1.0
    start = min(r.arrival_s for r in records)
    end = max(r.finish_s for r in records)
    grid = np.linspace(start, end, points, endpoint=False)
    per_instance: list[list[RequestRecord]] = [[] for _ in range(n_instances)]
    for rec in records:
        per_instance[rec.instance].append(rec)
    loads = np.zeros((n_instances, points))
    for i, recs in enumerate(per_instance):
        if not recs:
            continue
        if tokens:
            loads[i] = _work(recs, grid)
        else:
            a = np.array([r.arrival_s for r in recs])
            e = np.array([r.finish_s for r in recs])
            loads[i] = _active_sum(a, e, np.ones(len(recs)), grid)
    total_mean = float(loads.mean(axis=0).sum())
    return float(loads.max(axis=0).sum()) / total_mean if total_mean > 0 else 1.0


def _row(router: str, result: SimResult, n_instances: int, seconds: float) -> dict[str, Any]:
    summary = result.summary
    assert summary is not None
    counts = np.bincount([r.instance for r in result.records], minlength=n_instances)
    return {
        "router": router,
        "l1_hit": summary.hit_ratio["l1"],
        "ttft_p50_ms": summary.ttft_ms.p50,
        "ttft_p90_ms": summary.ttft_ms.p90,
        "tpot_p90_ms": summary.tpot_ms.p90,
        "imbalance_tokens": imbalance(result.records, n_instances, tokens=True),
        "imbalance_requests": imbalance(result.records, n_instances, tokens=False),
        "busiest_share": float(counts.max() * n_instances / max(1, counts.sum())),
        "requests": summary.n_requests,
        "rejected": summary.n_rejected,
        "preemptions": summary.preemptions,
        "wall_s": seconds,
    }


def _print_table(rows: list[dict[str, Any]], header: str) -> None:
    print(header)
    print()
    print(
        "| router | L1 hit | TTFT p50 ms | TTFT p90 ms | TPOT p90 ms | imb tok | imb req "
        "| share | preempt |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['router']} | {r['l1_hit']:.3f} | {r['ttft_p50_ms']:,.0f} | "
            f"{r['ttft_p90_ms']:,.0f} | {r['tpot_p90_ms']:.1f} | {r['imbalance_tokens']:.2f} | "
            f"{r['imbalance_requests']:.2f} | {r['busiest_share']:.2f} | {r['preemptions']} |"
        )


def main(argv: list[str] | None = None) -> int:
    """Run every router on the same workload and print the comparison."""
    args = _args(argv)
    trace = args.trace or (
        SHARED_TRACE
        if SHARED_TRACE.exists()
        else bundled_trace_path("mooncake_conversation_head2000")
    )
    if not trace.exists():
        print(f"trace not found: {trace}", file=sys.stderr)
        return 2
    workload = WorkloadSpec.model_validate(
        {
            "kind": "trace",
            "path": str(trace),
            "time_scale": args.time_scale,
            "max_requests": args.max_requests,
        }
    )
    rows = []
    memory = ""
    for router in args.routers:
        config = ServingConfig(
            model=args.model,
            gpu=args.gpu,
            instances=args.instances,
            latency_model=args.latency_model,
            l2_dram_gib=args.l2_gib,
            router=router,
        )
        start = time.perf_counter()
        result = simulate(config, workload, seed=args.seed)
        seconds = time.perf_counter() - start
        if result.summary is None:
            print(f"{router}: infeasible: {result.reason}", file=sys.stderr)
            return 1
        memory = result.reason
        row = _row(router, result, args.instances, seconds)
        rows.append(row)
        if args.json:
            print(json.dumps(row), flush=True)
        else:
            print(f"  {router}: {seconds:.1f} s", file=sys.stderr, flush=True)
    if not args.json:
        _print_table(
            rows,
            f"{trace.name}, time scale {args.time_scale}, {args.instances} × {args.model} on "
            f"{args.gpu}, seed {args.seed} ({memory})",
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
