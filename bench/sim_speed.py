"""Speed of the serving simulator on the full Mooncake conversation trace.

Default case (the target of the serving-simulator issue): 12,031 requests on 8 instances of
Llama-3.1-70B, fp8 weights and KV, TP4 on H100 SXM, 256 GiB of host-DRAM L2 per instance,
roofline latency model, vLLM preset. Target: ≤ 20 s on one core and ≤ 1 GiB peak memory.

    python bench/sim_speed.py                       # time and memory, one line of metrics
    python bench/sim_speed.py --profile 15          # plus the top cProfile entries
    python bench/sim_speed.py --max-requests 2000 --instances 2
    python bench/sim_speed.py --overload 3          # 3x the trace's arrival rate

Overload (``--overload K``: arrivals K times as fast, i.e. ``time_scale / K``) is the expensive
regime: queues grow, every step carries a prefill chunk next to every running decode, so the
engine cannot batch steps into decode runs and pays per request per step.

Wall and CPU time cover reading the trace and the whole simulation (``simulate``); on a shared
machine CPU time is the steadier figure. Peak memory is the process's maximum resident set.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import resource
import sys
import time
from pathlib import Path

from simulator.api import simulate
from simulator.config import ServingConfig
from simulator.workload.spec import WorkloadSpec

#: ``shared/data/traces`` next to the checkout, or next to a folder above it (a worktree).
DEFAULT_TRACE = next(
    (
        folder / "shared/data/traces"
        for folder in Path(__file__).resolve().parents[2:]
        if (folder / "shared/data/traces").is_dir()
    ),
    Path(__file__).resolve().parents[1].parent / "shared/data/traces",
)
TRACE = DEFAULT_TRACE / "mooncake_conversation_trace.jsonl"


def _args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", type=Path, default=TRACE)
    parser.add_argument("--max-requests", type=int, default=None)
    parser.add_argument("--time-scale", type=float, default=1.0)
    parser.add_argument("--overload", type=float, default=1.0, metavar="K", help="arrival rate x K")
    parser.add_argument("--model", default="meta-llama/Llama-3.1-70B")
    parser.add_argument("--gpu", default="h100_sxm")
    parser.add_argument("--tp", type=int, default=4)
    parser.add_argument("--precision", default="fp8", help="weights and KV")
    parser.add_argument("--instances", type=int, default=8)
    parser.add_argument("--l2-gib", type=float, default=256.0)
    parser.add_argument("--latency-model", default="roofline")
    parser.add_argument("--scheduler", default=None)
    parser.add_argument("--backend", default="vllm", help="preset: vllm, sglang, trtllm")
    parser.add_argument("--router", default="round_robin")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--profile", type=int, default=0, metavar="N", help="top N entries")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; prints one metrics line (and a profile) to stdout."""
    args = _args(argv)
    if not args.trace.exists():
        print(f"trace not found: {args.trace}", file=sys.stderr)
        return 2
    config = ServingConfig(
        model=args.model,
        gpu=args.gpu,
        tp=args.tp,
        weight_precision=args.precision,
        kv_precision=args.precision,
        instances=args.instances,
        l2_dram_gib=args.l2_gib,
        latency_model=args.latency_model,
        scheduler=args.scheduler,
        router=args.router,
        backend=args.backend,
    )
    workload = WorkloadSpec.model_validate(
        {
            "kind": "trace",
            "path": str(args.trace),
            "time_scale": args.time_scale / args.overload,
            "max_requests": args.max_requests,
        }
    )
    profiler = cProfile.Profile() if args.profile else None
    start, cpu_start = time.perf_counter(), time.process_time()
    if profiler is not None:
        profiler.enable()
    result = simulate(config, workload, seed=args.seed)
    if profiler is not None:
        profiler.disable()
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu_start
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    summary = result.summary
    if summary is None:
        print(f"infeasible: {result.reason}")
        return 1
    d = result.diagnostics
    print(
        f"wall {wall:.2f} s  cpu {cpu:.2f} s  ({summary.n_requests / cpu:,.0f} requests per "
        f"CPU-second)  peak RSS {peak_mib:.0f} MiB  "
        f"requests {summary.n_requests} (rejected {summary.n_rejected})  "
        f"steps {d['steps']:.0f}  events {d['events']:.0f}  "
        f"TTFT p50/p90 {summary.ttft_ms.p50:.0f}/{summary.ttft_ms.p90:.0f} ms  "
        f"TPOT p50/p90 {summary.tpot_ms.p50:.1f}/{summary.tpot_ms.p90:.1f} ms  "
        f"hit L1/L2 {summary.hit_ratio['l1']:.3f}/{summary.hit_ratio['l2']:.3f}  "
        f"busy {summary.gpu_busy_fraction:.2f}  preemptions {summary.preemptions}"
    )
    if profiler is not None:
        pstats.Stats(profiler, stream=sys.stdout).sort_stats("tottime").print_stats(args.profile)
    return 0


if __name__ == "__main__":
    sys.exit(main())
