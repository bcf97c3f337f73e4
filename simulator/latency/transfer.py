"""KV-cache transfer times over the links between tiers and GPUs, and KV sizes.

A ``Link`` is a nominal bandwidth, a fixed latency per transfer and an efficiency::

    transfer_seconds(nbytes, link) = latency_s + nbytes / (gb_per_s · 1e9 · efficiency)

Links are built from the catalog: ``GpuSpec`` (PCIe, NVLink, NIC) and ``StorageTierSpec`` (DRAM,
SSD, remote pool). Bandwidths are per GPU and per direction, so under TP each GPU moves its own
KV shard over its own link in parallel: price ``kv_bytes_per_gpu`` with one GPU's link.

Efficiencies and latencies not in the catalog are ``LinkParams``, documented assumptions.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from hardware.schema import BYTES_PER_ELEMENT, GpuSpec, ModelSpec, StorageTierSpec

__all__ = [
    "Direction",
    "Link",
    "LinkParams",
    "gpu_gpu_link",
    "kv_bytes",
    "kv_bytes_per_gpu",
    "link_to_tier",
    "request_state_bytes_per_gpu",
    "storage_link",
    "transfer_seconds",
]

#: 'read' = from the lower tier towards the GPU (load, prefetch); 'write' = towards the tier.
Direction = Literal["read", "write"]


@dataclass(frozen=True, slots=True)
class Link:
    """A data path: nominal bandwidth (GB/s = 1e9 B/s, one direction), latency, efficiency."""

    name: str
    gb_per_s: float
    latency_s: float
    efficiency: float = 1.0

    def __post_init__(self) -> None:
        if self.gb_per_s <= 0 or self.latency_s < 0 or not 0 < self.efficiency <= 1:
            raise ValueError(
                f"link {self.name}: need gb_per_s > 0, latency_s >= 0, 0 < efficiency <= 1"
            )

    @property
    def bytes_per_s(self) -> float:
        """Achieved bandwidth in bytes per second."""
        return self.gb_per_s * 1e9 * self.efficiency


@dataclass(frozen=True, slots=True)
class LinkParams:
    """Efficiencies and per-transfer latencies of links (assumptions; seconds, fractions)."""

    #: Pinned-memory cudaMemcpy reaches ~80% of PCIe's nominal rate (e.g. ~52 of 64 GB/s on
    #: Gen5 x16, ~25 of 32 on Gen4).
    pcie_efficiency: float = 0.80
    #: Launch and DMA set-up of one asynchronous copy (order of magnitude: 10 µs).
    pcie_latency_s: float = 10.0e-6
    #: NVLink point-to-point copies between two GPUs (NCCL send/recv) reach ~80% of nominal.
    nvlink_efficiency: float = 0.80
    nvlink_latency_s: float = 10.0e-6
    #: RDMA (InfiniBand / RoCE) transfers reach ~90% of line rate for large messages.
    nic_efficiency: float = 0.90
    #: One-sided RDMA round trip plus the transfer engine's bookkeeping.
    nic_latency_s: float = 20.0e-6


def transfer_seconds(nbytes: float, link: Link) -> float:
    """Seconds to move ``nbytes`` over ``link``; 0 when there is nothing to move."""
    if nbytes <= 0:
        return 0.0
    return link.latency_s + nbytes / link.bytes_per_s


def gpu_gpu_link(gpu: GpuSpec, *, same_node: bool = True, params: LinkParams | None = None) -> Link:
    """GPU to GPU: the node's interconnect (NVLink) inside a node, the NIC across nodes
    (e.g. prefill → decode instances in PD disaggregation)."""
    p = params or LinkParams()
    if same_node:
        eff = p.nvlink_efficiency if gpu.gpu_link == "nvlink" else p.pcie_efficiency
        lat = p.nvlink_latency_s if gpu.gpu_link == "nvlink" else p.pcie_latency_s
        return Link(f"{gpu.name} {gpu.gpu_link}", gpu.gpu_link_gb_per_s, lat, eff)
    return Link(f"{gpu.name} nic", gpu.nic_gb_per_s, p.nic_latency_s, p.nic_efficiency)


def link_to_tier(
    gpu: GpuSpec,
    tier: StorageTierSpec,
    direction: Direction,
    *,
    params: LinkParams | None = None,
) -> Link:
    """HBM ↔ a tier, per GPU: DRAM over PCIe; a remote pool over the NIC (RDMA into HBM);
    an SSD over PCIe as well (GPUDirect-style; the SSD's own rate is usually the bottleneck).

    The bandwidth is the slower of the GPU's path and the tier's own rate; the latency adds the
    tier's fixed latency to the path's.
    """
    p = params or LinkParams()
    tier_rate = tier.read_gb_per_s if direction == "read" else tier.write_gb_per_s
    if tier.kind == "remote_pool":
        path_rate, lat, eff = gpu.nic_gb_per_s, p.nic_latency_s, p.nic_efficiency
    else:
        path_rate, lat, eff = gpu.pcie_gb_per_s, p.pcie_latency_s, p.pcie_efficiency
    # Efficiency applies to the GPU path; a slower tier is taken at its stated (sustained) rate.
    rate = min(path_rate * eff, tier_rate)
    return Link(f"hbm-{tier.name} {direction}", rate, lat + tier.latency_us * 1e-6, 1.0)


def storage_link(tier: StorageTierSpec, direction: Direction) -> Link:
    """Host DRAM ↔ a lower tier (SSD or remote pool) at the tier's stated sustained rate."""
    rate = tier.read_gb_per_s if direction == "read" else tier.write_gb_per_s
    return Link(f"dram-{tier.name} {direction}", rate, tier.latency_us * 1e-6, 1.0)


def kv_bytes(model: ModelSpec, tokens: int, kv_precision: str = "bf16") -> float:
    """KV bytes of ``tokens`` cached tokens for the whole model (every full-attention layer; all
    TP shards together, counting each KV head once). GQA: ``2 · kv_heads · head_dim`` per layer
    and token; MLA: one latent of ``kv_lora_rank + qk_rope_head_dim`` (plus a DSA model's FP8
    indexer key, ``ModelSpec.index_key_bytes_per_layer_token``)."""
    return tokens * model.kv_bytes_per_token(kv_precision)


def kv_bytes_per_gpu(model: ModelSpec, tokens: int, kv_precision: str, tp: int) -> float:
    """KV bytes of ``tokens`` cached tokens on each GPU of a TP group (full-attention layers).

    GQA: ``max(1, kv_heads // tp)`` heads per GPU (heads are replicated when ``tp`` exceeds
    them, as vLLM does); MLA: the whole latent on every GPU (replicated across TP ranks), and a
    DSA model's indexer key too (vLLM and SGLang replicate the indexer: ``ReplicatedLinear``).
    """
    per_layer = _kv_elements_per_layer_gpu(model, tp) * BYTES_PER_ELEMENT[kv_precision]
    if model.index_topk:
        per_layer += model.index_key_bytes_per_layer_token()
    return tokens * model.full_attention_layers * per_layer


def request_state_bytes_per_gpu(
    model: ModelSpec, kv_precision: str, tp: int, state_precision: str = "fp32"
) -> float:
    """What one running request holds on each GPU besides its cached tokens' KV: the last
    ``sliding_window`` tokens of KV in each sliding-window layer (heads split as in
    ``kv_bytes_per_gpu``) and its linear-attention state, recurrent part in
    ``state_precision`` (heads split ``tp`` ways, as vLLM and SGLang shard Gated DeltaNet and
    Mamba heads). 0 for a model with neither."""
    window = model.sliding_window_layers * model.sliding_window
    window_bytes = window * _kv_elements_per_layer_gpu(model, tp) * BYTES_PER_ELEMENT[kv_precision]
    return window_bytes + model.linear_state_bytes(state_precision) / tp


def _kv_elements_per_layer_gpu(model: ModelSpec, tp: int) -> int:
    if model.attention == "mla":
        return model.kv_elements_per_layer_token()
    return 2 * max(1, model.num_kv_heads // tp) * model.head_dim
