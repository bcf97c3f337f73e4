"""Autoscaling an aggregated pool (``cluster/autoscale.py``): when instances start, serve, drain
and stop, where requests go meanwhile, and what the period costs."""

from __future__ import annotations

import bisect
from typing import Any

import numpy as np
import pytest

from hardware.catalog import shipped_catalog
from optimizer.configs import known_names, to_config
from optimizer.space_check import check_setting
from simulator.api import SimResult, simulate
from simulator.build import Pool, build_pool
from simulator.cluster.autoscale import AutoscaleConfig, Autoscaler
from simulator.cluster.driver import Cluster
from simulator.config import ServingConfig
from simulator.core import Kernel
from simulator.records import Recorder
from simulator.workload.spec import WorkloadSpec
from slo.inputfile import InputError, validate

MODEL = "Qwen/Qwen3-8B"
STEP_S = 0.02


def _config(**autoscale: Any) -> ServingConfig:
    return ServingConfig(
        model=MODEL,
        gpu="h100_sxm",
        instances=4,
        router="least_load",
        latency_model=f"constant:{STEP_S}",
        autoscale={"target_concurrency": 8, "scale_down_delay_s": 60, **autoscale},
    )


def step_load(rate: float = 40.0, requests: int = 30_000, output_tokens: int = 20) -> WorkloadSpec:
    """Quiet (0.05×) for 300 s, busy (1×) for 300 s, quiet again: a load step up and down."""
    pieces = [
        {"until_s": 300, "scale": 0.05},
        {"until_s": 600, "scale": 1.0},
        {"until_s": 1e6, "scale": 0.05},
    ]
    return WorkloadSpec.model_validate(
        {
            "kind": "open_loop",
            "requests": requests,
            "arrival": {"process": "poisson", "rate_per_s": rate, "profile": {"pieces": pieces}},
            "input_tokens": 200,
            "output_tokens": output_tokens,
        }
    )


@pytest.fixture(scope="module")
def stepped() -> SimResult:
    result = simulate(_config(), step_load(requests=14_000), seed=0, check_invariants=True)
    assert result.feasible, result.reason
    return result


def test_start_up_is_one_gpus_weights_over_the_load_bandwidth_plus_engine_init(
    stepped: SimResult,
) -> None:
    weights = shipped_catalog().model(MODEL).weight_bytes("bf16")  # TP1: all of them
    assert stepped.fleet is not None
    assert stepped.fleet.log.startup_s == pytest.approx(weights / 2e9 + 60.0)


def test_the_fleet_follows_the_step_up_and_back_down(stepped: SimResult) -> None:
    assert stepped.fleet is not None
    log = stepped.fleet.log
    times = np.array(log.times_s)
    serving = np.array(log.serving)
    assert serving[0] == 1  # min_instances serve from time 0
    assert serving[times < 300].max() == 1  # the quiet start needs one
    first_start = times[np.array(log.starting) > 0].min()
    assert first_start >= 300  # nothing started before the step
    busy = serving[(times >= 300 + log.startup_s) & (times < 600)]
    assert busy.max() > 1
    assert serving.max() <= 4
    assert serving[-1] == 1  # back to the minimum after the step (60 s delay)
    assert log.n_stopped >= 1
    # Serving grows only when a start completes (start-up time after it) or when a draining
    # instance is taken back (the draining count falls at that change).
    start_times = [t for j, t in enumerate(times[1:], 1) if log.starting[j] > log.starting[j - 1]]
    for j in range(1, len(times)):
        if serving[j] > serving[j - 1]:
            taken_back = log.draining[j] < log.draining[j - 1]
            started = any(times[j] == pytest.approx(t + log.startup_s) for t in start_times)
            assert taken_back or started, (times[j], serving[j - 1], serving[j])


def test_requests_go_only_to_instances_that_were_serving(stepped: SimResult) -> None:
    assert stepped.fleet is not None
    log = stepped.fleet.log

    def serving_at(t: float) -> int:
        return log.serving[bisect.bisect_right(log.times_s, t) - 1]

    for record in stepped.records:
        # Serving instances are a prefix 0..k-1 of the pool.
        assert record.instance < serving_at(record.arrival_s), record


def test_the_period_is_billed_by_the_instances_paid_for(stepped: SimResult) -> None:
    fleet = stepped.fleet
    assert fleet is not None
    assert stepped.summary is not None
    full = stepped.cost  # the fleet's price averaged; the largest fleet's is 4 × per instance
    fixed = simulate(_config().model_copy(update={"autoscale": None}), step_load(requests=10),
                     seed=0).cost  # fmt: skip
    per_instance = fixed.usd_per_hour / 4  # no DRAM or L3 tiers here
    assert 1 < fleet.mean_instances < 4
    assert full.usd_per_hour == pytest.approx(per_instance * fleet.mean_instances, rel=1e-6)
    assert fleet.usd_for_period == pytest.approx(
        per_instance * fleet.mean_instances * fleet.period_s / 3600, rel=1e-6
    )
    assert stepped.summary.cost.usd_per_hour == pytest.approx(full.usd_per_hour)


def test_a_stopped_instance_restarts_cold() -> None:
    config = _config()
    kernel, recorder = Kernel(), Recorder()
    pool = build_pool(
        config, shipped_catalog(), block_tokens=16, kernel=kernel, recorder=recorder,
        seed=np.random.SeedSequence(0),
    )  # fmt: skip
    assert isinstance(pool, Pool)
    source = step_load(requests=14_000).build(np.random.default_rng(0))
    cluster = Cluster(kernel, pool.instances, pool.router, source, recorder)
    assert config.autoscale is not None
    scaler = Autoscaler(cluster, config.autoscale, startup_s=10.0)
    scaler.start()
    cluster.run()
    stopped = [i for i, state in enumerate(scaler.state) if state == "off"]
    assert stopped  # the step down stopped some
    served = {r.instance for r in recorder.records}
    assert set(stopped) & served  # ... that had served requests (and cached their prompts)
    for i in stopped:
        assert pool.instances[i].kv.l1.cached() == 0
    assert pool.instances[0].kv.l1.cached() > 0  # the one that never stopped keeps its cache


def test_deterministic_for_a_seed() -> None:
    first = simulate(_config(), step_load(requests=3_000), seed=3)
    again = simulate(_config(), step_load(requests=3_000), seed=3)
    assert first.records == again.records
    assert first.fleet is not None
    assert again.fleet is not None
    assert first.fleet.log == again.fleet.log


def test_a_window_shorter_than_a_tick_follows_the_load_now() -> None:
    # 1e-300 s: every earlier sample leaves the window, the newest stays (it once left too, and
    # the average read an empty window). The fleet still follows the step up and down.
    result = simulate(_config(window_s=1e-300), step_load(requests=14_000), seed=0)
    assert result.feasible, result.reason
    assert result.fleet is not None
    log = result.fleet.log
    assert max(log.serving) > 1  # the busy step started more
    assert log.serving[-1] == 1  # and the quiet end stopped them


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"autoscale": {"target_concurrency": 8, "min_instances": 5}}, "exceed instances"),
        (
            {"autoscale": {"target_concurrency": 8, "min_instances": 2, "initial_instances": 1}},
            "below min_instances",
        ),
        ({"autoscale": {"target_concurrency": 0}}, "target_concurrency"),
        ({"autoscale": {"target_concurrency": 8, "tick": 1}}, "tick: unknown key"),
        # A tick below the clock's resolution never moved it: the simulation hung.
        ({"autoscale": {"target_concurrency": 8, "interval_s": 1e-300}}, "interval_s"),
        ({"autoscale": {"min_instances": 1}}, "policy concurrency needs target_concurrency"),
        ({"autoscale": {"policy": "slo"}}, "policy slo needs ttft_ms_target and/or tpot_ms_target"),
        (
            {"autoscale": {"policy": "slo", "ttft_ms_target": 500, "slo_percentile": 0}},
            "slo_percentile",
        ),
        (
            {
                "autoscale": {"target_concurrency": 8},
                "pd_mode": "disaggregated",
                "prefill": {"instances": 1},
                "decode": {"instances": 1},
            },
            "set prefill.autoscale and/or decode.autoscale",
        ),
        (
            {
                "pd_mode": "disaggregated",
                "prefill": {"instances": 1},
                "decode": {
                    "instances": 2,
                    "autoscale": {"target_concurrency": 8, "min_instances": 3},
                },
            },
            "decode.autoscale: min/initial instances",
        ),
        (
            {
                "pd_mode": "disaggregated",
                "prefill": {"instances": 2, "autoscale": {"policy": "slo", "tpot_ms_target": 50}},
                "decode": {"instances": 2},
            },
            "prefill.autoscale.tpot_ms_target: the decode pool makes that latency",
        ),
        (
            {
                "pd_mode": "disaggregated",
                "prefill": {"instances": 2},
                "decode": {"instances": 2, "autoscale": {"policy": "slo", "ttft_ms_target": 900}},
            },
            "decode.autoscale.ttft_ms_target: the prefill pool makes that latency",
        ),
    ],
)
def test_bad_autoscale_settings_are_one_line_errors(fields: dict[str, Any], message: str) -> None:
    data = {"model": MODEL, "gpu": "h100_sxm", "instances": 4, **fields}
    with pytest.raises(InputError, match=message) as info:
        validate(ServingConfig, data, "deploy.yaml")
    assert "\n" not in str(info.value)


def test_defaults_cite_their_sources() -> None:
    config = AutoscaleConfig(target_concurrency=8)
    assert (config.interval_s, config.window_s, config.scale_down_delay_s) == (2.0, 60.0, 300.0)


def test_a_search_space_names_the_policy_fields_flat() -> None:
    names = known_names()
    assert {"autoscale_target_concurrency", "autoscale_min_instances"} <= set(names)
    assert "autoscale" not in names
    config = to_config(
        MODEL,
        {"gpu": "h100_sxm", "instances": 4, "autoscale_target_concurrency": 16,
         "autoscale_scale_down_delay_s": 120},
    )  # fmt: skip
    assert config.autoscale == AutoscaleConfig(target_concurrency=16, scale_down_delay_s=120)


@pytest.mark.parametrize("prefix", ["autoscale_", "prefill_autoscale_", "decode_autoscale_"])
def test_a_space_value_of_a_policy_field_is_checked_by_its_flat_name(prefix: str) -> None:
    # A PD pool's policy fields are flat too (decode_autoscale_target_concurrency, ...).
    catalog = shipped_catalog()
    check_setting(f"{prefix}target_concurrency", 16, catalog, "space.yaml")
    with pytest.raises(InputError, match=rf"space.yaml: {prefix}target_concurrency"):
        check_setting(f"{prefix}target_concurrency", 0, catalog, "space.yaml")
    with pytest.raises(InputError, match=rf"space.yaml: {prefix}min_instances"):
        check_setting(f"{prefix}min_instances", 0, catalog, "space.yaml")
