"""The SLO-driven autoscaling policy (``autoscale.policy: slo``): it scales on observed latency
against its targets, one start at a time, and not on concurrency."""

from __future__ import annotations

import numpy as np
import pytest
from test_autoscale import MODEL, _config, step_load

from simulator.api import SimResult, simulate
from simulator.cluster.slo_signal import RecentLatency
from simulator.config import ServingConfig
from simulator.records import Recorder, RequestRecord

TTFT_TARGET_MS = 300.0


def _token_bound(**autoscale: object) -> ServingConfig:
    """Steps cost 5 ms + 0.1 ms per token: one instance is saturated by the busy phase."""
    return ServingConfig(
        model=MODEL,
        gpu="h100_sxm",
        instances=4,
        router="least_load",
        latency_model="linear:0.005,0.0001,0.000001",
        autoscale=autoscale,
    )


@pytest.fixture(scope="module")
def overloaded() -> SimResult:
    config = _token_bound(policy="slo", ttft_ms_target=TTFT_TARGET_MS, window_s=30)
    result = simulate(config, step_load(requests=14_000), seed=0, check_invariants=True)
    assert result.fleet is not None
    return result


def _ttft_p90_ms(result: SimResult, lo: float, hi: float) -> float:
    ttft = np.array([r.ttft_s for r in result.records]) * 1e3
    arrival = np.array([r.arrival_s for r in result.records])
    return float(np.percentile(ttft[(arrival >= lo) & (arrival < hi)], 90))


def test_it_scales_up_when_the_target_is_missed_one_start_at_a_time(
    overloaded: SimResult,
) -> None:
    log = overloaded.fleet.log  # type: ignore[union-attr]
    assert log.n_started >= 1
    assert max(log.starting) == 1  # no start while another is still loading
    times, serving = np.array(log.times_s), np.array(log.serving)
    assert serving[times < 300].max() == 1  # the quiet phase meets the target on one
    # Once the added instances serve, the busy phase meets the target again.
    assert _ttft_p90_ms(overloaded, 450, 600) < TTFT_TARGET_MS < _ttft_p90_ms(overloaded, 300, 450)


def test_it_peaks_lower_than_concurrency_tracking_for_the_same_load(
    overloaded: SimResult,
) -> None:
    # Concurrency tracking (8 per instance) runs all 4 in the busy phase; the SLO needs 3.
    # (It steps down one instance per stabilisation window, so it is not cheaper here.)
    tracking = simulate(_token_bound(target_concurrency=8), step_load(requests=14_000), seed=0)
    assert tracking.fleet is not None
    fleet = overloaded.fleet
    assert fleet is not None
    assert max(fleet.log.serving) < max(tracking.fleet.log.serving)


def test_a_target_below_the_prefill_time_starts_nothing() -> None:
    # 1 ms TTFT is below any prefill: every request misses it, but at 2 requests/s one
    # instance has no queue to shorten, so more instances would not help and none is started.
    result = simulate(
        _token_bound(policy="slo", ttft_ms_target=1.0), step_load(rate=2.0, requests=600), seed=0
    )
    ttft = [r.ttft_s for r in result.records]
    assert min(ttft) > 1e-3  # the target is missed throughout
    assert result.fleet is not None
    assert result.fleet.log.n_started == 0


def test_it_does_not_scale_on_concurrency_alone() -> None:
    # Constant 20 ms steps: one instance keeps TTFT near 40 ms through the busy phase, where
    # concurrency tracking (target 8 per instance) starts more.
    slo = simulate(
        _config(policy="slo", ttft_ms_target=TTFT_TARGET_MS), step_load(requests=14_000), seed=0
    )
    tracking = simulate(_config(), step_load(requests=14_000), seed=0)
    assert slo.fleet is not None
    assert tracking.fleet is not None
    assert slo.fleet.log.n_started == 0 < tracking.fleet.log.n_started


def test_recent_latency_keeps_the_window_and_skips_one_token_outputs() -> None:
    recorder = Recorder()
    signal = RecentLatency(recorder, window_s=10.0)
    assert signal.update(0.0) == 0
    assert np.isnan(signal.percentile("ttft_ms", 90))
    for i, (finish, outputs) in enumerate([(1.0, 1), (5.0, 11), (12.0, 11)]):
        recorder.records.append(
            RequestRecord(
                index=i,
                instance=0,
                arrival_s=0.0,
                first_token_s=finish - 1.0,
                finish_s=finish,
                input_tokens=10,
                output_tokens=outputs,
                cached_l1_tokens=0,
                cached_l2_tokens=0,
                cached_l3_tokens=0,
                prefetch_queue_s=0.0,
                waiting_queue_s=0.0,
                swapped_queue_s=0.0,
                preemptions=0,
                computed_tokens=20,
                max_itl_s=0.1,
            )
        )
    assert signal.update(12.0) == 2  # the one finished at 1 s left the window
    assert signal.percentile("tpot_ms", 50) == pytest.approx(1000.0 / 10)
    assert signal.percentile("ttft_ms", 100) == pytest.approx(12_000.0 - 1000.0)
