"""Giving up when the run drops overlong requests: they are not in the attainment's
denominator, so the watch must not count them as misses (``MissRule.max_context_tokens``)."""

from __future__ import annotations

from dataclasses import replace

import pytest

import slo
from hardware.catalog import load_catalog
from simulator.api import simulate
from simulator.config import ServingConfig
from simulator.give_up import Decided, MissRule, Watched
from simulator.workload.spec import WorkloadSpec

SPEC = slo.SloSpec.model_validate(
    {"name": "t", "targets": {"ttft_ms": {"p90": 400}, "tpot_ms": {"p90": 8}}, "attainment": 0.9}
)
RULE = MissRule(floor=0.9, ttft_s=0.4, tpot_s=0.008)
MODEL = "Qwen/Qwen3-8B"


def _config() -> ServingConfig:
    # 5 ms a step whatever the batch, room for every request: each request meets its bars.
    return ServingConfig(
        model=MODEL, gpu="h100_sxm", latency_model="constant:0.005", kv_capacity_tokens=4_000_000
    )


def _workload(limit: int) -> WorkloadSpec:
    # About a fifth of the prompts are longer than the model's context.
    return WorkloadSpec.model_validate(
        {
            "kind": "open_loop",
            "requests": 100,
            "arrival": {"process": "poisson", "rate_per_s": 5},
            "input_tokens": {"dist": "uniform", "low": 200, "high": int(limit * 1.25)},
            "output_tokens": 8,
        }
    )


def test_dropped_overlong_requests_are_not_counted_as_misses() -> None:
    limit = load_catalog(None).model(MODEL).max_context_tokens
    workload = _workload(limit)
    full = simulate(_config(), workload, seed=1)
    assert full.summary is not None
    assert full.summary.n_requests < 95  # some were dropped
    assert slo.attainment(full.per_request_ms(), SPEC) >= 0.9  # the rest all meet the SLO
    counted = replace(RULE, max_context_tokens=limit)
    watched = simulate(_config(), Watched(workload, counted, []), seed=1)
    assert watched.summary == full.summary
    # Counting the dropped requests (which never finish) as misses gives up on a passing run.
    with pytest.raises(Decided):
        simulate(_config(), Watched(workload, RULE, []), seed=1)
