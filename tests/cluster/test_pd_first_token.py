"""PD disaggregation: where the client's first token comes from (``pd_first_token``).

A 1P1D deployment with constant 50 ms steps, hand-computed: one 1,024-token prompt is prefilled
in one step (ends at ``S``), handed off at once to the idle decode instance, whose NVLink
transfer takes ``T`` (the two H100s share a node), then decoded one token per step.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from pd_cases import BT, MODEL, pd_config, pd_request

from hardware.catalog import shipped_catalog
from simulator.api import SimResult, simulate
from simulator.config import ServingConfig
from simulator.latency import gpu_gpu_link
from simulator.presets import load_preset
from simulator.records import RequestRecord
from simulator.workload.request import TraceRequest
from simulator.workload.source import OpenLoopSource

S = 0.05  # every step, s


def _request(index: int, time_s: float, prompt: int, output: int) -> TraceRequest:
    return pd_request(index, time_s, prompt, output)


def _config(**extra: Any) -> ServingConfig:
    return pd_config(S, **extra)


def _run(
    config: ServingConfig, requests: Sequence[TraceRequest]
) -> tuple[dict[int, RequestRecord], dict[int, list[float]]]:
    """Records by index, and the first-token times ``on_first_token`` was told, by index."""
    told: dict[int, list[float]] = {}

    def hook(request: TraceRequest, first_token_s: float, now_s: float) -> None:
        assert now_s == pytest.approx(first_token_s)  # told when it happens
        told.setdefault(request.index, []).append(first_token_s)

    source = OpenLoopSource(list(requests), BT)
    result: SimResult = simulate(config, source, seed=0, check_invariants=True, on_first_token=hook)
    assert result.feasible, result.reason
    return {r.index: r for r in result.records}, told


def _transfer(tokens: int) -> float:
    link = gpu_gpu_link(shipped_catalog().gpu("h100_sxm"), same_node=True)
    kv = shipped_catalog().model(MODEL).kv_bytes_per_token("bf16")
    return link.latency_s + tokens * kv / link.bytes_per_s


def test_each_option_puts_the_first_token_where_it_says() -> None:
    t = _transfer(1024)
    assert 0 < t < S
    expected = {
        # prefill step; then transfer + a decode step before token 2, one step before token 3
        "prefill": (S, (t + 2 * S) / 2),
        # the KV has arrived: prefill step + transfer; then two decode steps
        "decode_ready": (S + t, S),
        # the decode instance's first step (the last prompt token) ends with the first token
        "decode_step": (S + t + S, S),
    }
    for option, (ttft, tpot) in expected.items():
        records, told = _run(_config(pd_first_token=option), [_request(0, 0.0, 1024, 3)])
        record = records[0]
        assert record.instance == 1, option  # finished on the decode instance
        assert record.ttft_s == pytest.approx(ttft, rel=1e-9), option
        assert record.tpot_s == pytest.approx(tpot, rel=1e-9), option
        assert told == {0: [pytest.approx(record.first_token_s, rel=1e-12)]}, option


def test_the_decode_step_option_computes_the_last_prompt_token_on_the_decode_instance() -> None:
    records, _ = _run(_config(pd_first_token="decode_step"), [_request(0, 0.0, 1024, 3)])
    # prefill: 1,024 prompt tokens; decode: the last prompt token again, then 2 decode tokens
    assert records[0].computed_tokens == 1024 + 1 + 2
    records, _ = _run(_config(pd_first_token="decode_ready"), [_request(0, 0.0, 1024, 3)])
    assert records[0].computed_tokens == 1024 + 2


def test_a_request_waiting_for_a_decode_slot_waits_in_its_ttft() -> None:
    """One decode slot, two prompts prefilled together: B's KV stays on the prefill instance
    until A has finished, so with the token on the decode side B's TTFT holds A's whole decode.
    """
    n = 20
    t = _transfer(1024)
    requests = [_request(0, 0.0, 1024, n), _request(1, 0.0, 1024, n)]
    one_slot = {"decode_max_running_requests": 1}
    before, _ = _run(_config(pd_first_token="prefill", **one_slot), requests)
    assert [r.ttft_s for r in before.values()] == [pytest.approx(S, rel=1e-9)] * 2
    records, told = _run(_config(pd_first_token="decode_ready", **one_slot), requests)
    a, b = records[0], records[1]
    # A: prefill step + transfer, then n − 1 decode steps; B is admitted when A finishes.
    assert a.ttft_s == pytest.approx(S + t, rel=1e-9)
    assert a.finish_s == pytest.approx(S + t + (n - 1) * S, rel=1e-9)
    assert b.ttft_s == pytest.approx(a.finish_s + t, rel=1e-9)
    assert b.tpot_s == pytest.approx(S, rel=1e-9)  # the wait is no longer in B's TPOT
    assert sorted(told) == [0, 1]
    # Same timeline either way; with the token on the prefill side the wait is in B's TPOT.
    assert b.finish_s == pytest.approx(before[1].finish_s, rel=1e-12)
    assert before[1].tpot_s == pytest.approx((b.finish_s - S) / (n - 1), rel=1e-9)
    # its longest gap: from its first token (S) to its second (one step after b.ttft_s)
    assert before[1].max_itl_s == pytest.approx(b.ttft_s + S - S, rel=1e-9)


def test_a_one_token_request_keeps_the_prefill_token() -> None:
    for option in ("decode_ready", "decode_step"):
        records, told = _run(_config(pd_first_token=option), [_request(0, 0.0, 512, 1)])
        assert records[0].instance == 0
        assert records[0].ttft_s == pytest.approx(S, rel=1e-9)
        assert told == {0: [pytest.approx(S, rel=1e-9)]}


def test_the_backend_preset_sets_the_default_and_the_config_overrides_it() -> None:
    assert {name: load_preset(name).pd_first_token for name in ("vllm", "sglang", "trtllm")} == {
        "vllm": "decode_step",
        "sglang": "decode_ready",
        "trtllm": "decode_step",
    }
    requests = [_request(0, 0.0, 1024, 3)]
    default, _ = _run(_config(), requests)  # backend vllm
    explicit, _ = _run(_config(pd_first_token="decode_step"), requests)
    old, _ = _run(_config(pd_first_token="prefill"), requests)
    assert default[0].ttft_s == explicit[0].ttft_s
    assert old[0].ttft_s < default[0].ttft_s


@pytest.mark.parametrize("frontend_us", [(0.0, 2.0, 0.0), (5000.0, 2.0, 300.0)])
def test_a_prefill_instance_tokenises_its_prompts_one_after_the_other(
    frontend_us: tuple[float, float, float],
) -> None:
    # SGLang's TokenizerManager runs on the prefill server: its serial front end keeps the
    # per-prompt-token cost (2 µs: a 1,024-token prompt enters 2.048 ms late) and drops the
    # per-request and per-streamed-token ones (the decode side streams; the proxy to the
    # clients is not modelled).
    plain = _config(backend="sglang", frontend_us=(0.0, 0.0, 0.0))
    tokenising = _config(backend="sglang", frontend_us=frontend_us)
    one = [_request(0, 0.0, 1024, 4)]
    base = _run(plain, one)[0][0].ttft_s
    assert _run(tokenising, one)[0][0].ttft_s == pytest.approx(base + 1024 * 2e-6)
    # Two prompts together: side by side in one prefill step without it; the second enters at
    # 4.096 ms, during the first one's step, and takes a later one.
    two = [_request(0, 0.0, 1024, 4), _request(1, 0.0, 1024, 4)]
    together = _run(plain, two)[0]
    assert together[1].ttft_s - together[0].ttft_s < S
    serial = _run(tokenising, two)[0]
    assert serial[1].ttft_s - serial[0].ttft_s >= S
