"""Digests of simulated outputs, to show that a speed change left every result bit-identical.

Runs ``bench/sim_speed.py``'s two scenarios (the full Mooncake conversation trace at nominal
and 3x load) and a set of smaller configurations that reach the other engine paths (every
scheduler, swap and recompute preemption, L3 prefetch policies with write-back, other eviction
policies, PD, the least-load router, the table latency model, reserve-estimate admission,
SGLang and TensorRT-LLM presets), and prints one SHA-256 per case of everything the result
holds: per-request records, diagnostics, pooled ITL arrays, summary, queue samples.

    python bench/sim_digest.py > new.txt      # in each tree, then: diff base.txt new.txt
    python bench/sim_digest.py --quick        # the small cases only (seconds, not minutes)
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from pathlib import Path
from typing import Any

from simulator.api import SimResult, simulate
from simulator.config import ServingConfig
from simulator.workload.spec import WorkloadSpec

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sim_speed import TRACE

#: sim_speed.py's default deployment.
BENCH: dict[str, Any] = {
    "model": "meta-llama/Llama-3.1-70B",
    "gpu": "h100_sxm",
    "tp": 4,
    "weight_precision": "fp8",
    "kv_precision": "fp8",
    "instances": 8,
    "l2_dram_gib": 256.0,
    "latency_model": "roofline",
}
#: A smaller deployment that preempts under 3x load (L1 of a few thousand blocks).
SMALL: dict[str, Any] = {**BENCH, "instances": 2, "l2_dram_gib": 16.0}

#: Case name -> (config overrides on SMALL, requests, load factor); None = the full trace.
CASES: dict[str, tuple[dict[str, Any], int | None, float]] = {
    "chunked": ({}, 1500, 3.0),
    "decode_first": ({"scheduler": "decode_first"}, 1500, 3.0),
    "prefill_first": ({"scheduler": "prefill_first"}, 1500, 3.0),
    "swap": ({"preemption": "swap", "hbm_utilization": 0.5}, 1500, 3.0),
    "recompute_small_l1": ({"hbm_utilization": 0.5}, 1500, 3.0),
    "l3_wait_complete": (
        {"l3_tier": "nvme_4tib", "prefetch_policy": "wait_complete", "l2_dram_gib": 2.0},
        1500,
        2.0,
    ),
    "l3_timeout_write_back": (
        {
            "l3_tier": "nvme_4tib",
            "prefetch_policy": "timeout",
            "write_policy": "write_back",
            "l2_dram_gib": 2.0,
        },
        1500,
        2.0,
    ),
    "s3fifo_lfu": ({"l1_policy": "s3fifo", "l2_policy": "lfu"}, 1500, 3.0),
    "lfu_arc": ({"l1_policy": "lfu", "l2_policy": "arc", "l2_dram_gib": 1.0}, 1500, 3.0),
    "least_load": ({"router": "least_load", "instances": 3}, 1500, 3.0),
    "pd": (
        {"pd_mode": "disaggregated", "prefill": {"instances": 1}, "decode": {"instances": 1}},
        1000,
        2.0,
    ),
    "table": ({"latency_model": "table"}, 1500, 3.0),
    "sglang": ({"backend": "sglang"}, 1500, 3.0),
    "trtllm_reserve": ({"backend": "trtllm"}, 1500, 2.0),
    "nominal_small": ({}, 3000, 1.0),
}
FULL: dict[str, tuple[dict[str, Any], int | None, float]] = {
    "bench_nominal": ({}, None, 1.0),
    "bench_overload3": ({}, None, 3.0),
}


def digest(result: SimResult) -> str:
    """SHA-256 of everything ``result`` reports (floats by ``repr``: exact)."""
    h = hashlib.sha256()
    h.update(repr((result.feasible, result.reason, result.engine)).encode())
    for record in result.records:
        h.update(repr(record).encode())
    h.update(repr(sorted(result.diagnostics.items())).encode())
    if result.summary is not None:
        h.update(repr(result.summary.to_dict()).encode())
    if result.itl_s is not None:
        for array in result.itl_s:
            h.update(array.tobytes())
    samples = result.queue_samples
    if samples is not None:
        for name in ("time_s", "waiting", "prefetch", "running", "swapped", "weight"):
            h.update(getattr(samples, name).tobytes())
    return h.hexdigest()[:16]


def run_case(overrides: dict[str, Any], n: int | None, load: float, trace: Path) -> SimResult:
    """One simulation: ``overrides`` on the small (or, for the full trace, the bench)
    deployment, the first ``n`` requests of ``trace`` at ``load`` times its arrival rate."""
    base = BENCH if n is None else SMALL
    config = ServingConfig.model_validate({**base, **overrides})
    workload = WorkloadSpec.model_validate(
        {"kind": "trace", "path": str(trace), "time_scale": 1.0 / load, "max_requests": n}
    )
    return simulate(config, workload, seed=0)


def main(argv: list[str] | None = None) -> int:
    """Print ``name digest requests`` per case."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", type=Path, default=TRACE)
    parser.add_argument("--quick", action="store_true", help="skip the two full-trace cases")
    args = parser.parse_args(argv)
    cases = CASES if args.quick else {**FULL, **CASES}
    for name, (overrides, n, load) in cases.items():
        result = run_case(overrides, n, load, args.trace)
        done = result.summary.n_requests if result.summary is not None else 0
        pre = result.summary.preemptions if result.summary is not None else 0
        print(f"{name:24s} {digest(result)}  requests {done}  preemptions {pre}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
