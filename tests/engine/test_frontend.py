"""The serial front end (``simulator/engine/frontend.py``): request intake and token streaming
share one CPU, streams served first come first served and intakes ahead of their backlog; by
hand and as a throughput ceiling."""

from __future__ import annotations

import pytest

from simulator.api import simulate
from simulator.config import ServingConfig
from simulator.engine.frontend import Frontend
from simulator.presets import load_preset
from simulator.workload.closed_loop import closed_loop_workload

MS = 1e-3


def test_the_cpu_serves_work_in_the_order_offered() -> None:
    cpu = Frontend(request_s=5 * MS, token_s=1 * MS)
    assert cpu.intake(0.0) == pytest.approx(5 * MS)
    # Offered while busy: waits for the intake, then streams 3 tokens.
    assert cpu.stream(2 * MS, 3) == pytest.approx(8 * MS)
    # Offered once idle again: served at once.
    assert cpu.intake(20 * MS) == pytest.approx(25 * MS)
    # Tokenising: a cost per prompt token on top of the fixed one.
    assert Frontend(5 * MS, 0.0, prompt_token_s=0.01 * MS).intake(0.0, 100) == pytest.approx(6 * MS)
    with pytest.raises(ValueError, match=">= 0"):
        Frontend(-1.0, 0.0)


def test_an_intake_does_not_wait_for_the_streaming_backlog() -> None:
    # Three steps' tokens are queued (10 ms of streaming from 0 ms); a request arriving at 1 ms
    # is taken in by 6 ms, not after the backlog (15 ms), and the streams finish 5 ms later.
    cpu = Frontend(request_s=5 * MS, token_s=1 * MS)
    assert [cpu.stream(0.0, n) for n in (4, 3, 3)] == pytest.approx([4 * MS, 7 * MS, 10 * MS])
    assert cpu.intake(1 * MS) == pytest.approx(6 * MS)
    assert cpu.stream(2 * MS, 1) == pytest.approx(16 * MS)
    # A second intake waits for the first only.
    assert cpu.intake(2 * MS) == pytest.approx(11 * MS)
    assert cpu.stream(3 * MS, 1) == pytest.approx(22 * MS)


def _config(frontend_us: tuple[float, float, float] | None) -> ServingConfig:
    return ServingConfig(
        model="Qwen/Qwen3-8B",
        gpu="h100_sxm",
        backend="vllm",
        latency_model="constant:0.001",
        frontend_us=frontend_us,
        tokenize_us_per_prompt_token=0.0,  # by hand: the front end's intake alone
    )


def test_one_user_by_hand() -> None:
    """One user, 64-token prompts, 10-token answers, 1 ms steps, an intake of 3 ms + 31.25 µs
    per prompt token (5 ms) and 1 ms per token: the prompt reaches the engine at 5 ms, its
    prefill step ends at 6 ms and the first token reaches the client at 7 ms; each later token
    is produced and streamed 1 ms apart, the last at 16 ms; the next request is sent then."""
    spec = closed_loop_workload(users=1, requests=3, input_tokens=64, output_tokens=10)
    result = simulate(_config((3000.0, 31.25, 1000.0)), spec, seed=0)
    records = sorted(result.records, key=lambda r: r.arrival_s)
    for k, record in enumerate(records):
        assert record.arrival_s == pytest.approx(k * 16 * MS)
        assert record.ttft_s == pytest.approx(7 * MS)
        assert record.finish_s - record.arrival_s == pytest.approx(16 * MS)
    plain = simulate(_config((0.0, 0.0, 0.0)), spec, seed=0)
    assert [r.ttft_s for r in plain.records] == pytest.approx([1 * MS] * 3)


def test_a_busy_front_end_caps_the_throughput() -> None:
    """32 users and an engine far faster than its front end: requests complete at the front
    end's pace, 1 / (intake + tokens x streaming) = 1 / 15 ms, and the users wait for it
    (TTFT grows), while the engine's own steps stay 1 ms."""
    spec = closed_loop_workload(users=32, requests=640, input_tokens=64, output_tokens=10)
    result = simulate(_config((5000.0, 0.0, 1000.0)), spec, seed=0)
    assert result.summary is not None
    rate = result.summary.n_requests / result.summary.duration_s
    assert rate == pytest.approx(1 / (15 * MS), rel=0.05)
    fast = simulate(_config((0.0, 0.0, 0.0)), spec, seed=0)
    assert fast.summary is not None
    assert fast.summary.n_requests / fast.summary.duration_s > 5 * rate
    assert result.summary.ttft_ms.mean > 10 * fast.summary.ttft_ms.mean


def test_a_stream_interval_spreads_a_response_over_its_tokens() -> None:
    """A response every k decode steps (TensorRT-LLM's stream_interval) costs the front end
    one response's time per k tokens: the busy front end above at k = 10 streams 10 tokens for
    1 ms, so requests complete at 1 / (5 + 1) ms; the preset's interval is 1."""
    assert load_preset("trtllm").stream_interval == 1
    seconds = load_preset("trtllm").frontend_seconds((5000.0, 0.0, 1000.0), 10)
    assert seconds["frontend_token_s"] == pytest.approx(0.1 * MS)
    spec = closed_loop_workload(users=32, requests=640, input_tokens=64, output_tokens=10)
    config = _config((5000.0, 0.0, 1000.0)).model_copy(update={"stream_interval": 10})
    result = simulate(config, spec, seed=0)
    assert result.summary is not None
    rate = result.summary.n_requests / result.summary.duration_s
    assert rate == pytest.approx(1 / (6 * MS), rel=0.05)


def test_the_preset_carries_the_costs_and_pd_pools_have_none() -> None:
    trtllm = load_preset("trtllm")
    assert trtllm.frontend_request_us > 0
    assert trtllm.frontend_token_us > 0
    spec = closed_loop_workload(users=1, requests=1, input_tokens=16, output_tokens=2)
    aggregated = ServingConfig(model="Qwen/Qwen3-8B", gpu="h100_sxm", backend="trtllm")
    assert "serial front end" in simulate(aggregated, spec, seed=0).engine
    pd = ServingConfig(
        model="Qwen/Qwen3-8B",
        gpu="h100_sxm",
        backend="trtllm",
        pd_mode="disaggregated",
        prefill={"instances": 1},
        decode={"instances": 1},
    )
    result = simulate(pd, spec, seed=0)
    assert result.feasible, result.reason
    assert "serial front end" not in result.engine
