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


def _probe(
    config: ServingConfig, scale: float, *, first_tokens: bool
) -> tuple[SimResult | None, int]:
    """A capacity probe at ``scale``: its result (None: given up) and the arrivals it ran."""
    source = Watched(TimeScaled(_workload(), scale), RULE, []).source(5)
    hook = source.first_token_hook() if first_tokens else None
    try:
        result = simulate(config, source, seed=5, on_first_token=hook)
    except Decided as stop:
        return None, stop.arrived
    return result, len(result.records)


def test_the_first_token_decides_the_verdict_of_a_full_run_near_the_threshold() -> None:
    config, workload = _config(), _workload()
    found = capacity_search(config, workload, _meets, seed=5, min_time_scale=0.05)
    assert found.time_scale is not None
    assert not found.at_limit
    cut_sooner = 0
    # Both sides of the threshold, down to the search's 2.5% bracket.
    for factor in (0.8, 0.9, 0.95, 0.976, 1.0, 1.03, 1.1, 1.25):
        scale = found.time_scale * factor
        full = simulate(config, TimeScaled(workload, scale), seed=5)
        at_finish, ran_finish = _probe(config, scale, first_tokens=False)
        at_first, ran_first = _probe(config, scale, first_tokens=True)
        if at_first is None:
            assert not _meets(full), scale  # given up only on a run that fails in full
            assert ran_first <= ran_finish
            cut_sooner += at_finish is not None or ran_first < ran_finish
        else:  # not given up: the very same simulation
            assert at_first.records == full.records
    assert cut_sooner >= 2  # the first token decides what the finish could not, or sooner


def test_a_ttft_miss_counts_at_the_first_token_or_at_the_ttft_deadline() -> None:
    # Three requests of 11 output tokens; floor 0.3: the run is decided at the third certain
    # miss. TTFT 0.4 s, TPOT 8 ms: once the first token is out at f, finish by f + 80 ms.
    workload = _workload(requests=3, output_tokens=11)
    source = Watched(workload, MissRule(floor=0.3, ttft_s=0.4, tpot_s=0.008), []).source(0)
    hook = source.first_token_hook()
    stream = source.start()
    first = next(stream)
    hook(first, first.timestamp_s + 0.5, first.timestamp_s + 0.5)  # late: a miss, now
    second = next(stream)
    hook(second, second.timestamp_s + 0.1, second.timestamp_s + 0.1)  # in time
    # Past f + 80 ms, within 0.4 s + 80 ms of its arrival: a miss only by the first token.
    source.on_finish(second, second.timestamp_s + 0.1 + 0.08 + 0.01)
    third = next(stream)
    source.on_finish(first, third.timestamp_s + 0.39)  # no first token yet: not decided
    with pytest.raises(Decided) as decided:
        # No first token 0.4 s after it arrived: a certain miss once the run is past that.
        source.on_finish(first, third.timestamp_s + 0.41)
    assert decided.value.missed == 3


def test_a_watch_without_the_hook_judges_at_the_finish_only() -> None:
    # A TTFT bar alone bounds no finish: without ``first_token_hook`` nothing is decided.
    workload = _workload(requests=2, output_tokens=11)
    source = Watched(workload, MissRule(floor=1.0, ttft_s=0.4), []).source(0)
    stream = source.start()
    first = next(stream)
    source.on_first_token(first, first.timestamp_s + 5.0, first.timestamp_s + 5.0)
    source.on_finish(first, first.timestamp_s + 6.0)
    assert next(stream).index != first.index  # not decided: the run goes on
    # With the hook, the same late first token is a certain miss, and floor 1 is out of reach.
    watched = Watched(workload, MissRule(floor=1.0, ttft_s=0.4), []).source(0)
    hook = watched.first_token_hook()
    first = next(watched.start())
    with pytest.raises(Decided):
        hook(first, first.timestamp_s + 5.0, first.timestamp_s + 5.0)


@pytest.mark.parametrize(
    "extra",
    [
        {},
        {"backend": "trtllm"},  # a serial front end: first tokens recorded when delivered
        {"pd_mode": "disaggregated", "prefill": {"instances": 1}, "decode": {"instances": 1}},
    ],
)
def test_the_hook_hears_each_first_token_once_as_recorded(extra: dict[str, Any]) -> None:
    config = ServingConfig(model="Qwen/Qwen3-8B", gpu="h100_sxm", **extra)
    heard: dict[int, list[float]] = {}

    def hook(request: Any, first_token_s: float, now_s: float) -> None:
        assert first_token_s >= now_s - 1e-12  # never before the step that produced it
        heard.setdefault(request.index, []).append(first_token_s)

    result = simulate(config, _workload(requests=40), seed=3, on_first_token=hook)
    assert result.feasible, result.reason
    assert {r.index: [r.first_token_s] for r in result.records} == heard
    assert result.records == simulate(config, _workload(requests=40), seed=3).records
