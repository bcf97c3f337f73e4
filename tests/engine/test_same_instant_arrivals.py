"""Requests arriving at the same instant share the first step (a real scheduler sees them all)."""

from __future__ import annotations

import pytest

from simulator.api import simulate
from simulator.config import ServingConfig
from simulator.workload.spec import WorkloadSpec


def test_simultaneous_arrivals_are_prefilled_in_one_step() -> None:
    config = ServingConfig(
        model="Qwen/Qwen3-8B",
        gpu="h100_sxm",
        latency_model="constant:0.01",
        scheduler="prefill_first",
        tokenize_us_per_prompt_token=0.0,  # the arrivals reach the engine when they are sent
    )
    workload = WorkloadSpec.model_validate(
        {"kind": "closed_loop", "users": 4, "requests": 4, "input_tokens": 256, "output_tokens": 4}
    )
    result = simulate(config, workload, seed=0)
    ttfts = sorted(r.ttft_s for r in result.records)
    assert ttfts == pytest.approx([0.01] * 4)
