"""Capacity search: bisection on ``time_scale`` against a brute-force sweep, and its edges."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from simulator.api import SimResult, simulate
from simulator.capacity import DEFAULT_STEP, Capacity, TimeScaled, capacity_search
from simulator.config import ServingConfig
from simulator.workload.spec import WorkloadSpec
from slo.inputfile import InputError

TTFT_P90_MS = 400.0


def _workload(**extra: Any) -> WorkloadSpec:
    data: dict[str, Any] = {
        "kind": "open_loop",
        "requests": 80,
        "arrival": {"process": "poisson", "rate_per_s": 20},
        "input_tokens": 200,
        "output_tokens": 20,
    }
    data.update(extra)
    return WorkloadSpec.model_validate(data)


def _config(**extra: Any) -> ServingConfig:
    # One request at a time, 20 steps of 5 ms each: an M/D/1 queue serving 10 requests/s,
    # whose waiting times grow monotonically with the load.
    data: dict[str, Any] = {
        "model": "Qwen/Qwen3-8B",
        "gpu": "h100_sxm",
        "latency_model": "constant:0.005",
        "kv_capacity_tokens": 65536,
        "max_running_requests": 1,
    }
    data.update(extra)
    return ServingConfig(**data)


def _meets(result: SimResult) -> bool:
    return result.metrics_for_slo()["ttft_ms.p90"] < TTFT_P90_MS


def test_capacity_agrees_with_a_brute_force_sweep_within_one_step() -> None:
    config, workload = _config(), _workload()
    found = capacity_search(config, workload, _meets, seed=7, min_time_scale=0.5)
    assert found.feasible
    assert not found.at_limit
    assert found.time_scale is not None
    # Brute force: every scale on a 2.5% grid; the smallest passing one above the failures.
    grid = 0.5 * (1 + DEFAULT_STEP) ** np.arange(0, 113)  # 0.5 … 8
    passing = [
        _meets(simulate(config, TimeScaled(workload, float(scale)), seed=7)) for scale in grid
    ]
    first = passing.index(True)
    assert all(passing[first:]), "the predicate should be monotone on this queue"
    brute = float(grid[first])
    assert abs(math.log(found.time_scale / brute)) < math.log(1 + DEFAULT_STEP)
    # What it reports is the run at that scale, which meets the predicate.
    assert _meets(found.result)
    assert found.requests_per_s == pytest.approx(found.result.metrics_for_slo()["requests_per_s"])
    assert found.load_scale == pytest.approx(1 / found.time_scale)
    assert 4 <= found.simulations <= 2 + math.ceil(math.log2(math.log(16) / math.log(1.025)))


def test_simulations_are_counted_and_deterministic() -> None:
    calls = 0

    def counting(result: SimResult) -> bool:
        nonlocal calls
        calls += 1
        return _meets(result)

    first = capacity_search(_config(), _workload(), counting, seed=1)
    assert first.simulations == calls
    second = capacity_search(_config(), _workload(), _meets, seed=1)
    assert (second.time_scale, second.simulations) == (first.time_scale, first.simulations)


def test_infeasible_even_at_the_lowest_load_takes_one_simulation() -> None:
    found = capacity_search(_config(), _workload(), lambda _result: False, seed=0)
    assert not found.feasible
    assert found.time_scale is None
    assert found.requests_per_s is None
    assert found.simulations == 1
    assert found.result.feasible  # it ran; the predicate failed


def test_a_configuration_that_cannot_run_is_infeasible_without_asking_the_predicate() -> None:
    config = ServingConfig(model="meta-llama/Llama-3.1-70B", gpu="h100_sxm", tp=1)
    found = capacity_search(config, _workload(), lambda _result: pytest.fail("asked"), seed=0)
    assert not found.feasible
    assert found.simulations == 1
    assert not found.result.feasible
    assert found.result.reason


def test_meeting_even_the_highest_load_stops_at_the_limit() -> None:
    found = capacity_search(
        _config(), _workload(), lambda _result: True, seed=0, min_time_scale=0.25
    )
    assert found.at_limit
    assert found.time_scale == 0.25
    assert found.simulations == 2


def test_closed_loop_workloads_are_refused() -> None:
    closed = WorkloadSpec.model_validate(
        {"kind": "closed_loop", "users": 2, "requests": 4, "input_tokens": 10, "output_tokens": 2}
    )
    with pytest.raises(InputError, match="open-loop workload"):
        capacity_search(_config(), closed, _meets, seed=0)


def test_time_scaled_multiplies_every_timestamp() -> None:
    rng = np.random.default_rng(0)
    plain = list(_workload().build(np.random.default_rng(0)).start())
    scaled = list(TimeScaled(_workload(), 0.5).build(rng).start())
    assert [r.timestamp_s for r in scaled] == pytest.approx([0.5 * r.timestamp_s for r in plain])
    assert [r.block_ids for r in scaled] == [r.block_ids for r in plain]


def test_a_known_pass_at_the_lowest_load_saves_its_simulation() -> None:
    config, workload = _config(), _workload()

    def both(low: float, high: float) -> tuple[Capacity, Capacity]:
        kwargs: dict[str, Any] = {"seed": 3, "min_time_scale": low, "max_time_scale": high}
        full = capacity_search(config, workload, _meets, **kwargs)
        known = capacity_search(config, workload, _meets, passes_at_max=True, **kwargs)
        assert known.time_scale == full.time_scale
        assert known.requests_per_s == full.requests_per_s
        assert known.result.records == full.result.records
        return full, known

    # The answer lies above the lowest load: its simulation is saved.
    full, known = both(0.5, 8.0)
    assert full.time_scale is not None
    assert full.time_scale < 8.0
    assert known.simulations == full.simulations - 1
    # Everything above the lowest load fails (the threshold lies within one step below the
    # answer): the lowest load is the answer, simulated at the end for its result.
    answer = full.time_scale
    full, known = both(answer / (1 + DEFAULT_STEP), answer)
    assert known.time_scale == answer
    assert known.simulations == full.simulations
