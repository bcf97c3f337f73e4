"""``load_imbalance``: exact time integral of max / mean outstanding requests, per pool."""

from __future__ import annotations

from typing import Any

import pytest

from simulator.api import simulate
from simulator.config import ServingConfig
from simulator.records import Recorder
from simulator.workload.request import TraceRequest
from simulator.workload.source import OpenLoopSource

BT = 16


def test_recorder_integrates_max_over_mean_exactly() -> None:
    recorder = Recorder()
    recorder.set_pools([[0, 1]])
    recorder.load(0.0, 0, 2)
    recorder.load(0.0, 1, 1)
    recorder.load(1.0, 1, -1)  # (2, 1) for 1 s, then (2, 0) for 1 s
    recorder.load(2.0, 0, -2)
    # ∫max = 2 + 2 = 4; ∫mean = 1.5 + 1 = 2.5
    assert recorder.load_imbalance(2.0) == pytest.approx(4 / 2.5)
    # Idle time after the end changes nothing.
    assert recorder.load_imbalance(10.0) == pytest.approx(4 / 2.5)


def test_the_worse_pool_is_reported_and_an_idle_run_is_balanced() -> None:
    recorder = Recorder()
    recorder.set_pools([[0, 1], [2, 3]])
    for instance in (0, 1, 2):
        recorder.load(0.0, instance, 1)
    assert recorder.load_imbalance(1.0) == pytest.approx(2.0)  # pool 2: (1, 0)
    assert Recorder().load_imbalance(5.0) == 1.0


def test_undeclared_instances_form_one_pool() -> None:
    recorder = Recorder()  # a hand-wired instance never calls set_pools
    recorder.load(0.0, 3, 1)
    recorder.load(0.0, 5, 3)
    recorder.load(1.0, 5, -3)
    recorder.load(1.0, 3, -1)
    assert recorder.load_imbalance(1.0) == pytest.approx(3 / 2)


def _run(**fields: Any) -> tuple[float, dict[str, Any], dict[str, float]]:
    config = ServingConfig(
        model="Qwen/Qwen3-8B",
        gpu="h100_sxm",
        latency_model="constant:0.01",
        kv_capacity_tokens=65536,
        tokenize_us_per_prompt_token=0.0,  # hand-computed timings: no tokenising latency
        **fields,
    )
    # Two requests at once: round robin sends the long one to one instance, the short one to
    # the other.
    requests = [
        TraceRequest(0, 0.0, 160, 1000, tuple(range(1, 11))),
        TraceRequest(1, 0.0, 160, 10, tuple(range(101, 111))),
    ]
    result = simulate(config, OpenLoopSource(requests, BT), seed=0, check_invariants=True)
    assert result.summary is not None
    return (
        result.summary.load_imbalance,
        result.to_dict()["summary"],
        result.metrics_for_slo(),
    )


def test_aggregated_pool_imbalance_in_summary_dict_and_slo_metrics() -> None:
    imbalance, summary, metrics = _run(instances=2)
    # Instance 0 holds a request for 1000 steps, instance 1 for 10: 2·1000 / (1000 + 10).
    assert imbalance == pytest.approx(2000 / 1010, rel=1e-9)
    assert summary["load_imbalance"] == pytest.approx(imbalance)
    assert metrics["load_imbalance"] == pytest.approx(imbalance)


def test_single_instance_is_balanced() -> None:
    imbalance, _, _ = _run(instances=1)
    assert imbalance == 1.0


def test_pd_pools_are_measured_apart() -> None:
    # One prefill instance is balanced by definition; the decode pool carries the imbalance.
    imbalance, _, _ = _run(
        pd_mode="disaggregated",
        prefill_instances=1,
        decode_instances=2,
        decode_router="round_robin",
    )
    assert 1.9 < imbalance < 2.0
