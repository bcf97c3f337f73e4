"""Deployment validation: each invalid combination is a one-line InputError."""

from __future__ import annotations

import pytest

from simulator.latency import Deployment
from slo.inputfile import InputError

from .specs import B200, DEEPSEEK_V3, H100, LLAMA_8B, LLAMA_70B, QWEN3_MOE


def _one_line_error(match: str, **kwargs: object) -> str:
    with pytest.raises(InputError, match=match) as info:
        Deployment(**kwargs)  # type: ignore[arg-type]
    message = str(info.value)
    assert "\n" not in message
    return message


def test_fp8_weights_need_fp8_tensor_cores() -> None:
    # Ampere: bf16/fp16 and int8 tensor cores only (A100 datasheet).
    a100 = H100.model_copy(
        update={"name": "a100_sxm", "dense_tflops": {"bf16": 312.0, "fp16": 312.0, "int8": 624.0}}
    )
    message = _one_line_error(
        "no fp8 tensor cores", model=LLAMA_8B, gpu=a100, weight_precision="fp8"
    )
    assert "a100_sxm" in message
    assert Deployment(LLAMA_8B, H100, weight_precision="fp8").weight_precision == "fp8"


def test_fp8_weights_run_weight_only_where_the_engine_does() -> None:
    # vLLM (all) and SGLang (dense) dequantise FP8 weights in Marlin kernels on Ampere.
    a100 = H100.model_copy(update={"name": "a100_sxm", "dense_tflops": {"bf16": 312.0}})
    dense = Deployment(LLAMA_8B, a100, weight_precision="fp8", fp8_weight_only="dense")
    assert dense.weight_precision == "fp8"
    moe = Deployment(QWEN3_MOE, a100, tp=4, weight_precision="fp8", fp8_weight_only="all")
    assert moe.weight_precision == "fp8"
    message = _one_line_error(
        "dense layers only", model=QWEN3_MOE, gpu=a100, tp=4, weight_precision="fp8",
        fp8_weight_only="dense",
    )  # fmt: skip
    assert "no fp8 tensor cores" in message
    message = _one_line_error(
        "does not run FP8", model=LLAMA_8B, gpu=a100, weight_precision="fp8",
        fp8_weight_only="none",
    )  # fmt: skip
    # The allowance is for FP8 only: W8A8 int8 still needs int8 tensor cores.
    _one_line_error(
        "no int8 tensor cores", model=LLAMA_8B, gpu=a100, weight_precision="int8",
        fp8_weight_only="all",
    )  # fmt: skip
    # An attention-DP rank keeps its instance's allowance.
    ranked = Deployment(
        QWEN3_MOE, a100, tp=4, ep=4, attention_dp=4, weight_precision="fp8", fp8_weight_only="all"
    )
    assert ranked.rank().fp8_weight_only == "all"


def test_fp4_weights_run_weight_only_without_fp4_tensor_cores() -> None:
    # MXFP4/NVFP4 on Hopper: 4-bit weights dequantised into bf16 GEMMs (vLLM Marlin/Triton).
    assert Deployment(LLAMA_8B, H100, weight_precision="fp4").weight_precision == "fp4"
    assert Deployment(LLAMA_8B, B200, weight_precision="fp4").weight_precision == "fp4"


def test_weight_only_int4_runs_anywhere() -> None:
    assert Deployment(LLAMA_8B, H100, weight_precision="int4").weight_precision == "int4"


def test_weight_only_int8_runs_anywhere_w8a8_needs_int8_tensor_cores() -> None:
    # int8_wo (W8A16) dequantises into 16-bit GEMMs; int8 (W8A8 SmoothQuant) needs an int8 peak.
    no_int8 = H100.model_copy(update={"name": "no_int8", "dense_tflops": {"bf16": 989.4}})
    assert Deployment(LLAMA_8B, no_int8, weight_precision="int8_wo").weight_precision == "int8_wo"
    _one_line_error("no int8 tensor cores", model=LLAMA_8B, gpu=no_int8, weight_precision="int8")


def test_kv_precision_checks() -> None:
    _one_line_error("not a KV-cache precision", model=LLAMA_8B, gpu=H100, kv_precision="int8")
    _one_line_error("fp4 KV cache", model=LLAMA_8B, gpu=H100, kv_precision="fp4")
    _one_line_error("unknown precision", model=LLAMA_8B, gpu=H100, kv_precision="fp6")
    assert Deployment(LLAMA_8B, H100, kv_precision="fp8").kv_element_bytes == 1.0


def test_tp_must_divide_heads() -> None:
    _one_line_error("does not divide the 32 attention heads", model=LLAMA_8B, gpu=H100, tp=3)
    _one_line_error("positive integer", model=LLAMA_8B, gpu=H100, tp=0)


def test_kv_heads_replicated_beyond_tp() -> None:
    # 8 KV heads, tp 16: each GPU keeps one (replicated) head, as vLLM does.
    d = Deployment(LLAMA_8B, H100, tp=16, allow_multi_node=True)
    assert d.kv_heads_per_gpu == 1
    assert d.heads_per_gpu == 2
    assert d.num_nodes == 2


def test_tp_beyond_a_node_needs_the_flag() -> None:
    message = _one_line_error("exceeds the 8 GPUs", model=LLAMA_70B, gpu=H100, tp=16)
    assert "multi-node" in message


def test_expert_parallel_rules() -> None:
    assert Deployment(QWEN3_MOE, H100, tp=4).expert_parallel == 4  # default ep = tp
    d = Deployment(QWEN3_MOE, H100, tp=4, ep=2)
    assert (d.expert_parallel, d.expert_tp) == (2, 2)
    _one_line_error("positive divisor of tp=4", model=QWEN3_MOE, gpu=H100, tp=4, ep=3)
    _one_line_error("MoE models only", model=LLAMA_8B, gpu=H100, tp=2, ep=2)
    assert Deployment(LLAMA_8B, H100, tp=2, ep=1).expert_parallel == 1


def test_mla_replicates_the_latent() -> None:
    d = Deployment(DEEPSEEK_V3, B200, tp=8)
    assert d.kv_heads_per_gpu == 1
    assert d.kv_bytes_per_token_per_gpu() == 61 * (512 + 64) * 2
    assert d.describe() == "DeepSeek-V3 bf16 on b200 TP8 EP8"
