"""Step time and memory of sliding-window and hybrid models: windowed layers read at most their
window, linear-attention layers read a constant state, and the KV pool counts full layers only."""

from __future__ import annotations

import math

import pytest

from hardware.catalog import shipped_catalog
from hardware.schema import ModelSpec
from simulator.latency import ComposeParams, Deployment, OperatorPlanner, RooflineModel, memory_fit
from simulator.latency.memory import GIB, activation_bytes_per_gpu
from simulator.presets import load_preset
from slo.inputfile import InputError

from .specs import H100

NO_OVERHEAD = ComposeParams(step_overhead_s=0.0, request_overhead_s=0.0)
CATALOG = shipped_catalog()
GPT_OSS = CATALOG.model("openai/gpt-oss-120b")
QWEN3_NEXT = CATALOG.model("Qwen/Qwen3-Next-80B-A3B-Instruct")


def _all_full(model: ModelSpec) -> ModelSpec:
    """The same model with every layer full attention (no window)."""
    return model.model_copy(update={"sliding_window": 0, "sliding_window_layers": 0})


def _decode_attention(model: ModelSpec, kv_len: int) -> float:
    batch = [(kv_len, 1)] * 8
    return RooflineModel(Deployment(model, H100), params=NO_OVERHEAD).breakdown(batch).total


def test_windowed_layers_stop_growing_past_the_window() -> None:
    # From 4k to 64k of context only the 18 full layers read more KV: half the growth of the
    # same model with all 36 layers full (the octave buckets are linear in both).
    windowed = _decode_attention(GPT_OSS, 65536) - _decode_attention(GPT_OSS, 4096)
    full = _decode_attention(_all_full(GPT_OSS), 65536) - _decode_attention(
        _all_full(GPT_OSS), 4096
    )
    assert windowed == pytest.approx(full / 2, rel=1e-9)
    assert windowed > 0


def _keys(cached: int, new: int, window: int) -> int:
    """Exact (query, key) pairs of a windowed causal prefill."""
    return sum(min(cached + i + 1, window) for i in range(new))


@pytest.mark.parametrize(("cached", "new"), [(0, 64), (0, 128), (0, 4096), (300, 50), (60, 100)])
def test_windowed_prefill_keeps_the_attention_flops(cached: int, new: int) -> None:
    planner = OperatorPlanner(Deployment(GPT_OSS, H100))
    call = planner._window_prefill_call(cached, new, count=1)
    batch, size, prefix = call.args[0], call.args[1], call.args[2]
    pairs = batch * (size * prefix + size * (size + 1) / 2)
    assert pairs == pytest.approx(_keys(cached, new, 128), rel=0.02)
    assert size <= 128
    assert call.count == 18


def test_linear_layers_read_a_constant_state_per_decode() -> None:
    d = Deployment(QWEN3_NEXT, H100, tp=4)
    planner = OperatorPlanner(d)
    (state,) = [c for c in planner.decode_token_calls(10) if c.op == "linear_state"]
    per_layer = QWEN3_NEXT.linear_state_bytes() / 36 / 4
    assert state.args == (2.0 * 10 * per_layer, 2)
    assert state.count == 36
    # Decode attention: only the 12 full layers; the state does not grow with the context.
    calls = planner.decode_calls([(8192, 10)])
    assert [c.count for c in calls if c.op == "attn_decode"] == [12]
    assert {c.op for c in planner.token_calls(16)} >= {"linear_in_proj", "linear_recurrence"}


def test_gpt_oss_capacity_by_hand() -> None:
    # vLLM on one H100: 0.9 x HBM - weights - (0.5 GiB + activations + graphs), per token 18 full
    # layers x 2 x 8 KV heads x 64 x 2 bytes = 36 KiB: half of what 36 full layers would take.
    # The activation peak is the sampler's: 4 fp32 copies of 1,024 rows of 201,088 logits.
    d = Deployment(GPT_OSS, H100, weight_precision="fp4")  # MXFP4 experts, weight-only
    preset = load_preset("vllm")
    fit = memory_fit(d, preset.memory_params(1))
    assert fit.fits
    per_token = 18 * 2 * 8 * 64 * 2
    activations = activation_bytes_per_gpu(d, 8192, 1024, sampler_copies=4)
    assert activations == 4 * 1024 * GPT_OSS.vocab_size * 4
    graphs = 0.5 * GIB  # vLLM 0.21+ takes its CUDA graphs off the pool (vllm.yaml)
    kv = H100.hbm_bytes * 0.9 - fit.weights_gib_per_gpu * GIB - 0.5 * GIB - activations - graphs
    assert fit.kv_bytes_per_token_per_gpu == per_token
    assert fit.kv_tokens == math.floor(kv / (per_token * 16)) * 16
    # 18 x 128 window tokens x 2 x 8 x 64 x 2 bytes = 4.5 MiB per request = 128 tokens' KV.
    assert d.request_state_bytes_per_gpu() == 18 * 128 * 2 * 8 * 64 * 2
    assert "18 full-attention layers of 36" in fit.reason
    assert "4.50 MiB" in fit.reason
    full_d = Deployment(_all_full(GPT_OSS), H100, weight_precision="fp4")
    full = memory_fit(full_d, preset.memory_params(1))
    assert fit.kv_tokens == pytest.approx(2 * full.kv_tokens, abs=16)


def test_linear_heads_must_divide_by_tp() -> None:
    odd = QWEN3_NEXT.model_copy(update={"linear_num_value_heads": 36})
    with pytest.raises(InputError, match="36 value heads of the linear-attention layers"):
        Deployment(odd, H100, tp=8)


def _projection_dtypes(model: ModelSpec, precision: str) -> set[str]:
    planner = OperatorPlanner(Deployment(model, H100, weight_precision=precision))
    calls = planner.token_calls(256)
    return {c.args[3] for c in calls if c.op in ("qkv_proj", "o_proj")}


def test_mxfp4_checkpoint_keeps_its_attention_projections_in_bf16() -> None:
    # gpt-oss's MXFP4 quantises the experts only (modules_to_not_convert: self_attn): served at
    # its own precision the projections are bf16 GEMMs, as the memory fit counts their bytes;
    # re-quantised to fp8 (another recipe) every GEMM is fp8.
    assert _projection_dtypes(GPT_OSS, "fp4") == {"bf16"}
    assert _projection_dtypes(GPT_OSS, "fp8") == {"fp8"}
    experts = [
        c
        for c in OperatorPlanner(
            Deployment(GPT_OSS, H100, weight_precision="fp4")
        ).routed_expert_calls(256)
        if c.kind == "gemm"
    ]
    assert experts
    assert {c.args[3] for c in experts} == {"fp4"}
