"""PD disaggregation: TTFT and the second token, transfer links, back-pressure, cost, config."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from pd_cases import BT, MODEL, pd_config, pd_request

from hardware.catalog import shipped_catalog
from simulator.api import SimResult, simulate
from simulator.config import ServingConfig
from simulator.latency import gpu_gpu_link
from simulator.records import RequestRecord
from simulator.workload.request import TraceRequest
from simulator.workload.source import OpenLoopSource
from simulator.workload.spec import WorkloadSpec
from slo.inputfile import InputError, validate

STEP_S = 0.05


def _request(index: int, time_s: float, prompt: int, output: int) -> TraceRequest:
    return pd_request(index, time_s, prompt, output)


def _config(**extra: Any) -> ServingConfig:
    # These hand-computed cases time the hand-off through the second token: the first one
    # stays the prefill instance's (the decode-side options: test_pd_first_token.py).
    return pd_config(STEP_S, **{"pd_first_token": "prefill", **extra})


def _run(config: ServingConfig, requests: Sequence[TraceRequest]) -> SimResult:
    result = simulate(config, OpenLoopSource(list(requests), BT), seed=0, check_invariants=True)
    assert result.feasible, result.reason
    return result


def _records(result: SimResult) -> dict[int, RequestRecord]:
    return {r.index: r for r in result.records}


def _kv_bytes(tokens: int) -> float:
    return tokens * shipped_catalog().model(MODEL).kv_bytes_per_token("bf16")


def test_ttft_is_queue_plus_prefill_and_the_transfer_delays_the_second_token() -> None:
    result = _run(_config(), [_request(0, 0.0, 1024, 2)])
    record = _records(result)[0]
    # 1P1D of one H100 each share a node: NVLink.
    link = gpu_gpu_link(shipped_catalog().gpu("h100_sxm"), same_node=True)
    transfer = link.latency_s + _kv_bytes(1024) / link.bytes_per_s
    assert record.ttft_s == pytest.approx(STEP_S, abs=1e-12)  # one prefill step, no transfer
    assert record.instance == 1  # finished on the decode instance
    assert record.tpot_s == pytest.approx(transfer + STEP_S, rel=1e-9)
    assert record.max_itl_s == pytest.approx(transfer + STEP_S, rel=1e-9)


def test_blocks_the_decode_instance_already_caches_are_not_moved() -> None:
    first = _request(0, 0.0, 1024, 2)
    follow = TraceRequest(1, 1.0, 1024 + BT, 2, (*first.block_ids, 7))
    records = _records(_run(_config(), [first, follow]))
    link = gpu_gpu_link(shipped_catalog().gpu("h100_sxm"), same_node=True)
    one_block = link.latency_s + _kv_bytes(BT) / link.bytes_per_s
    assert records[1].cached_l1_tokens == 1024  # prefix hit on the prefill side too
    assert records[1].tpot_s == pytest.approx(one_block + STEP_S, rel=1e-9)


def test_two_prefill_instances_sending_to_one_decode_instance_queue_on_its_link() -> None:
    """Both prompts finish prefill at STEP_S on their own prefill instance; the one decode
    instance receives one transfer at a time, so the second lands a transfer later and misses
    the decode step the first one started."""
    requests = [_request(0, 0.0, 1024, 2), _request(1, 0.0, 1024, 2)]
    link = gpu_gpu_link(shipped_catalog().gpu("h100_sxm"), same_node=True)
    transfer = link.latency_s + _kv_bytes(1024) / link.bytes_per_s
    assert transfer < STEP_S
    shared = _records(_run(_config(prefill_instances=2, router="round_robin"), requests))
    assert [r.ttft_s for r in shared.values()] == [pytest.approx(STEP_S, abs=1e-12)] * 2
    assert sorted(r.tpot_s for r in shared.values()) == [
        pytest.approx(transfer + STEP_S, rel=1e-9),
        pytest.approx(transfer + 2 * STEP_S, rel=1e-9),
    ]
    # Two decode instances: one transfer each, in parallel, no wait.
    apart = _records(
        _run(_config(prefill_instances=2, decode_instances=2, router="round_robin"), requests)
    )
    assert [r.tpot_s for r in apart.values()] == [pytest.approx(transfer + STEP_S, rel=1e-9)] * 2


def test_layerwise_overlap_exposes_only_the_last_layers_share() -> None:
    result = _run(_config(pd_transfer_overlap="layerwise"), [_request(0, 0.0, 1024, 2)])
    record = _records(result)[0]
    link = gpu_gpu_link(shipped_catalog().gpu("h100_sxm"), same_node=True)
    transfer = link.latency_s + _kv_bytes(1024) / link.bytes_per_s
    layers = shipped_catalog().model(MODEL).num_layers
    assert transfer < STEP_S  # the link keeps up with the prefill
    assert record.ttft_s == pytest.approx(STEP_S, abs=1e-12)
    assert record.tpot_s == pytest.approx(transfer / layers + STEP_S, rel=1e-9)


def test_heterogeneous_pools_use_the_slower_nic_and_cost_both_pools() -> None:
    config = _config(
        gpu="h100_sxm",
        prefill_gpu="h100_sxm",
        prefill_tp=2,
        decode_gpu="a100_sxm",
        decode_tp=1,
        decode_instances=2,
    )
    result = _run(config, [_request(0, 0.0, 2048, 2)])
    catalog = shipped_catalog()
    h100, a100 = catalog.gpu("h100_sxm"), catalog.gpu("a100_sxm")
    nic = gpu_gpu_link(a100, same_node=False)  # a100's NIC is the slower one
    assert nic.bytes_per_s < gpu_gpu_link(h100, same_node=False).bytes_per_s
    transfer = nic.latency_s + _kv_bytes(2048) / nic.bytes_per_s  # one lane: min(TP 2, TP 1)
    assert _records(result)[0].tpot_s == pytest.approx(transfer + STEP_S, rel=1e-9)
    assert result.cost.gpus == 2 + 2
    assert result.cost.gpu_usd_per_hour == pytest.approx(
        2 * h100.usd_per_gpu_hour + 2 * a100.usd_per_gpu_hour
    )


def test_a_pipeline_parallel_pool_moves_kv_over_all_its_gpus_and_pays_for_them() -> None:
    # Decode: TP1 x PP2 = 2 GPUs, each holding its stage's layers; prefill TP2. All four GPUs
    # share one node: NVLink, min(2, 2) = 2 lanes (before PP counted, min(TP2, TP1) = 1).
    config = _config(prefill_tp=2, decode_tp=1, decode_pp=2)
    result = _run(config, [_request(0, 0.0, 2048, 2)])
    nvlink = gpu_gpu_link(shipped_catalog().gpu("h100_sxm"), same_node=True)
    transfer = nvlink.latency_s + _kv_bytes(2048) / (2 * nvlink.bytes_per_s)
    assert _records(result)[0].tpot_s == pytest.approx(transfer + STEP_S, rel=1e-9)
    assert result.cost.gpus == 2 + 2


def test_decode_pool_out_of_memory_back_pressures_prefill() -> None:
    # 128 blocks per instance. Each prompt takes 100 blocks on the prefill instance, and a
    # request peaks at 125 blocks on the decode instance: one at a time fits on either side.
    config = _config(kv_capacity_tokens=2048, latency_model="constant:0.01")
    a, b, c = (_request(i, t, 1600, 400) for i, t in ((0, 0.0), (1, 0.0), (2, 0.1)))
    records = _records(_run(config, [a, b, c]))
    ra, rb, rc = records[0], records[1], records[2]
    assert {r.instance for r in records.values()} == {1}
    # B is prefilled right after A, but waits on the prefill instance, holding its KV, until
    # A has left the decode instance ...
    assert rb.first_token_s < 0.1
    assert rb.finish_s - rb.first_token_s > ra.finish_s - rb.first_token_s
    # ... so C, which arrives at 0.1 s to an idle prefill GPU, cannot get L1 there until B's
    # KV has moved, i.e. until A finished decoding.
    assert rc.first_token_s > ra.finish_s
    assert rc.ttft_s > 3.0
    # Its queue time counts both waits: for L1 on the prefill side, then (behind B) on the
    # decode side.
    decode_wait = rc.waiting_queue_s - (rc.ttft_s - 0.01)
    assert decode_wait == pytest.approx(rb.finish_s - rc.first_token_s, abs=0.02)


def test_one_token_request_finishes_on_the_prefill_instance() -> None:
    records = _records(_run(_config(), [_request(0, 0.0, 512, 1)]))
    assert records[0].instance == 0
    assert records[0].ttft_s == pytest.approx(STEP_S)


def test_request_too_large_for_a_decode_instance_is_rejected_at_arrival() -> None:
    config = _config(kv_capacity_tokens=2048)
    result = _run(config, [_request(0, 0.0, 1000, 2000), _request(1, 0.0, 1000, 10)])
    assert result.summary is not None
    assert result.summary.n_rejected == 1
    assert [r.index for r in result.records] == [1]


def test_pd_tpot_is_not_hit_by_prefill_bursts_like_an_aggregated_pool() -> None:
    # Bursty arrivals of long prompts: in an aggregated pool every burst of prefills stalls
    # the decodes batched with them; a decode pool never runs a prefill.
    workload = WorkloadSpec.model_validate(
        {
            "kind": "open_loop",
            "requests": 240,
            "arrival": {"process": "gamma", "rate_per_s": 6, "cv": 4},
            "input_tokens": {"dist": "lognormal", "median": 4000, "sigma": 0.5, "max": 16000},
            "output_tokens": 200,
        }
    )
    base = {"model": MODEL, "gpu": "h100_sxm", "tp": 1}
    aggregated = simulate(ServingConfig(**base, instances=4), workload, seed=3)
    pd_config = ServingConfig(
        **base, pd_mode="disaggregated", prefill_instances=2, decode_instances=2
    )
    disaggregated = simulate(pd_config, workload, seed=3)
    assert aggregated.summary is not None
    assert disaggregated.summary is not None
    assert aggregated.cost.gpus == disaggregated.cost.gpus == 4
    assert disaggregated.summary.n_requests == aggregated.summary.n_requests == 240
    assert disaggregated.summary.tpot_ms.p90 < 0.8 * aggregated.summary.tpot_ms.p90


def test_pd_runs_are_deterministic() -> None:
    config = _config(decode_instances=2, decode_router="least_load")
    requests = [_request(i, 0.01 * i, 700 + 37 * i, 20 + i) for i in range(30)]
    first, second = _run(config, requests), _run(config, requests)
    assert first.records == second.records


# ----- configuration ------------------------------------------------------------------------------
def _invalid(**fields: Any) -> str:
    data = {"model": MODEL, "gpu": "h100_sxm", **fields}
    with pytest.raises(InputError) as info:
        validate(ServingConfig, data, "deploy.yaml")
    message = str(info.value)
    assert "\n" not in message
    return message


def test_zero_decode_instances_is_a_clear_error() -> None:
    message = _invalid(pd_mode="disaggregated", prefill_instances=2, decode_instances=0)
    assert "decode.instances is 0" in message
    assert "at least one decode instance" in message


def test_pd_config_errors_are_one_line() -> None:
    assert "needs decode.instances" in _invalid(pd_mode="disaggregated", prefill_instances=1)
    assert "pd_mode is 'aggregated'" in _invalid(decode_instances=2)
    assert "unknown router" in _invalid(
        pd_mode="disaggregated", prefill_instances=1, decode_instances=1, decode_router="nope"
    )
    message = _invalid(
        pd_mode="disaggregated",
        prefill_instances=1,
        decode_instances=1,
        decode_model="Qwen/Qwen3-32B",
    )
    assert "same model" in message


def test_a_pool_that_does_not_fit_is_infeasible_naming_the_pool() -> None:
    config = ServingConfig(
        model="meta-llama/Llama-3.1-70B",
        gpu="h100_sxm",
        tp=4,
        pd_mode="disaggregated",
        prefill_instances=1,
        decode_instances=1,
        decode_tp=1,
    )
    result = simulate(config, OpenLoopSource([_request(0, 0.0, 100, 2)], BT), seed=0)
    assert not result.feasible
    assert result.reason.startswith("decode pool: ")
    assert result.cost.gpus == 5
