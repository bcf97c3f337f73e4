"""Overlap scheduling: a request reaching a busy engine after a step started joins a step later."""

from __future__ import annotations

import pytest
from engine_helpers import built_params, built_pool, make_rig, request

from simulator.engine import LinearLatency
from simulator.records import RequestRecord
from simulator.workload.request import TraceRequest

STEP_S = 0.01  # every step takes 10 ms whatever it holds


def _run(
    overlap: bool, *requests_: TraceRequest, scheduler: str = "decode_first"
) -> dict[int, RequestRecord]:
    rig = make_rig(
        LinearLatency(STEP_S, 0.0), l1=256, scheduler=scheduler, overlap_scheduling=overlap
    )
    rig.arrive(*requests_)
    return rig.run()


@pytest.mark.parametrize("scheduler", ["decode_first", "chunked", "prefill_first"])
def test_a_request_arriving_mid_step_waits_one_more_step(scheduler: str) -> None:
    # Request 0 decodes from 0 s on; request 1 arrives at 15 ms, inside the step [10, 20) ms.
    reqs = (request(0, 0.0, 32, 20), request(1, 0.015, 32, 3))
    plain = _run(False, *reqs, scheduler=scheduler)
    overlapped = _run(True, *reqs, scheduler=scheduler)
    # Without overlap it is admitted at 20 ms (first token at 30 ms); with it, the step from
    # 20 ms was already scheduled when it arrived, so it is admitted at 30 ms.
    assert plain[1].ttft_s == pytest.approx(0.015)
    assert overlapped[1].ttft_s == pytest.approx(0.025)
    # The request that was already running is not delayed.
    assert overlapped[0].ttft_s == plain[0].ttft_s == pytest.approx(STEP_S)


def test_an_idle_engine_admits_at_once() -> None:
    # Request 0 finishes at 30 ms; request 1 arrives at 45 ms to an idle engine.
    reqs = (request(0, 0.0, 32, 3), request(1, 0.045, 32, 3))
    overlapped = _run(True, *reqs)
    assert overlapped[1].ttft_s == pytest.approx(STEP_S)


def test_a_request_arriving_during_a_decode_run_waits_one_step_not_the_run() -> None:
    # Request 0 decodes 200 tokens (planned as long decode runs); request 1 arrives at 105 ms.
    reqs = (request(0, 0.0, 32, 200), request(1, 0.105, 32, 3))
    plain = _run(False, *reqs)
    overlapped = _run(True, *reqs)
    assert plain[1].ttft_s == pytest.approx(0.015)
    assert overlapped[1].ttft_s == pytest.approx(0.025)


def test_overlap_comes_from_the_preset_and_a_config_overrides_it() -> None:
    def overlap(**fields: object) -> bool:
        return built_params(**fields).overlap_scheduling

    assert overlap(backend="trtllm") is True
    assert overlap(backend="sglang") is True
    assert overlap(backend="vllm") is False
    assert overlap(backend="trtllm", overlap_scheduling=False) is False
    assert overlap(backend="vllm", overlap_scheduling=True) is True


def _lag_run(lag: bool, *requests_: TraceRequest) -> dict[int, RequestRecord]:
    rig = make_rig(
        LinearLatency(STEP_S, 0.0),
        l1=256,
        scheduler="decode_first",
        max_batched_tokens=40,  # one 32-token prompt per step
        overlap_scheduling=True,
        overlap_prefill_lag=lag,
    )
    rig.arrive(*requests_)
    return rig.run()


def test_a_first_token_waits_for_the_next_step_when_that_step_runs_a_prefill() -> None:
    # Two prompts arrive together; one fits a step. Request 0 is prefilled in [0, 10) ms and
    # request 1 in [10, 20) ms (with request 0's first decode). With the lag, request 0's
    # first token is handed out when step [10, 20) ms has been launched, i.e. at 20 ms;
    # request 1's follows a decode step, which returns from its launch at once: 20 ms.
    reqs = (request(0, 0.0, 32, 5), request(1, 0.0, 32, 5))
    plain = _lag_run(False, *reqs)
    lagged = _lag_run(True, *reqs)
    assert plain[0].ttft_s == pytest.approx(STEP_S)
    assert lagged[0].ttft_s == pytest.approx(2 * STEP_S)
    assert plain[1].ttft_s == lagged[1].ttft_s == pytest.approx(2 * STEP_S)
    # The last token is not lagged: the request ends when it did.
    assert lagged[0].finish_s == plain[0].finish_s


def test_a_first_token_followed_by_decode_steps_is_not_lagged() -> None:
    reqs = (request(0, 0.0, 32, 5),)
    assert _lag_run(True, *reqs)[0].ttft_s == pytest.approx(STEP_S)


def test_the_lag_comes_from_the_trtllm_preset_only() -> None:
    assert built_params(backend="trtllm").overlap_prefill_lag is True
    assert built_params(backend="sglang").overlap_prefill_lag is False
    assert built_params(backend="vllm").overlap_prefill_lag is False


@pytest.mark.parametrize(("backend", "hidden_s"), [("vllm", 20e-6), ("sglang", 0.0)])
def test_overlap_prices_a_vllm_step_without_its_per_request_cpu(
    backend: str, hidden_s: float
) -> None:
    # A 64-request decode step of a built instance, priced with and without overlap: vLLM's
    # async scheduling takes its 20 µs per request off the step; SGLang's overlap keeps it.
    def step_s(overlap: bool) -> float:
        (instance,) = built_pool(backend=backend, overlap_scheduling=overlap).instances
        return instance.timer.step_seconds([(1_000, 1)] * 64)

    assert step_s(False) - step_s(True) == pytest.approx(64 * hidden_s, rel=1e-6, abs=1e-12)
