"""Queue-length samples cost memory per event gap, not per simulated second, and say exactly
what a plain chain of one sample per grid point says."""

from __future__ import annotations

import math

import numpy as np
import pytest
from engine_helpers import BT, request

import simulator.api as api_module
from hardware.schema import Catalog
from simulator.api import SimResult, simulate
from simulator.cluster.driver import Cluster, _last_point_before
from simulator.config import ServingConfig
from simulator.workload.source import OpenLoopSource

#: Epoch milliseconds of 2024-12-02, as a trace written with wall-clock timestamps has them.
EPOCH_S = 1_733_100_000.0


def _config() -> ServingConfig:
    return ServingConfig.model_validate(
        {
            "model": "toy/Toy-1B",
            "gpu": "toy_gpu",
            "latency_model": "constant:0.01",
            "kv_capacity_tokens": 1 << 20,
            "max_running_requests": 4,
            "tokenize_us_per_prompt_token": 0.0,  # arrivals reach the queue at once
        }
    )


def _gapped(n: int, start_s: float, seed: int) -> OpenLoopSource:
    """``n`` requests from ``start_s`` on: bursts a few seconds apart, with idle gaps."""
    rng = np.random.default_rng(seed)
    times = start_s + np.cumsum(rng.choice([0.0, 0.004, 0.3, 7.5, 40.0], size=n))
    return OpenLoopSource(
        [request(i, float(t), 64, int(rng.integers(1, 30))) for i, t in enumerate(times)], BT
    )


class _PlainChain(Cluster):
    """The reference: one sample at every grid point, as the driver sampled before."""

    def _sample(self) -> None:
        queues = (
            sum(len(i.waiting) for i in self.instances),
            sum(len(i.prefetching) for i in self.instances),
            sum(len(i.running) for i in self.instances),
            sum(len(i.swapped) for i in self.instances),
        )
        self.recorder.sample(self.kernel.now, queues)
        if self.kernel.peek() < math.inf:
            self.kernel.after(self.sample_interval_s, self._sample)


def _expanded(result: SimResult) -> tuple[np.ndarray, np.ndarray]:
    """(grid times, waiting + 10·running) with every sample repeated by its weight."""
    samples = result.queue_samples
    assert samples is not None
    times, values = [], []
    for t, w, r, weight in zip(
        samples.time_s, samples.waiting, samples.running, samples.weight, strict=True
    ):
        t_k = float(t)
        for _ in range(int(weight)):
            times.append(t_k)
            values.append(int(w) + 10 * int(r))
            t_k += samples.interval_s
    return np.array(times), np.array(values)


@pytest.mark.parametrize("interval_s", [1.0, 0.37, 0.01])
def test_samples_equal_a_plain_chain_of_one_per_grid_point(
    catalog: Catalog, monkeypatch: pytest.MonkeyPatch, interval_s: float
) -> None:
    run = lambda: simulate(  # noqa: E731
        _config(), _gapped(200, 0.0, seed=4), seed=0, catalog=catalog, sample_interval_s=interval_s
    )
    compact = run()
    monkeypatch.setattr(api_module, "Cluster", _PlainChain)
    plain = run()
    assert plain.queue_samples is not None
    assert compact.queue_samples is not None
    assert len(compact.queue_samples.time_s) < len(plain.queue_samples.time_s) / 3
    times, values = _expanded(compact)
    np.testing.assert_array_equal(times, plain.queue_samples.time_s)
    reference = plain.queue_samples.waiting + 10 * plain.queue_samples.running
    np.testing.assert_array_equal(values, reference)
    assert compact.summary is not None
    assert plain.summary is not None
    assert compact.summary.mean_queue_lengths == plain.summary.mean_queue_lengths
    assert compact.summary.mean_queue_lengths["running"] > 0


def test_epoch_timestamps_cost_samples_per_event_not_per_second(catalog: Catalog) -> None:
    """30 requests at epoch-second timestamps: a plain chain would take 1.7e9 samples (GBs)."""
    result = simulate(_config(), _gapped(30, EPOCH_S, seed=1), seed=0, catalog=catalog)
    samples = result.queue_samples
    assert samples is not None
    assert result.summary is not None
    assert result.summary.n_requests == 30
    assert len(samples.time_s) < 200
    # Every grid point 0, 1, …, the last one counted once, the idle span from 0 included.
    assert samples.weight.sum() == samples.time_s[-1] + 1
    assert samples.time_s[-1] > EPOCH_S
    assert result.summary.mean_queue_lengths["running"] < 1e-6


def test_a_long_idle_gap_is_one_sample(catalog: Catalog) -> None:
    """Two requests a simulated 11.6 days apart: a handful of samples, the gap one of them."""
    source = OpenLoopSource([request(0, 0.0, 64, 5), request(1, 1e6, 64, 5)], BT)
    result = simulate(_config(), source, seed=0, catalog=catalog)
    samples = result.queue_samples
    assert samples is not None
    assert result.summary is not None
    assert len(samples.time_s) <= 6
    assert samples.weight.max() >= 1e6 - 2
    # The grid points 0, 1, …, 1e6 + 1 (the last after the second request's step): each once.
    assert samples.weight.sum() == samples.time_s[-1] + 1 == 1e6 + 2
    waiting = float(np.sum(samples.waiting * samples.weight)) / (1e6 + 2)
    assert result.summary.mean_queue_lengths["waiting"] == waiting > 0


@pytest.mark.parametrize(
    ("now", "step", "upcoming"),
    [(0.0, 1.0, 0.5), (0.0, 1.0, 1.0), (0.0, 1.0, 1e9 + 0.5), (3.0, 0.37, 1e7), (5.5, 0.1, 5.5)],
)
def test_last_point_before_the_next_event(now: float, step: float, upcoming: float) -> None:
    last, count = _last_point_before(now, step, upcoming)
    assert last >= now
    assert count >= 1
    assert count == int(count)
    assert last < upcoming or last == now
    assert last + step >= upcoming
    assert last == pytest.approx(now + (count - 1) * step, rel=1e-12)
