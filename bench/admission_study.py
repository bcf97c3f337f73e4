"""Admission study: what each engine's KV admission policy does once L1 is the limit.

TensorRT-LLM (``GUARANTEED_NO_EVICT``) admits a request only if every running request can
still finish; SGLang sets aside a decaying share of the running requests' remaining output;
vLLM sets nothing aside and preempts (``simulator/engine/admission.py``). Each case runs one
backend preset with its own policy and with each other policy (``kv_admission`` override), and
prints TTFT p50 / p90 and TPOT p50 (ms), output tokens per second, mean running and waiting
requests, mean KV use of L1, preemptions and rejected requests.

Cases (roofline latency model, H100 SXM):

- ``long-output``: Qwen3-32B bf16 on one TP2 instance, a closed loop of 160 users sending
  1,024-token prompts for 2,048-token answers, three each (KV of all users: 160 × 3,072 =
  492k tokens, L1: 340k) — the decode-heavy regime where the policies differ most;
- ``mooncake``: Qwen3-32B bf16 on three TP2 instances, the bundled 800-request Mooncake slice
  at its own rate (long prompts, short answers: reservation costs little). TensorRT-LLM's
  preset runs contexts whole, so it rejects the prompts longer than its 8,192-token step
  (``rejected``).

    python bench/admission_study.py            # both cases, about half a minute
    python bench/admission_study.py --json
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
from simulator.engine.admission import KV_ADMISSIONS
from simulator.workload.closed_loop import closed_loop_workload

BACKENDS = ("trtllm", "sglang", "vllm")


def _workload(case: str) -> Any:
    if case == "long-output":
        return closed_loop_workload(
            users=160, requests=160 * 3, input_tokens=1024, output_tokens=2048, source=case
        )
    return workload_from_arg(None)


def run_case(case: str, backend: str, admission: str, seed: int) -> dict[str, Any]:
    """One simulation; the row the table prints."""
    config = ServingConfig(
        model="Qwen/Qwen3-32B",
        gpu="h100_sxm",
        tp=2,
        instances=1 if case == "long-output" else 3,
        backend=backend,
        latency_model="roofline",
        kv_admission=admission,  # type: ignore[arg-type]
    )
    start = time.process_time()
    result = simulate(config, _workload(case), seed=seed)
    cpu_s = time.process_time() - start
    summary = simulation_summary(result)
    queues = summary["utilization"]["mean_queue_lengths"]
    return {
        "case": case,
        "backend": backend,
        "kv_admission": admission,
        "ttft_p50_ms": summary["ttft_ms"]["p50"],
        "ttft_p90_ms": summary["ttft_ms"]["p90"],
        "tpot_p50_ms": summary["tpot_ms"]["p50"],
        "output_tokens_per_s": summary["throughput"]["output_tokens_per_s"],
        "running": queues["running"],
        "waiting": queues["waiting"],
        "kv_use": summary["utilization"]["kv_utilization"],
        "preemptions": summary["requests"]["preemptions"],
        "rejected": summary["requests"]["rejected"],
        "cpu_s": cpu_s,
    }


def main(argv: Sequence[str] | None = None) -> int:
    """Simulate every (case, backend, policy) and print the table or JSON lines."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default="long-output,mooncake")
    parser.add_argument("--backends", default=",".join(BACKENDS))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    header = (
        f"{'backend':<7} {'kv_admission':<17} {'TTFT p50':>9} {'p90':>8} {'TPOT p50':>8} "
        f"{'out tok/s':>9} {'running':>7} {'waiting':>7} {'KV use':>6} {'preempt':>7} "
        f"{'reject':>6} {'CPU s':>5}"
    )
    for case in [c for c in args.cases.split(",") if c]:
        if not args.json:
            print(f"\n{case}\n{header}")
        for backend in [b for b in args.backends.split(",") if b]:
            for admission in KV_ADMISSIONS:
                row = run_case(case, backend, admission, args.seed)
                if args.json:
                    print(json.dumps(row))
                    continue
                print(
                    f"{backend:<7} {admission:<17} {row['ttft_p50_ms']:>9.0f} "
                    f"{row['ttft_p90_ms']:>8.0f} {row['tpot_p50_ms']:>8.1f} "
                    f"{row['output_tokens_per_s']:>9.0f} {row['running']:>7.1f} "
                    f"{row['waiting']:>7.1f} {row['kv_use']:>6.2f} {row['preemptions']:>7d} "
                    f"{row['rejected']:>6d} {row['cpu_s']:>5.1f}"
                )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
