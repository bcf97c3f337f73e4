"""KV token capacity as each engine sizes it, pinned against a hand calculation."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from hardware.catalog import shipped_catalog
from simulator.build import Pool, build_pool
from simulator.config import ServingConfig
from simulator.core import Kernel
from simulator.latency import Deployment, memory_fit, weight_bytes_per_gpu
from simulator.latency.memory import GIB, activation_bytes_per_gpu
from simulator.latency.memory_rules import (
    sglang_memory_defaults,
    vllm_batch_defaults,
    vllm_mxfp4_backend,
)
from simulator.presets import load_preset
from simulator.records import Recorder

from .specs import B200, H100, LLAMA_8B

#: Llama-3.1-8B: 32 layers x (K + V) x 8 KV heads x 128 x 2 bytes (bf16).
KV_BYTES_PER_TOKEN = 32 * 2 * 8 * 128 * 2


def _weights() -> float:
    return float(LLAMA_8B.weight_bytes("bf16"))


def test_vllm_capacity_by_hand() -> None:
    # total x 0.9 - weights - (0.5 GiB non-torch + activation peak + 0.5 GiB of CUDA graphs,
    # which vLLM 0.21+ estimates while profiling): the activation peak is the sampler run's 4
    # fp32 copies of 1,024 rows of logits, more than an 8,192-token forward pass.
    d = Deployment(LLAMA_8B, H100)
    preset = load_preset("vllm")
    fit = memory_fit(d, preset.memory_params(1))
    activations = 4 * 1024 * LLAMA_8B.vocab_size * 4
    assert activations > activation_bytes_per_gpu(d, 8192, 1)
    kv = H100.hbm_bytes * 0.9 - _weights() - 0.5 * GIB - activations - 0.5 * GIB
    assert fit.kv_tokens == math.floor(kv / (KV_BYTES_PER_TOKEN * 16)) * 16
    assert fit.kv_bytes_per_token_per_gpu == KV_BYTES_PER_TOKEN
    assert "of bf16 KV at 128 KiB per token per GPU" in fit.reason
    assert "(0.5 GiB of CUDA graphs in the reserve)" in fit.reason
    # Before 0.21 the graphs were captured in the 10% the fraction leaves: 0.5 GiB more KV.
    older = dataclasses.replace(preset.memory_params(1), cuda_graphs_in_budget=False)
    before = memory_fit(d, older)
    assert before.kv_gib_per_gpu - fit.kv_gib_per_gpu == pytest.approx(0.5, abs=1e-9)
    assert "(0.5 GiB of CUDA graphs outside)" in before.reason


def test_sglang_pool_on_an_h200_as_its_log_says() -> None:
    """A GPU the SGLang rule was not fitted on: Llama-3.3-70B (Llama-3.1-70B's shape) bf16 at
    TP8 on H200, SGLang's derived fraction; sgl-project/sglang PR #11716 logs "KV Cache is
    allocated. #tokens: 2795207, K size: 53.31 GB" (GiB) per rank."""
    cat = shipped_catalog()
    gpu = cat.gpu("h200_sxm")
    d = Deployment(cat.model("meta-llama/Llama-3.1-70B"), gpu, tp=8)
    fit = memory_fit(d, load_preset("sglang").memory_params(8, gpu=gpu))
    assert fit.kv_tokens == pytest.approx(2_795_207, rel=0.01)
    assert fit.kv_bytes_per_token_per_gpu * 2_795_207 / 2 / GIB == pytest.approx(53.31, abs=0.01)


def test_sglang_capacity_by_hand() -> None:
    # 0.5.4+: reserved = 512 + 8192 x 1.5 + 256 x 2 + 1/8 x 1024 = 13,440 MiB on an 80 GB GPU.
    gpu_mib = H100.hbm_bytes / 2**20  # the test H100: 79.2 GiB
    fraction = round((gpu_mib - 13_440) / gpu_mib, 3)
    assert fraction == 0.834
    fit = memory_fit(Deployment(LLAMA_8B, H100), load_preset("sglang").memory_params(1))
    # The fraction applies to what the driver's reserve and the CUDA context leave (0.9 GiB).
    kv = (H100.hbm_bytes - 0.9 * GIB) * fraction - _weights()
    assert fit.kv_tokens == math.floor(kv / KV_BYTES_PER_TOKEN)
    assert "SGLang mem_fraction_static 0.834 = 1 - 13,440 MiB reserved" in fit.reason


def test_trtllm_capacity_by_hand() -> None:
    # 0.9 x (total - weights - 0.5 GiB non-torch - activation peak), in 32-token blocks.
    d = Deployment(LLAMA_8B, H100)
    fit = memory_fit(d, load_preset("trtllm").memory_params(1))
    free = H100.hbm_bytes - _weights() - 0.5 * GIB - activation_bytes_per_gpu(d, 8192, 2048)
    assert fit.kv_tokens == math.floor(0.9 * free / (KV_BYTES_PER_TOKEN * 32)) * 32


@pytest.mark.parametrize(
    ("tp", "chunk", "graphs", "fraction"),
    [(1, 16384, 512, 0.857), (8, 16384, 512, 0.852)],
)
def test_sglang_rule_on_a_large_gpu(tp: int, chunk: int, graphs: int, fraction: float) -> None:
    # B200 bucket: 16k prefill chunk, CUDA graphs to batch 512; reserve grows with TP.
    rule = sglang_memory_defaults(B200.hbm_bytes, tp)
    assert (rule.chunked_prefill_tokens, rule.cuda_graph_max_bs) == (chunk, graphs)
    reserved = 512 + 16384 * 1.5 + 512 * 2 + tp / 8 * 1024
    assert rule.reserved_mib == reserved
    assert rule.mem_fraction_static == pytest.approx(fraction, abs=0.0015)


def test_an_explicit_fraction_overrides_the_rule() -> None:
    params = load_preset("sglang").memory_params(1)
    fixed = memory_fit(
        Deployment(LLAMA_8B, H100), dataclasses.replace(params, hbm_utilization=0.88)
    )
    assert "static fraction" in fixed.reason
    assert "SGLang mem_fraction_static" not in fixed.reason


@pytest.mark.parametrize(
    ("gpu", "chunk"), [("l40s", 4096), ("a100_sxm", 8192), ("h100_sxm", 8192), ("b200_sxm", 16384)]
)
def test_sglang_prefill_chunk_follows_the_gpu_memory(gpu: str, chunk: int) -> None:
    """SGLang's chunked_prefill_size default comes from the GPU's memory (4096 below 60 GiB,
    8192 below 160 GiB, 16384 above); the other engines keep their fixed chunk."""
    spec = shipped_catalog().gpu(gpu)
    assert load_preset("sglang").chunked_prefill_tokens_for(spec.hbm_bytes, 1) == chunk
    assert load_preset("vllm").chunked_prefill_tokens_for(spec.hbm_bytes, 1) == (
        load_preset("vllm").chunked_prefill_tokens
    )


def _pool(backend: str, gpu: str, **settings: int) -> Pool:
    """The built pool of Qwen3-8B on ``gpu`` under ``backend``'s preset and ``settings``."""
    config = ServingConfig(model="Qwen/Qwen3-8B", gpu=gpu, backend=backend, **settings)
    pool = build_pool(
        config,
        shipped_catalog(),
        block_tokens=16,
        kernel=Kernel(),
        recorder=Recorder(),
        seed=np.random.SeedSequence(0),
    )
    assert isinstance(pool, Pool)
    return pool


@pytest.mark.parametrize(("gpu", "chunk"), [("b200_sxm", 16384), ("h100_sxm", 8192)])
def test_the_engine_built_for_sglang_prefills_the_gpus_chunk(gpu: str, chunk: int) -> None:
    assert _pool("sglang", gpu).params.chunk_tokens == chunk


@pytest.mark.parametrize(
    ("gib", "names", "large"),
    [
        (79.65, ("h100_sxm",), True),  # H100: the large class
        (80.0, ("a100_sxm", "NVIDIA A100-SXM4-80GB"), False),  # A100 of any size: the small
        (95.0, ("my_gpu", "A100 96GB variant"), False),  # vLLM tests the device name
        (69.9, ("h100_cut",), False),  # under 70 GiB
        (70.0, ("h100_cut",), True),  # the boundary is inclusive
        (44.99, ("l40s",), False),
    ],
)
def test_vllm_batch_defaults_follow_the_device_class(
    gib: float, names: tuple[str, ...], large: bool
) -> None:
    """vLLM's get_batch_defaults: >= 70 GiB and no "a100" in the name keeps the large-class
    numbers given; every other device gets 2048 tokens and 256 sequences."""
    got = vllm_batch_defaults(gib * 2**30, names, (8192, 1024))
    assert got.large is large
    want = (8192, 1024) if large else (2048, 256)
    assert (got.max_batched_tokens, got.max_running_requests) == want


@pytest.mark.parametrize(
    ("gpu", "budget", "running"),
    [
        ("l40s", 2048, 256),
        ("a100_sxm", 2048, 256),
        ("h100_sxm", 8192, 1024),
        ("b200_sxm", 8192, 1024),
    ],
)
def test_the_engine_built_for_vllm_takes_the_gpu_class_limits(
    gpu: str, budget: int, running: int
) -> None:
    """`vllm serve` on an L40S or an A100 schedules 2,048-token steps (prefill chunks of that
    size) and 256 requests; the engine line says why."""
    params = _pool("vllm", gpu).params
    assert (params.max_batched_tokens, params.max_running, params.chunk_tokens) == (
        budget,
        running,
        budget,
    )
    assert ("below 70 GiB or on A100" in params.describe()) is (budget == 2048)


def test_vllm_limits_the_user_sets_are_kept_on_a_small_gpu() -> None:
    """A step budget the user gives replaces the class default; the running cap the user did
    not give still comes from the class (and the note stays)."""
    params = _pool("vllm", "l40s", max_batched_tokens=4096).params
    assert (params.max_batched_tokens, params.max_running, params.chunk_tokens) == (4096, 256, 4096)
    assert "256 running requests" in params.describe()
    both = _pool("vllm", "l40s", max_batched_tokens=4096, max_running_requests=64).params
    assert (both.max_batched_tokens, both.max_running) == (4096, 64)
    assert "below 70 GiB" not in both.describe()


def test_vllm_memory_profiles_the_small_class_step() -> None:
    """vLLM's profiling pass runs max_num_batched_tokens tokens: on an L40S the activation
    peak is that of a 2,048-token step, so the KV cache gets more than with 8,192."""
    preset = load_preset("vllm")
    l40s = shipped_catalog().gpu("l40s")
    d = Deployment(LLAMA_8B, l40s)
    small = memory_fit(d, preset.memory_params(1, gpu=l40s))
    generic = memory_fit(d, preset.memory_params(1))
    assert preset.memory_params(1, gpu=l40s).max_batched_tokens == 2048
    assert small.kv_tokens > generic.kv_tokens
    assert small.kv_tokens - generic.kv_tokens == pytest.approx(
        (
            activation_bytes_per_gpu(d, 8192, 1024, sampler_copies=4)
            - activation_bytes_per_gpu(d, 2048, 256, sampler_copies=4)
        )
        / KV_BYTES_PER_TOKEN,
        abs=64,
    )


@pytest.mark.parametrize(
    ("capability", "marlin", "backend"),
    [
        (80, False, "marlin"),  # Ampere: no triton_kernels (it needs 9.0 <= cc < 11.0)
        (89, False, "marlin"),  # Ada (L40S)
        (90, False, "triton"),  # Hopper's default since triton_kernels is a dependency
        (90, True, "marlin"),  # VLLM_MXFP4_USE_MARLIN=1 (InferenceX's Hopper gpt-oss scripts)
        (100, False, "flashinfer_trtllm"),  # Blackwell: first in vLLM's priority order
        (103, False, "flashinfer_trtllm"),  # Blackwell Ultra is of the SM100 family
        (None, False, None),  # not NVIDIA, or unknown: not modelled
    ],
)
def test_vllm_picks_its_mxfp4_moe_backend_by_compute_capability(
    capability: int | None, marlin: bool, backend: str | None
) -> None:
    assert vllm_mxfp4_backend(capability, marlin) == backend


def _gpt_oss(gpu: str, tp: int, *, marlin: bool | None = None, backend: str = "vllm") -> Deployment:
    """gpt-oss-20b on ``tp`` GPUs, each expert's FFN split ``tp`` ways (vLLM without
    ``--enable-expert-parallel``)."""
    cat = shipped_catalog()
    preset = load_preset(backend)
    return Deployment(
        cat.model("openai/gpt-oss-20b"),
        cat.gpu(gpu),
        tp=tp,
        ep=1,
        weight_precision="fp4",
        mxfp4_expert_alignment=preset.mxfp4_expert_alignment(cat.gpu(gpu), marlin),
    )


@pytest.mark.parametrize(
    ("gpu", "tp", "marlin", "factor"),
    [
        # Marlin: hidden 2,880 -> 3,072 (256), FFN share 2,880 -> 2,944 (128) at TP1, 1,440 ->
        # 1,536 at TP2.
        ("a100_sxm", 1, None, (3072 / 2880) * (2944 / 2880)),
        ("h100_sxm", 2, True, (3072 / 2880) * (1536 / 1440)),
        # Triton: the FFN share to 64 only: 2,880 is whole, 1,440 -> 1,472, 360 -> 384.
        ("h100_sxm", 1, None, 1.0),
        ("h100_sxm", 2, None, 1472 / 1440),
        ("h100_sxm", 8, None, 384 / 360),
        # FlashInfer's TRT-LLM kernel: both to 256; TP8's 360-wide share takes 512.
        ("b200_sxm", 4, None, (3072 / 2880) * (768 / 720)),
        ("b200_sxm", 8, None, (3072 / 2880) * (512 / 360)),
    ],
)
def test_vllm_pads_mxfp4_experts_to_its_kernels_tiles(
    gpu: str, tp: int, marlin: bool | None, factor: float
) -> None:
    assert _gpt_oss(gpu, tp, marlin=marlin).routed_expert_padding() == pytest.approx(factor)


def test_whole_experts_under_expert_parallelism_pad_the_whole_ffn() -> None:
    """With ``--enable-expert-parallel`` each GPU holds whole experts: the FFN is not split, so
    Blackwell's TP8 pads 2,880 to 3,072, not a 360-wide share to 512."""
    cat = shipped_catalog()
    gpu = cat.gpu("b200_sxm")
    d = Deployment(
        cat.model("openai/gpt-oss-120b"), gpu, tp=8, ep=8, weight_precision="fp4",
        mxfp4_expert_alignment=load_preset("vllm").mxfp4_expert_alignment(gpu, None),
    )  # fmt: skip
    assert d.routed_expert_padding() == pytest.approx((3072 / 2880) ** 2)


@pytest.mark.parametrize(
    ("gpu", "tp", "factor"),
    [
        ("h100_sxm", 1, 1.0),  # Triton: 2,880 is a whole number of 64s
        ("h100_sxm", 2, 1472 / 1440),
        ("b200_sxm", 4, (3072 / 2880) * (768 / 720)),  # FlashInfer's runner: both to 256
        ("b200_sxm", 8, (3072 / 2880) * (512 / 360)),
    ],
)
def test_sglang_pads_mxfp4_experts_to_its_runners_tiles(gpu: str, tp: int, factor: float) -> None:
    padding = _gpt_oss(gpu, tp, backend="sglang").routed_expert_padding()
    assert padding == pytest.approx(factor)


def test_only_mxfp4_experts_at_their_own_precision_are_padded() -> None:
    """TensorRT-LLM's layout is not modelled (as stored); a gpt-oss run in bf16 has no MXFP4
    experts; a dense model has no experts."""
    assert _gpt_oss("b200_sxm", 8, backend="trtllm").routed_expert_padding() == 1.0
    cat = shipped_catalog()
    align = (256, 128)
    bf16 = Deployment(
        cat.model("openai/gpt-oss-20b"), cat.gpu("a100_sxm"), mxfp4_expert_alignment=align
    )
    assert bf16.routed_expert_padding() == 1.0
    dense = Deployment(LLAMA_8B, H100, mxfp4_expert_alignment=align)
    assert dense.routed_expert_padding() == 1.0


def test_gpt_oss_20b_weights_on_an_a100_as_vllm_logs_them() -> None:
    """By hand: gpt-oss-20b's 24 x 32 experts of 3 x 2,880 x 2,880 MXFP4 weights (4.25 bits
    with the scale of every 32) grow by the Marlin padding; a vLLM 0.19 start-up on one A100
    logged "Model loading took 13.72 GiB" (myoceane.fr, vllm-a100-gemma-4)."""
    padded, stored = _gpt_oss("a100_sxm", 1), _gpt_oss("a100_sxm", 1, backend="trtllm")
    experts = 24 * 32 * 3 * 2880 * 2880 * 4.25 / 8
    extra = experts * ((3072 / 2880) * (2944 / 2880) - 1)
    assert weight_bytes_per_gpu(padded) - weight_bytes_per_gpu(stored) == pytest.approx(
        extra, abs=2
    )
    assert weight_bytes_per_gpu(padded) / GIB == pytest.approx(13.72, rel=0.01)
    assert weight_bytes_per_gpu(stored) / GIB < 13.72 * 0.94  # as stored: 7% short of the log
    assert memory_fit(padded).reason.endswith(
        "the weights count its MXFP4 experts padded to the MoE kernel's tiles, 9.0% over the "
        "checkpoint"
    )
