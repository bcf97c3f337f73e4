"""``simulate``: feasibility, the result's metrics, cost, and the SLO seam."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pytest

import slo
from hardware.catalog import shipped_catalog
from hardware.schema import Catalog
from simulator.api import simulate
from simulator.config import ServingConfig
from simulator.workload.spec import WorkloadSpec
from slo.inputfile import InputError

OPEN = WorkloadSpec.model_validate(
    {
        "kind": "open_loop",
        "requests": 200,
        "arrival": {"process": "poisson", "rate_per_s": 20},
        "input_tokens": {"dist": "uniform", "low": 50, "high": 400},
        "output_tokens": {"dist": "uniform", "low": 1, "high": 60},
        "system_prompt": {"count": 2, "tokens": 128},
    }
)


def _config(**overrides: object) -> ServingConfig:
    base: dict[str, object] = {
        "model": "toy/Toy-1B",
        "gpu": "toy_gpu",
        "latency_model": "linear:0.004,0.00005",
        "kv_capacity_tokens": 20_000,
    }
    base.update(overrides)
    return ServingConfig.model_validate(base)


def test_weights_that_do_not_fit_give_an_infeasible_result_not_an_error(catalog: Catalog) -> None:
    config = ServingConfig(model="toy/Huge", gpu="toy_gpu", tp=1, latency_model="constant:0.01")
    result = simulate(config, OPEN, seed=0, catalog=catalog)
    assert not result.feasible
    assert result.summary is None
    assert result.records == ()
    assert "GiB" in result.reason
    metrics = result.metrics_for_slo(["p99.9"])
    assert metrics["ttft_ms.p90"] == math.inf
    assert metrics["ttft_ms.p99.9"] == math.inf
    assert metrics["output_tokens_per_s"] == 0.0
    assert metrics["gpus"] == 1.0
    assert metrics["usd_per_hour"] == pytest.approx(2.0)
    json.dumps(result.to_dict())


def test_shipped_catalog_llama_70b_bf16_on_one_h100_is_infeasible() -> None:
    config = ServingConfig(model="meta-llama/Llama-3.1-70B", gpu="h100_sxm")
    result = simulate(config, OPEN, seed=0, catalog=shipped_catalog())
    assert not result.feasible
    assert "Llama-3.1-70B" in result.reason


def test_unsupported_precision_is_infeasible(catalog: Catalog) -> None:
    config = ServingConfig(model="toy/Toy-1B", gpu="toy_gpu", weight_precision="int8")
    result = simulate(config, OPEN, seed=0, catalog=catalog)
    assert not result.feasible
    assert "int8" in result.reason


def test_fp8_on_an_ampere_gpu_follows_the_backend() -> None:
    # vLLM runs FP8 weights in Marlin (W8A16) on an A100; TensorRT-LLM cannot run FP8 there.
    served = {}
    for backend in ("vllm", "trtllm"):
        config = ServingConfig(
            model="meta-llama/Llama-3.1-8B-Instruct", gpu="a100_sxm", weight_precision="fp8",
            backend=backend, latency_model="roofline",
        )  # fmt: skip
        served[backend] = simulate(config, OPEN, seed=0, catalog=shipped_catalog())
    assert served["vllm"].feasible
    assert served["vllm"].summary is not None
    assert (served["vllm"].summary.n_requests, len(served["vllm"].records)) == (200, 200)
    assert not served["trtllm"].feasible
    assert "does not run FP8 weights" in served["trtllm"].reason


def _gpt_oss_ttft_ms(gpu: str, **deployment: Any) -> float:
    """Mean TTFT of gpt-oss-120b at TP2 under vLLM on ``gpu`` with ``deployment``'s fields."""
    config = ServingConfig(
        model="openai/gpt-oss-120b", gpu=gpu, tp=2, weight_precision="fp4", backend="vllm",
        **deployment,
    )  # fmt: skip
    result = simulate(config, OPEN, seed=0, catalog=shipped_catalog())
    assert result.summary is not None
    return result.summary.ttft_ms.mean


def test_marlin_moe_reaches_the_latency_model() -> None:
    # gpt-oss on H100 under vLLM: OpenAI's Triton MXFP4 kernel by default, Marlin when the
    # deployment says so (VLLM_MXFP4_USE_MARLIN=1); the two price prefills differently.
    marlin = _gpt_oss_ttft_ms("h100_sxm", marlin_moe=True)
    assert marlin != pytest.approx(_gpt_oss_ttft_ms("h100_sxm"), rel=1e-3)


def test_mxfp4_moe_activation_reaches_the_latency_model() -> None:
    # gpt-oss on B200 under vLLM: bf16 activations into the trtllm-gen MoE by default, MXFP8
    # when the deployment says so (VLLM_USE_FLASHINFER_MOE_MXFP4_MXFP8=1): faster prefills.
    mxfp8 = _gpt_oss_ttft_ms("b200_sxm", mxfp4_moe_activation="mxfp8")
    assert mxfp8 < 0.95 * _gpt_oss_ttft_ms("b200_sxm")


def test_unknown_names_are_input_errors(catalog: Catalog) -> None:
    with pytest.raises(InputError, match="unknown GPU 'h300'"):
        simulate(ServingConfig(model="toy/Toy-1B", gpu="h300"), OPEN, seed=0, catalog=catalog)
    with pytest.raises(InputError, match="latency model"):
        simulate(_config(latency_model="constant:-1"), OPEN, seed=0, catalog=catalog)


def test_summary_metrics_are_consistent(catalog: Catalog) -> None:
    result = simulate(_config(instances=2, router="least_load"), OPEN, seed=3, catalog=catalog)
    summary = result.summary
    assert summary is not None
    assert result.feasible
    assert summary.n_requests == 200
    assert summary.n_rejected == 0
    recs = result.records
    ttft = np.array([r.ttft_s for r in recs]) * 1e3
    assert summary.ttft_ms.mean == pytest.approx(ttft.mean())
    assert summary.ttft_ms.p90 == pytest.approx(np.percentile(ttft, 90))
    assert summary.ttft_ms.p50 <= summary.ttft_ms.p90 <= summary.ttft_ms.p99
    assert summary.e2e_ms.mean >= summary.ttft_ms.mean
    outputs = sum(r.output_tokens for r in recs)
    assert summary.output_tokens_per_s == pytest.approx(outputs / summary.duration_s)
    # Shared system prompts: some prompt tokens come from L1, never more than all of them.
    assert 0 < summary.hit_ratio["l1"] < 1
    assert summary.prefill_tokens_saved_ratio == pytest.approx(sum(summary.hit_ratio.values()))
    assert 0 < summary.gpu_busy_fraction <= 1
    assert 0 < summary.kv_utilization < 1
    assert {r.instance for r in recs} == {0, 1}
    assert summary.cost.gpus == 2
    assert summary.usd_per_million_output_tokens == pytest.approx(
        4.0 / (summary.output_tokens_per_s * 3600) * 1e6
    )
    data = result.to_dict()
    json.dumps(data)
    for key in ("ttft_ms", "tpot_ms", "e2e_ms", "itl_ms", "hit_ratio", "cost"):
        assert key in data["summary"]


def test_costs_add_dram_and_l3(catalog: Catalog) -> None:
    config = _config(instances=3, tp=2, l2_dram_gib=100, l3_tier="ssd", l3_capacity_gib=730)
    result = simulate(config, OPEN, seed=0, catalog=catalog)
    cost = result.cost
    assert cost.gpus == 6
    assert cost.gpu_usd_per_hour == pytest.approx(12.0)
    assert cost.dram_usd_per_hour == pytest.approx(3 * 100 * 3.0 / 730)
    assert cost.l3_usd_per_hour == pytest.approx(0.1)
    assert result.metrics_for_slo()["usd_per_hour"] == pytest.approx(cost.usd_per_hour)


def test_metrics_feed_the_slo_package(catalog: Catalog, tmp_path: object) -> None:
    result = simulate(_config(), OPEN, seed=1, catalog=catalog)
    spec = slo.SloSpec.model_validate(
        {"name": "t", "targets": {"ttft_ms": {"p90": 10_000, "p99.9": 20_000}}, "attainment": 0.5}
    )
    metrics = result.metrics_for_slo(["p99.9"])
    metrics["attainment"] = slo.attainment(result.per_request_ms(), spec)
    report = slo.evaluate(metrics, spec)
    assert report.feasible
    assert metrics["attainment"] == 1.0
    for name in ("ttft_ms.p90", "tpot_ms.mean", "itl_ms.p99", "e2e_ms.p50", "queue_ms.p99"):
        assert name in metrics
    assert metrics["itl_ms.p99.9"] >= metrics["itl_ms.p99"] > 0


def test_closed_loop_keeps_at_most_users_in_flight(catalog: Catalog) -> None:
    spec = WorkloadSpec.model_validate(
        {
            "kind": "closed_loop",
            "users": 4,
            "requests": 60,
            "input_tokens": 100,
            "output_tokens": 20,
            "think_time_s": 0.05,
        }
    )
    result = simulate(_config(), spec, seed=0, catalog=catalog, sample_interval_s=0.01)
    assert result.summary is not None
    assert result.summary.n_requests == 60
    samples = result.queue_samples
    assert samples is not None
    in_flight = samples.waiting + samples.running + samples.prefetch + samples.swapped
    assert in_flight.max() == 4


def test_rejected_requests_count_as_infinitely_late_for_slos(catalog: Catalog) -> None:
    # L1 of 30 blocks of 16 tokens: prompts up to 400 tokens + outputs fit, 600-token ones
    # never do and are rejected at arrival.
    spec = WorkloadSpec.model_validate(
        {
            "kind": "open_loop",
            "requests": 100,
            "arrival": {"process": "poisson", "rate_per_s": 5},
            "input_tokens": {"dist": "uniform", "low": 50, "high": 600},
            "output_tokens": 10,
        }
    )
    result = simulate(_config(kv_capacity_tokens=480), spec, seed=0, catalog=catalog)
    summary = result.summary
    assert summary is not None
    assert summary.n_rejected > 2
    assert summary.n_requests + summary.n_rejected == 100
    assert math.isfinite(summary.ttft_ms.p99)  # the summary describes finished requests
    metrics = result.metrics_for_slo(["p10"])
    assert metrics["ttft_ms.p99"] == math.inf
    assert metrics["ttft_ms.mean"] == math.inf
    assert math.isfinite(metrics["ttft_ms.p10"])
    assert metrics["n_rejected"] == summary.n_rejected
    arrays = result.per_request_ms()
    assert len(arrays["ttft_ms"]) == 100
    assert np.isinf(arrays["e2e_ms"]).sum() == summary.n_rejected

    everything = simulate(_config(kv_capacity_tokens=16), spec, seed=0, catalog=catalog)
    assert everything.summary is not None
    assert everything.summary.n_requests == 0
    metrics = everything.metrics_for_slo()
    assert metrics["ttft_ms.p50"] == math.inf
    assert metrics["itl_ms.p90"] == math.inf
