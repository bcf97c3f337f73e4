"""Analytic sanity: the engine with a constant-latency model is a textbook queue.

One request at a time (``max_running_requests=1``), one-token outputs and a constant step time
D make each request one deterministic service of D seconds: with Poisson arrivals the instance
is an M/D/1 queue, whose mean wait is Pollaczek–Khinchine's ρD / (2(1 − ρ)).
"""

from __future__ import annotations

import numpy as np
import pytest
from engine_helpers import BT, request

from hardware.schema import Catalog
from simulator.api import simulate
from simulator.config import ServingConfig
from simulator.workload.source import OpenLoopSource


def _poisson(n: int, rate: float, seed: int, prompt: int = 10, output: int = 1) -> OpenLoopSource:
    rng = np.random.default_rng(seed)
    times = np.cumsum(rng.exponential(1.0 / rate, n))
    return OpenLoopSource([request(i, float(t), prompt, output) for i, t in enumerate(times)], BT)


def _config(**overrides: object) -> ServingConfig:
    base: dict[str, object] = {
        "model": "toy/Toy-1B",
        "gpu": "toy_gpu",
        "latency_model": "constant:0.01",
        "kv_capacity_tokens": 1 << 20,
        "max_running_requests": 1,
        "max_batched_tokens": 4096,
        "tokenize_us_per_prompt_token": 0.0,  # queueing theory alone: no tokenising latency
    }
    base.update(overrides)
    return ServingConfig.model_validate(base)


def test_md1_mean_wait_matches_pollaczek_khinchine(catalog: Catalog) -> None:
    service, rho = 0.01, 0.6
    rate = rho / service
    result = simulate(_config(), _poisson(60_000, rate, seed=0), seed=0, catalog=catalog)
    waits = np.array([r.waiting_queue_s for r in result.records])
    expected = rho * service / (2 * (1 - rho))
    assert waits.mean() == pytest.approx(expected, rel=0.02)
    # Every request is served in exactly one step of D seconds.
    ttft = np.array([r.ttft_s for r in result.records])
    np.testing.assert_allclose(ttft - waits, service, rtol=1e-9)


def test_littles_law_holds_exactly_and_for_the_sampled_queue(catalog: Catalog) -> None:
    config = _config(latency_model="constant:0.02", max_running_requests=8)
    result = simulate(config, _poisson(4000, 30.0, seed=5, output=20), seed=0, catalog=catalog)
    summary = result.summary
    assert summary is not None
    e2e = np.array([r.e2e_s for r in result.records])
    # ∫ N(t) dt over the run equals the summed sojourn times (exactly, as every request ends).
    area = result.diagnostics["in_system_request_seconds"]
    assert area == pytest.approx(e2e.sum(), rel=1e-9)
    # L = λW with the time-average L from the queue-length samples (sampling noise only).
    samples = result.queue_samples
    assert samples is not None
    in_system = samples.waiting + samples.running + samples.prefetch + samples.swapped
    span = samples.time_s <= max(r.finish_s for r in result.records)
    arrival_rate = len(result.records) / result.records[-1].finish_s
    assert in_system[span].mean() == pytest.approx(arrival_rate * e2e.mean(), rel=0.05)
