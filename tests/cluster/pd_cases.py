"""Shared by the PD tests: a 1P1D deployment of constant-time steps and requests with their own
blocks (no prefix shared between requests)."""

from __future__ import annotations

from typing import Any

from simulator.config import ServingConfig
from simulator.workload.request import TraceRequest

BT = 16
MODEL = "Qwen/Qwen3-8B"


def pd_request(index: int, time_s: float, prompt: int, output: int) -> TraceRequest:
    """Request ``index`` arriving at ``time_s`` with blocks no other request holds."""
    blocks = tuple(100_000 * (index + 1) + k for k in range(-(-prompt // BT)))
    return TraceRequest(index, time_s, prompt, output, blocks)


def pd_config(step_s: float, **extra: Any) -> ServingConfig:
    """One prefill and one decode H100 instance, every step ``step_s`` seconds; ``extra``
    fields override."""
    data: dict[str, Any] = {
        "model": MODEL,
        "gpu": "h100_sxm",
        "latency_model": f"constant:{step_s}",
        "kv_capacity_tokens": 65536,
        "chunk_tokens": 4096,
        "max_batched_tokens": 8192,
        "pd_mode": "disaggregated",
        "prefill_instances": 1,
        "decode_instances": 1,
        "tokenize_us_per_prompt_token": 0.0,  # hand-computed timings: no tokenising latency
    }
    data.update(extra)
    return ServingConfig(**data)
