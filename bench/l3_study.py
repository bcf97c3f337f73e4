"""L3 study: what each L3 tier buys on the bundled Mooncake slice, and what its writes cost.

Default case: Qwen3-32B (bf16) on 4 instances of TP2 H100 SXM (one 8-GPU server), 128 GiB of
host DRAM (L2) per instance, write-through, best-effort prefetch, the bundled 800-request
Mooncake conversation slice at its own rate, roofline latency model. Per L3 tier (none, one
NVMe drive, four striped drives, the 16 TiB remote pool) and per write backlog it prints:

- ``TTFT p50 / p90`` (ms), the shares of prompt tokens served from L1, L2 and L3, and the
  share of prefill tokens saved;
- ``written`` / ``dropped``: L3 block copies that landed, and copies dropped because the
  store's write queue was more than ``l3_write_backlog_s`` behind (``engine/store_writer.py``);
- ``USD/h`` of the deployment.

    python bench/l3_study.py                          # the table (about a minute)
    python bench/l3_study.py --backlogs 1,1000 --instances 8 --tp 1
    python bench/l3_study.py --json

A backlog of 1000 s is in effect "never drop": the store then serves only what its write rate
lets it hold, late.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Sequence
from typing import Any

from optimizer.cli.simulate_output import simulation_summary
from optimizer.workloads import workload_from_arg
from simulator.api import simulate
from simulator.config import ServingConfig

TIERS = ("none", "nvme_4tib", "nvme_16tib", "pool_16tib")


def run_case(args: argparse.Namespace, tier: str, backlog_s: float) -> dict[str, Any]:
    """One simulation; the row the table prints."""
    config = ServingConfig(
        model=args.model,
        gpu=args.gpu,
        tp=args.tp,
        instances=args.instances,
        l2_dram_gib=args.l2_gib,
        l3_tier=None if tier == "none" else tier,
        l3_write_backlog_s=backlog_s,
        latency_model=args.latency,
    )
    start = time.process_time()
    result = simulate(config, workload_from_arg(None), seed=args.seed)
    cpu_s = time.process_time() - start
    if result.summary is None:
        return {"tier": tier, "backlog_s": backlog_s, "infeasible": result.reason}
    summary = simulation_summary(result)
    cache = summary["cache"]
    return {
        "tier": tier,
        "backlog_s": backlog_s,
        "ttft_p50_ms": summary["ttft_ms"]["p50"],
        "ttft_p90_ms": summary["ttft_ms"]["p90"],
        "l1": cache["l1_hit_ratio"],
        "l2": cache["l2_hit_ratio"],
        "l3": cache["l3_hit_ratio"],
        "saved": cache["prefill_tokens_saved_ratio"],
        "written": result.diagnostics.get("l3_blocks_written", 0.0),
        "dropped": result.diagnostics.get("l3_writes_dropped", 0.0),
        "usd_per_hour": result.cost.usd_per_hour,
        "cpu_s": cpu_s,
    }


def main(argv: Sequence[str] | None = None) -> int:
    """Simulate every (tier, backlog) case and print the table or JSON lines."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="Qwen/Qwen3-32B")
    parser.add_argument("--gpu", default="h100_sxm")
    parser.add_argument("--tp", type=int, default=2)
    parser.add_argument("--instances", type=int, default=4)
    parser.add_argument("--l2-gib", type=float, default=128.0)
    parser.add_argument("--latency", default="roofline")
    parser.add_argument("--backlogs", default="1,1000", help="comma list of seconds")
    parser.add_argument("--tiers", default=",".join(TIERS))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    backlogs = [float(b) for b in args.backlogs.split(",") if b]
    rows = []
    for tier in [t for t in args.tiers.split(",") if t]:
        for backlog in backlogs if tier != "none" else backlogs[:1]:
            row = run_case(args, tier, backlog)
            rows.append(row)
            if args.json:
                print(json.dumps(row))
    if args.json:
        return 0
    print(
        f"{args.model} on {args.instances} x TP{args.tp} {args.gpu}, L2 {args.l2_gib:g} GiB "
        "per instance, bundled Mooncake slice (800 requests)"
    )
    header = (
        f"{'L3':<11} {'backlog':>7} {'TTFT p50':>9} {'p90':>7} {'L1':>6} {'L2':>6} {'L3':>6} "
        f"{'saved':>6} {'written':>8} {'dropped':>8} {'USD/h':>7} {'CPU s':>6}"
    )
    print(header)
    for r in rows:
        if "infeasible" in r:
            print(f"{r['tier']:<11} infeasible: {r['infeasible']}")
            continue
        print(
            f"{r['tier']:<11} {r['backlog_s']:>7g} {r['ttft_p50_ms']:>9.0f} "
            f"{r['ttft_p90_ms']:>7.0f} {r['l1']:>6.3f} {r['l2']:>6.3f} {r['l3']:>6.3f} "
            f"{r['saved']:>6.3f} {r['written']:>8.0f} {r['dropped']:>8.0f} "
            f"{r['usd_per_hour']:>7.2f} {r['cpu_s']:>6.1f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
