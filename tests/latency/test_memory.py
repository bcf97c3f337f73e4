"""Memory fit: weights per GPU, reserve, KV capacity, and the sentences that explain them."""

from __future__ import annotations

import pytest

from hardware.catalog import shipped_catalog
from hardware.schema import GpuSpec
from simulator.latency import Deployment, MemoryParams, memory_fit, weight_bytes_per_gpu
from simulator.latency.memory import GIB, MemoryAccounting, activation_bytes_per_gpu
from simulator.presets import load_preset

from .specs import B200, DEEPSEEK_V3, DEPLOYMENTS, H100, LLAMA_8B, LLAMA_70B, QWEN3_MOE


@pytest.mark.parametrize("key", sorted(DEPLOYMENTS))
def test_tp1_weights_equal_the_catalog_count(key: str) -> None:
    d = DEPLOYMENTS[key]
    tp1 = Deployment(d.model, d.gpu, tp=1, weight_precision=d.weight_precision)
    assert weight_bytes_per_gpu(tp1) == d.model.weight_bytes(d.weight_precision)


def test_llama70b_does_not_fit_one_h100() -> None:
    fit = memory_fit(Deployment(LLAMA_70B, H100))
    assert not fit.fits
    assert fit.kv_tokens == 0
    assert fit.reason == (
        "Llama-3.1-70B bf16 needs 131.4 GiB of weights per GPU at TP1; "
        "h100_sxm has 79.2 GiB at 0.90 utilisation = 71.3 GiB"
    )


def test_llama70b_tp2_reserve_sentence() -> None:
    d = Deployment(LLAMA_70B, H100, tp=2)
    fit = memory_fit(d, MemoryParams(framework_reserve_gib=4.0))
    assert not fit.fits
    assert fit.weights_gib_per_gpu == pytest.approx(65.7, abs=0.05)
    assert fit.reason.startswith(
        "Llama-3.1-70B bf16 needs 65.7 GiB of weights per GPU at TP2; h100_sxm has 79.2 GiB "
        "at 0.90 utilisation = 71.3 GiB, leaving 5.57 GiB < 5.65 GiB reserve"
    )
    # With the default 1 GiB framework reserve it fits, with a few GiB of KV.
    ok = memory_fit(d)
    assert ok.fits
    assert 15_000 < ok.kv_tokens < 25_000
    assert ok.kv_tokens == ok.kv_blocks * 16
    assert "fits on h100_sxm at TP2" in ok.reason


def test_exactly_at_the_reserve() -> None:
    d = Deployment(LLAMA_70B, H100, tp=2)
    room = H100.hbm_bytes * 0.9 - weight_bytes_per_gpu(d)
    activations = activation_bytes_per_gpu(d, 8192, 1024)
    block = d.kv_bytes_per_token_per_gpu() * 16

    def fit_with(reserve_bytes: float) -> MemoryParams:
        return MemoryParams(framework_reserve_gib=(reserve_bytes - activations) / GIB)

    at_reserve = memory_fit(d, fit_with(room))
    assert not at_reserve.fits
    assert at_reserve.kv_tokens == 0
    assert "< 16 tokens needed" in at_reserve.reason
    one_block = memory_fit(d, fit_with(room - block - 1024))
    assert one_block.fits
    assert (one_block.kv_blocks, one_block.kv_tokens) == (1, 16)
    short = memory_fit(d, fit_with(room - block + 1024))
    assert not short.fits


def test_min_kv_tokens_is_enforced(llama8b_h100: Deployment) -> None:
    fit = memory_fit(llama8b_h100)
    assert fit.fits
    too_many = memory_fit(llama8b_h100, MemoryParams(min_kv_tokens=fit.kv_tokens + 1))
    assert not too_many.fits
    assert f"< {fit.kv_tokens + 1:,} tokens needed" in too_many.reason


def test_llama8b_kv_capacity_by_hand(llama8b_h100: Deployment) -> None:
    fit = memory_fit(llama8b_h100)
    per_token = 32 * 2 * 8 * 128 * 2  # layers · (K,V) · kv heads · head_dim · bf16
    assert fit.kv_bytes_per_token_per_gpu == per_token == 131_072
    kv = 79.2 * GIB * 0.9 - LLAMA_8B.weight_bytes("bf16") - fit.reserve_gib_per_gpu * GIB
    assert fit.kv_blocks == int(kv // (per_token * 16))


def test_moe_experts_split_by_ep_or_tp_weigh_the_same() -> None:
    ep = weight_bytes_per_gpu(Deployment(QWEN3_MOE, H100, tp=2, ep=2))
    tp = weight_bytes_per_gpu(Deployment(QWEN3_MOE, H100, tp=2, ep=1))
    assert ep == tp
    full = QWEN3_MOE.weight_bytes("bf16")
    # Only the norms (two per layer, Qwen3's per-head Q/K norms, the final one) and the routers
    # are replicated; everything else, embedding and LM head included, is split two ways.
    replicated = 2 * (48 * (2 * 2048 + 2 * 128 + 2048 * 128) + 2048)
    assert ep == pytest.approx((full - replicated) / 2 + replicated, abs=1)
    assert memory_fit(Deployment(QWEN3_MOE, H100, tp=2, ep=2)).fits


def test_mla_kv_is_replicated_per_gpu() -> None:
    d = Deployment(DEEPSEEK_V3, B200, tp=8, weight_precision="fp8")
    fit = memory_fit(d)
    assert fit.kv_bytes_per_token_per_gpu == 61 * 576 * 2 == 70_272
    assert fit.kv_bytes_per_token_per_gpu == DEEPSEEK_V3.kv_bytes_per_token("bf16")
    assert fit.fits
    # fp8 DeepSeek-V3 is ~650 GiB of weights: it cannot fit one 8-GPU H100 node.
    h100 = memory_fit(Deployment(DEEPSEEK_V3, H100, tp=8, weight_precision="fp8"))
    assert not h100.fits
    assert "needs" in h100.reason


def test_engine_accounting_styles(llama8b_h100: Deployment) -> None:
    inside = memory_fit(llama8b_h100, MemoryParams(accounting="reserve_inside"))
    outside = memory_fit(llama8b_h100, MemoryParams(accounting="reserve_outside"))
    free = memory_fit(llama8b_h100, MemoryParams(accounting="fraction_of_free"))
    reserve = inside.reserve_gib_per_gpu
    assert outside.kv_gib_per_gpu == pytest.approx(inside.kv_gib_per_gpu + reserve)
    expected_free = 0.9 * (79.2 - inside.weights_gib_per_gpu - reserve)
    assert free.kv_gib_per_gpu == pytest.approx(expected_free)
    # SGLang-style: the reserve must fit in the memory outside the static fraction.
    squeezed = memory_fit(
        llama8b_h100, MemoryParams(accounting="reserve_outside", hbm_utilization=0.99)
    )
    assert not squeezed.fits
    assert "cannot hold" in squeezed.reason


def test_replicated_kv_heads_count_on_every_gpu() -> None:
    d = Deployment(LLAMA_8B, H100, tp=16, allow_multi_node=True)
    assert d.kv_bytes_per_token_per_gpu() == 32 * 2 * 1 * 128 * 2
    assert d.kv_bytes_per_token_per_gpu() * 16 > LLAMA_8B.kv_bytes_per_token()


@pytest.mark.parametrize(
    ("accounting", "share"),
    [("reserve_inside", 1.0), ("reserve_outside", 0.9), ("fraction_of_free", 0.9)],
)
def test_collective_buffers_come_off_the_pool_once_tp_spans_gpus(
    accounting: MemoryAccounting, share: float
) -> None:
    # vLLM counts them as non-torch memory in its reserve (all 1.85 GiB); SGLang's fraction is
    # of the memory free after the distributed set-up and TensorRT-LLM's of the memory free
    # after loading, so each gives up 0.9 of them at 0.9 utilisation.
    def kv_gib(tp: int, collectives: float) -> float:
        params = MemoryParams(accounting=accounting, collective_gib=collectives)
        fit = memory_fit(Deployment(LLAMA_8B, H100, tp=tp), params)
        assert fit.fits
        return fit.kv_gib_per_gpu

    assert kv_gib(1, 1.85) == kv_gib(1, 0.0)
    assert kv_gib(2, 0.0) - kv_gib(2, 1.85) == pytest.approx(share * 1.85)
    fit = memory_fit(
        Deployment(LLAMA_8B, H100, tp=2), MemoryParams(accounting=accounting, collective_gib=1.85)
    )
    said = ("1.85 GiB of collective buffers", "(collective buffers 1.85 GiB of it)")
    assert any(words in fit.reason for words in said)


@pytest.mark.parametrize("backend", ["vllm", "sglang", "trtllm"])
def test_gpus_without_nvlink_pay_the_pcie_collectives(backend: str) -> None:
    """An L40S pair talks over PCIe: each engine's pcie_collective_gib (0: vLLM's start-up logs
    show the TP1 non-torch memory on PCIe-only cards) instead of its NVLink 1.85 GiB; the same
    card given NVLink pays the 1.85 (the share of it the accounting takes, as above)."""
    cat = shipped_catalog()
    l40s = cat.gpu("l40s")
    nvlinked = l40s.model_copy(update={"gpu_link": "nvlink"})
    params = load_preset(backend).memory_params(2, gpu=l40s)
    assert params.collective_gib == 1.85
    assert params.pcie_collective_gib == 0.0

    def kv_gib(gpu: GpuSpec) -> float:
        fit = memory_fit(Deployment(LLAMA_8B, gpu, tp=2), params)
        assert fit.fits
        return fit.kv_gib_per_gpu

    share = 1.0 if params.accounting == "reserve_inside" else 0.9 if backend == "trtllm" else None
    gained = kv_gib(l40s) - kv_gib(nvlinked)
    if share is None:  # SGLang: the derived fraction of what the collectives leave
        assert 0.8 * 1.85 < gained < 1.85
    else:
        assert gained == pytest.approx(share * 1.85)
    assert "collective" not in memory_fit(Deployment(LLAMA_8B, l40s, tp=2), params).reason


def test_a_separate_sampler_run_peaks_at_the_larger_of_it_and_the_forward_pass() -> None:
    # vLLM 0.19 on H100 (llm-d-planner's start-up logs): Llama-3.1-8B's activation peak is 1.89
    # GiB at TP1, 2 and 4 with max_num_seqs 1,024 — four fp32 copies of 1,024 rows of its
    # 128,256 logits (1.96 GiB) outweigh the forward pass of 8,192 tokens at every TP.
    sampler = 4 * 1024 * 128_256 * 4
    for tp in (1, 2, 4):
        d = Deployment(LLAMA_8B, H100, tp=tp)
        peak = activation_bytes_per_gpu(d, 8192, 1024, sampler_copies=4)
        assert peak == sampler
        assert peak / GIB == pytest.approx(1.89, rel=0.05)
    # With few running requests the forward pass is the peak (the one-copy sum is the default).
    d = Deployment(LLAMA_8B, H100)
    forward = activation_bytes_per_gpu(d, 8192, 1024) - 1024 * 128_256 * 4
    assert activation_bytes_per_gpu(d, 8192, 16, sampler_copies=4) == pytest.approx(forward)
    fit = memory_fit(d, MemoryParams(sampler_logit_copies=4))
    assert fit.reserve_gib_per_gpu == pytest.approx(1.0 + sampler / GIB)


def test_a_static_fraction_applies_to_what_start_up_and_the_collectives_leave() -> None:
    # vllm-project/vllm#21348: SGLang, Qwen3-235B-A22B-FP8 on 4 x H100 at
    # --mem-fraction-static 0.93 logged 367,404 tokens, K + V = 16.46 GiB per GPU. The fraction
    # is of the memory free after the CUDA context (0.9 GiB with the driver's reserve, the
    # value this log fixes) and the collectives (1.85 GiB): 0.93 x (79.65 - 0.9 - 1.85) - weights.
    catalog = shipped_catalog()
    h100 = catalog.gpu("h100_sxm")
    d = Deployment(catalog.model("Qwen/Qwen3-235B-A22B-FP8"), h100, tp=4, weight_precision="fp8")
    params = MemoryParams(
        accounting="reserve_outside", hbm_utilization=0.93, startup_gib=0.9, collective_gib=1.85
    )
    fit = memory_fit(d, params)
    expected = 0.93 * (h100.hbm_bytes - 2.75 * GIB) - weight_bytes_per_gpu(d)
    assert fit.kv_gib_per_gpu * GIB == pytest.approx(expected)
    assert fit.kv_gib_per_gpu == pytest.approx(16.46, rel=0.01)
    assert fit.kv_tokens == pytest.approx(367_404, rel=0.01)
    assert "0.9 GiB at start-up and 1.85 GiB of collective buffers" in fit.reason
    # The other accountings leave start-up to their framework reserve.
    with_startup = memory_fit(d, MemoryParams(startup_gib=0.9, collective_gib=1.85))
    without = memory_fit(d, MemoryParams(collective_gib=1.85))
    assert with_startup.kv_gib_per_gpu == without.kv_gib_per_gpu
