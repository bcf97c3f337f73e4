"""Autoscaling the two pools of a disaggregated deployment (``simulator/scaling.py``): each pool
follows its own load, hand-offs go to serving decode instances only, and the period's bill adds
each pool at its own price."""

from __future__ import annotations

import bisect
from typing import Any

import numpy as np
import pytest
from test_autoscale import step_load

from hardware.catalog import shipped_catalog
from optimizer.configs import known_names, to_config
from simulator.api import SimResult, simulate
from simulator.cluster.autoscale import AutoscaleConfig
from simulator.cluster.fleet import FleetLog
from simulator.config import ServingConfig
from simulator.cost import deployment_cost
from simulator.workload.spec import WorkloadSpec

MODEL = "Qwen/Qwen3-8B"
PREFILL, DECODE = 3, 4


def _config(prefill: dict[str, Any] | None, decode: dict[str, Any] | None) -> ServingConfig:
    return ServingConfig(
        model=MODEL,
        gpu="h100_sxm",
        router="least_load",
        latency_model="constant:0.02",
        pd_mode="disaggregated",
        prefill={"instances": PREFILL, "tp": 2, "autoscale": prefill},
        decode={"instances": DECODE, "tp": 1, "autoscale": decode},
    )


def _policy(target: float) -> dict[str, Any]:
    return {"target_concurrency": target, "scale_down_delay_s": 60}


def _step_load(requests: int = 9_000) -> WorkloadSpec:
    """``step_load`` at 25 requests/s with decode-heavy requests (200-token prompt, 60 output
    tokens), so the decode pool holds most of the requests in the system."""
    return step_load(rate=25.0, requests=requests, output_tokens=60)


@pytest.fixture(scope="module")
def both() -> SimResult:
    # A prefill holds a request ~2 steps (prefill, then the KV transfer), a decode 60 steps:
    # targets in proportion, so both pools need several instances at the busy step.
    config = _config(_policy(0.5), _policy(8))
    result = simulate(config, _step_load(), seed=0, check_invariants=True)
    assert result.feasible, result.reason
    return result


def _serving_at(log: FleetLog, time_s: float) -> int:
    """Serving instances at ``time_s`` (after every change at or before it)."""
    return log.serving[max(bisect.bisect_right(log.times_s, time_s) - 1, 0)]


def test_each_pool_follows_the_step_up_and_down(both: SimResult) -> None:
    assert set(both.fleets) == {"prefill", "decode"}
    assert both.fleet is None  # the aggregated accessor: there is no single pool
    for name, most in (("prefill", PREFILL), ("decode", DECODE)):
        log = both.fleets[name].log
        times, serving = np.array(log.times_s), np.array(log.serving)
        assert serving[0] == 1, name  # min_instances at time 0
        assert serving[times < 300].max() == 1, name
        assert serving[(times > 300) & (times < 700)].max() >= 2, name  # the busy step
        assert serving.max() <= most, name
        assert serving[-1] == 1, name  # back to the minimum at the end


def test_hand_offs_go_to_serving_decode_instances_only(both: SimResult) -> None:
    log = both.fleets["decode"].log
    used = set()
    for record in both.records:
        decode_index = record.instance - PREFILL  # records name the decode instance
        # Handed off when its prefill ended (its first token): to the serving prefix then.
        assert 0 <= decode_index < _serving_at(log, record.first_token_s)
        used.add(decode_index)
    assert len(used) >= 2  # the started instances did take hand-offs


def test_the_bill_adds_each_pool_at_its_own_price(both: SimResult) -> None:
    gpu = shipped_catalog().gpu("h100_sxm").usd_per_gpu_hour
    period = both.fleets["prefill"].period_s
    assert both.fleets["decode"].period_s == period
    prefill_s = both.fleets["prefill"].log.instance_seconds
    decode_s = both.fleets["decode"].log.instance_seconds
    expected = (prefill_s * 2 * gpu + decode_s * 1 * gpu) / period  # TP2 and TP1 instances
    assert both.summary is not None
    assert both.metrics_for_slo()["usd_per_hour"] == pytest.approx(expected)
    full = deployment_cost(_config(None, None), shipped_catalog()).usd_per_hour
    assert expected < 0.6 * full  # mostly one instance of each: far below the full fleet


def test_a_pool_without_a_policy_is_paid_in_full() -> None:
    result = simulate(_config(None, _policy(8)), _step_load(requests=3_000), seed=1)
    assert set(result.fleets) == {"decode"}
    gpu = shipped_catalog().gpu("h100_sxm").usd_per_gpu_hour
    decode = result.fleets["decode"]
    expected = PREFILL * 2 * gpu + decode.log.instance_seconds * gpu / decode.period_s
    assert result.metrics_for_slo()["usd_per_hour"] == pytest.approx(expected)


def test_same_seed_same_fleets() -> None:
    config = _config(_policy(0.5), _policy(8))
    first = simulate(config, _step_load(requests=2_000), seed=5)
    again = simulate(config, _step_load(requests=2_000), seed=5)
    assert first.records == again.records
    assert {k: v.log for k, v in first.fleets.items()} == {
        k: v.log for k, v in again.fleets.items()
    }


def test_pool_policies_fold_from_flat_names() -> None:
    config = ServingConfig.model_validate(
        {
            "model": MODEL,
            "gpu": "h100_sxm",
            "pd_mode": "disaggregated",
            "prefill_instances": 2,
            "decode_instances": 3,
            "decode_autoscale_target_concurrency": 6,
            "decode_autoscale_min_instances": 2,
        }
    )
    assert config.decode is not None
    assert config.decode.autoscale is not None
    assert (config.decode.autoscale.target_concurrency, config.decode.autoscale.min_instances) == (
        6,
        2,
    )
    assert config.prefill is not None
    assert config.prefill.autoscale is None
    assert {"decode_autoscale_target_concurrency", "prefill_autoscale_policy"} <= set(known_names())


def test_a_search_space_names_each_pools_policy_fields_flat() -> None:
    config = to_config(
        MODEL,
        {"gpu": "h100_sxm", "pd_mode": "disaggregated", "prefill_instances": 2,
         "decode_instances": 4, "decode_autoscale_target_concurrency": 16,
         "prefill_autoscale_target_concurrency": 2},
    )  # fmt: skip
    assert config.decode is not None
    assert config.decode.autoscale == AutoscaleConfig(target_concurrency=16)
    assert config.prefill is not None
    assert config.prefill.autoscale == AutoscaleConfig(target_concurrency=2)
