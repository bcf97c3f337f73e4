"""Giving up on failing simulations: never on one that would pass, and the same capacity."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

import slo
from simulator.api import SimResult, simulate
from simulator.capacity import TimeScaled, capacity_search
from simulator.config import ServingConfig
from simulator.give_up import Decided, MissRule, Watched
from simulator.workload.spec import WorkloadSpec

SPEC = slo.SloSpec.model_validate(
    {"name": "t", "targets": {"ttft_ms": {"p90": 400}, "tpot_ms": {"p90": 8}}, "attainment": 0.9}
)
RULE = MissRule(floor=0.9, ttft_s=0.4, tpot_s=0.008)


def _config() -> ServingConfig:
    # Four requests at a time, 5 ms per step: queueing grows with the load.
    return ServingConfig(
        model="Qwen/Qwen3-8B",
        gpu="h100_sxm",
        latency_model="constant:0.005",
        kv_capacity_tokens=65536,
        max_running_requests=4,
    )


def _workload(**extra: Any) -> WorkloadSpec:
    data: dict[str, Any] = {
        "kind": "open_loop",
        "requests": 120,
        "arrival": {"process": "poisson", "rate_per_s": 30},
        "input_tokens": 200,
        "output_tokens": {"dist": "uniform", "low": 1, "high": 40},
    }
    data.update(extra)
    return WorkloadSpec.model_validate(data)


def _meets(result: SimResult) -> bool:
    return slo.attainment(result.per_request_ms(), SPEC) >= SPEC.attainment


def test_deadlines_follow_from_the_bars() -> None:
    assert RULE.deadline_s(1) == pytest.approx(0.4)
    assert RULE.deadline_s(11) == pytest.approx(0.4 + 10 * 0.008)
    both = MissRule(floor=0.5, ttft_s=1.0, tpot_s=0.05, itl_s=0.02, e2e_s=1.1)
    assert both.deadline_s(11) == pytest.approx(1.1)  # e2e is tighter than 1 + 10 x 0.02
    assert both.deadline_s(3) == pytest.approx(1.04)
    ttft_only = MissRule(floor=0.9, ttft_s=0.4)
    assert not ttft_only.bounded
    assert ttft_only.deadline_s(5) == math.inf
    with pytest.raises(ValueError, match="floor"):
        MissRule(floor=0.0)


@pytest.mark.parametrize("scale", [0.25, 0.5, 0.7, 1.0, 1.5, 3.0])
def test_a_simulation_given_up_on_would_have_failed(scale: float) -> None:
    config, workload = _config(), _workload()
    full = simulate(config, TimeScaled(workload, scale), seed=5)
    try:
        watched = simulate(config, Watched(TimeScaled(workload, scale), RULE, []), seed=5)
    except Decided:
        assert not _meets(full)
        return
    # Not given up: the very same simulation.
    assert watched.records == full.records


def test_capacity_is_unchanged_and_failing_probes_are_cut_short() -> None:
    config, workload = _config(), _workload()
    plain = capacity_search(config, workload, _meets, seed=5, min_time_scale=0.05)
    cut = capacity_search(config, workload, _meets, seed=5, min_time_scale=0.05, give_up=RULE)
    assert cut.time_scale == plain.time_scale
    assert cut.result.records == plain.result.records
    assert cut.simulations == plain.simulations
    assert 1 <= cut.given_up < cut.simulations
    assert plain.given_up == 0


def test_overload_is_given_up_early() -> None:
    # Every request reported finished 10 s after it arrived (far past every deadline): the
    # source gives up once more than a tenth of the 120 requests have certainly missed.
    source = Watched(TimeScaled(_workload(), 0.05), RULE, []).build(np.random.default_rng(0))
    pulled: list[int] = []

    def feed() -> None:
        for request in source.start():
            pulled.append(request.index)
            source.on_finish(request, request.timestamp_s + 10.0)

    with pytest.raises(Decided):
        feed()
    assert len(pulled) == 13  # the 13th miss exceeds 0.1 x 120
