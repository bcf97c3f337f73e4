"""Roofline kernels: hand-computed FLOPs and bytes, the max() rule, all-reduce floors."""

from __future__ import annotations

import numpy as np
import pytest

from hardware.catalog import shipped_catalog
from simulator.latency import Deployment, RooflineKernels, RooflineModel, RooflineParams
from simulator.latency.calibrated import PeakRates
from simulator.latency.roofline import (
    all_reduce_work,
    context_attention_work,
    gemm_work,
    generation_attention_work,
)

from .specs import H100

T = 1024  # tokens in the hand-computed step


def _calls_by_op(d: Deployment) -> dict[str, list[tuple[object, ...]]]:
    model = RooflineModel(d)
    out: dict[str, list[tuple[object, ...]]] = {}
    for call in model.plan([(0, T)]):
        out.setdefault(call.op, []).append((call.kind, call.args, call.count))
    return out


def test_llama8b_layer_gemm_shapes_flops_and_bytes(llama8b_h100: Deployment) -> None:
    ops = _calls_by_op(llama8b_h100)
    # QKV: n = (32 + 2·8)·128 = 6144, k = hidden 4096, once per each of 32 layers.
    assert ops["qkv_proj"] == [("gemm", (T, 6144, 4096, "bf16"), 32)]
    assert ops["o_proj"] == [("gemm", (T, 4096, 4096, "bf16"), 32)]
    assert ops["mlp_gate_up"] == [("gemm", (T, 2 * 14336, 4096, "bf16"), 32)]
    assert ops["mlp_down"] == [("gemm", (T, 4096, 14336, "bf16"), 32)]
    # FLOPs 2mnk; bytes = activations in (m·k·2) + weights (k·n·2) + result (m·n·2).
    qkv = gemm_work(T, 6144, 4096, "bf16")
    assert qkv.flops == 51_539_607_552
    assert qkv.bytes == 8_388_608 + 50_331_648 + 12_582_912
    o = gemm_work(T, 4096, 4096, "bf16")
    assert (o.flops, o.bytes) == (34_359_738_368, 16_777_216 + 33_554_432)
    up = gemm_work(T, 28672, 4096, "bf16")
    assert (up.flops, up.bytes) == (240_518_168_576, 8_388_608 + 234_881_024 + 58_720_256)
    down = gemm_work(T, 4096, 14336, "bf16")
    assert (down.flops, down.bytes) == (120_259_084_288, 29_360_128 + 117_440_512 + 8_388_608)
    # Per layer = 2·T·(GEMM weights of one layer) = 2·1024·218,103,808.
    assert qkv.flops + o.flops + up.flops + down.flops == 2 * T * 218_103_808


def test_llama8b_prefill_attention_work() -> None:
    # A 1024-token prefill with no prefix: 1024·1025/2 = 524,800 causal pairs,
    # 4·head_dim FLOPs per pair and head (QKᵀ and PV), 32 heads.
    w = context_attention_work(1, T, 0, 32, 8, 128, "bf16")
    assert w.flops == 4 * 32 * 128 * 524_800 == 8_598_323_200
    kv = T * 2 * 8 * 128 * 2  # K and V of every attended token, bf16
    qo = 2 * T * 32 * 128 * 2  # Q read, O written
    assert w.bytes == kv + qo == 20_971_520


def test_decode_attention_work_reads_whole_kv() -> None:
    w = generation_attention_work(4, 1000, 32, 8, 128, "fp8")
    assert w.bytes == 4 * (1000 * 2 * 8 * 128 * 1 + 2 * 32 * 128 * 2)
    assert w.flops == 4 * 4 * 32 * 128 * 1000


def test_gemm_is_max_of_compute_and_memory_plus_overhead() -> None:
    p = RooflineParams()
    k = RooflineKernels(H100, p)
    # Big square GEMM: compute bound.
    w = gemm_work(8192, 8192, 8192, "bf16")
    expected = w.flops / (989.4e12 * p.gemm_compute_efficiency) + p.gemm_overhead_s
    assert k.gemm(8192, 8192, 8192, "bf16") == pytest.approx(expected)
    # One token against a 4096x14336 weight: memory bound (reads 117 MB of weights).
    w = gemm_work(1, 14336, 4096, "bf16")
    expected = w.bytes / (3.35e12 * p.gemm_memory_efficiency) + p.gemm_overhead_s
    assert k.gemm(1, 14336, 4096, "bf16") == pytest.approx(expected)
    # fp8 halves the weight bytes and uses its own peak, efficiency and overhead.
    assert k.gemm(1, 14336, 4096, "fp8") < k.gemm(1, 14336, 4096, "bf16")
    w8 = gemm_work(8192, 8192, 8192, "fp8")
    expected = w8.flops / (1978.9e12 * p.gemm_low_precision_compute_efficiency)
    assert k.gemm(8192, 8192, 8192, "fp8") == pytest.approx(
        expected + p.gemm_low_precision_overhead_s
    )


def test_all_reduce_ring_and_measured_floor() -> None:
    k = RooflineKernels(H100)
    assert k.all_reduce(1e6, 1) == 0.0
    # Small messages sit on the NCCL floor measured on H100: 6.2 / 9.5 / 15.5 µs.
    for n, floor_us in ((2, 6.2), (4, 9.3), (8, 15.5)):
        assert k.all_reduce(512, n) * 1e6 == pytest.approx(floor_us, abs=0.1)
    # Large: 2(n-1)/n · bytes / (450 GB/s · efficiency).
    p = RooflineParams()
    big = 256 * 2**20
    expected = 2 * 7 / 8 * big / (450e9 * p.link_efficiency)
    assert k.all_reduce(big, 8) == pytest.approx(expected, rel=0.01)
    assert all_reduce_work(big, 8).bytes == 2 * 7 / 8 * big


def test_all_reduce_across_nodes_uses_every_nic_of_the_node() -> None:
    """Across two nodes the ring pays the network latency, and its bandwidth is the slower of
    NVLink and the node's NICs together (one per GPU; NCCL routes each channel's crossing
    through another): 8 × 50 GB/s × 0.8 = 320 GB/s on an H100 node, above NVLink's 288, so the
    wire time is NVLink's; with a tenth of the NIC bandwidth the NICs set it (wire / 32 GB/s).
    The fixed cost is one node's floor plus the network latency (NCCL's tree for small
    messages), so a tiny message costs the same on 16 GPUs as on 32."""
    p = RooflineParams()
    big = 64 * 2**20
    wire = 2 * 15 / 16 * big
    # One node's floor (the tree's chain over its 8 GPUs) plus the network latency.
    floor = p.all_reduce_floor_base_s + 7 * p.all_reduce_floor_per_gpu_s + p.inter_node_latency_s
    k = RooflineKernels(H100)
    assert k.all_reduce(big, 16) == pytest.approx(wire / (450e9 * 0.64) + floor, rel=1e-9)
    assert k.all_reduce(big, 16) > k.all_reduce(big, 8)
    assert k.all_reduce(8, 16) == pytest.approx(k.all_reduce(8, 32), rel=1e-6)
    slow_nic = RooflineKernels(H100.model_copy(update={"nic_gb_per_s": 5.0}))
    assert slow_nic.all_reduce(big, 16) == pytest.approx(wire / (8 * 5e9 * 0.8) + floor, rel=1e-9)


def test_params_validated() -> None:
    with pytest.raises(ValueError, match="link_efficiency"):
        RooflineParams(link_efficiency=1.5)
    with pytest.raises(ValueError, match="gemm_overhead_s"):
        RooflineParams(gemm_overhead_s=-1.0)


def test_gemm_many_is_gemm_shape_by_shape_to_the_bit() -> None:
    """The table build fills its gaps with ``gemm_many``; it must be ``gemm``, not close to it."""
    k = RooflineKernels(H100)
    rng = np.random.default_rng(7)
    m, n, k_dim = (rng.integers(1, 70_000, size=500) for _ in range(3))
    for dtype in ("bf16", "fp8", "int4", "fp4"):
        many = k.gemm_many(m, n, k_dim, dtype)
        one = [k.gemm(int(a), int(b), int(c), dtype) for a, b, c in zip(m, n, k_dim, strict=True)]
        assert many.tolist() == one, dtype


def test_weight_only_int4_computes_at_the_16_bit_peak() -> None:
    """The catalog's int4 is weight-only (W4A16): A100's listed INT4 tensor peak (W4A4) must not
    price its GEMMs. A compute-bound int4 GEMM takes the bf16 one's time; int8 (W8A8) is
    faster; at one token int4 reads a quarter of the weight bytes."""
    a100 = shipped_catalog().gpu("a100_sxm")
    assert a100.supports("int4")  # the datasheet peak is listed
    k = RooflineKernels(a100, RooflineParams())
    big = (8192, 8192, 8192)
    assert k.gemm(*big, "int4") == pytest.approx(k.gemm(*big, "bf16"))
    assert k.gemm(*big, "int8") < 0.8 * k.gemm(*big, "bf16")
    assert k.gemm(1, 14336, 4096, "int4") < 0.3 * k.gemm(1, 14336, 4096, "bf16")
    rates = PeakRates.of(a100)
    assert rates.flops("int4") == rates.flops("bf16") < rates.flops("int8")
