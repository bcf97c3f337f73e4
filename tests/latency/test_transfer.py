"""Transfer times over links built from the catalog, and KV sizes."""

from __future__ import annotations

import pytest

from hardware.schema import StorageTierSpec
from simulator.latency import (
    Link,
    LinkParams,
    gpu_gpu_link,
    kv_bytes,
    kv_bytes_per_gpu,
    link_to_tier,
    storage_link,
    transfer_seconds,
)

from .specs import DEEPSEEK_V3, H100, LLAMA_8B, LLAMA_70B


def _tier(kind: str, read: float, write: float, latency_us: float) -> StorageTierSpec:
    return StorageTierSpec(
        name=kind,
        kind=kind,
        read_gb_per_s=read,
        write_gb_per_s=write,
        latency_us=latency_us,
        capacity_gib_min=1,
        capacity_gib_max=10_000,
        default_capacity_gib=100,
        usd_per_gib_month=0.1,
    )


DRAM = _tier("dram", 100.0, 100.0, 1.0)
SSD = _tier("ssd", 7.0, 5.0, 100.0)
POOL = _tier("remote_pool", 25.0, 20.0, 50.0)


def test_transfer_formula() -> None:
    link = Link("x", gb_per_s=20.0, latency_s=5e-6, efficiency=0.5)
    assert transfer_seconds(0, link) == 0.0
    assert transfer_seconds(-3, link) == 0.0
    assert transfer_seconds(1e9, link) == pytest.approx(5e-6 + 0.1)


def test_hbm_dram_goes_over_pcie() -> None:
    link = link_to_tier(H100, DRAM, "read")
    assert link.bytes_per_s == pytest.approx(64e9 * 0.8)  # PCIe is slower than the DRAM
    assert link.latency_s == pytest.approx(10e-6 + 1e-6)
    assert transfer_seconds(2**30, link) == pytest.approx(11e-6 + 2**30 / 51.2e9)


def test_ssd_and_pool_are_limited_by_the_tier() -> None:
    assert link_to_tier(H100, SSD, "read").bytes_per_s == pytest.approx(7e9)
    assert link_to_tier(H100, SSD, "write").bytes_per_s == pytest.approx(5e9)
    pool = link_to_tier(H100, POOL, "read")
    assert pool.bytes_per_s == pytest.approx(25e9)  # NIC 50 GB/s · 0.9 > the pool's 25
    assert pool.latency_s == pytest.approx(20e-6 + 50e-6)
    assert storage_link(SSD, "write").bytes_per_s == pytest.approx(5e9)
    assert storage_link(SSD, "read").latency_s == pytest.approx(100e-6)


def test_gpu_to_gpu() -> None:
    nvlink = gpu_gpu_link(H100)
    assert nvlink.bytes_per_s == pytest.approx(450e9 * 0.8)
    nic = gpu_gpu_link(H100, same_node=False, params=LinkParams(nic_efficiency=1.0))
    assert nic.bytes_per_s == pytest.approx(50e9)
    # Moving 1 GB between nodes takes ~9x longer than over NVLink.
    assert transfer_seconds(1e9, nic) > 5 * transfer_seconds(1e9, nvlink)


def test_link_validation() -> None:
    with pytest.raises(ValueError, match="efficiency"):
        Link("bad", gb_per_s=1.0, latency_s=0.0, efficiency=0.0)


def test_kv_bytes_gqa_and_mla() -> None:
    # Llama-3.1-8B: 32 layers · 2 · 8 KV heads · 128 · 2 B = 128 KiB per token.
    assert kv_bytes(LLAMA_8B, 1000) == 1000 * 131_072
    assert kv_bytes(LLAMA_8B, 1000, "fp8") == 1000 * 65_536
    # Split over TP: 70B at TP4 keeps 2 of its 8 KV heads per GPU.
    assert kv_bytes_per_gpu(LLAMA_70B, 10, "bf16", 4) == kv_bytes(LLAMA_70B, 10) / 4
    # Beyond 8-way TP the heads are replicated: one per GPU.
    assert kv_bytes_per_gpu(LLAMA_70B, 10, "bf16", 16) == kv_bytes(LLAMA_70B, 10) / 8
    # MLA: one 576-element latent per layer, the same on every GPU.
    assert kv_bytes(DEEPSEEK_V3, 1) == 61 * 576 * 2
    assert kv_bytes_per_gpu(DEEPSEEK_V3, 1, "bf16", 8) == kv_bytes(DEEPSEEK_V3, 1)
