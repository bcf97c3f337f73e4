"""Roofline kernel times: max(compute, memory) against a GPU's peaks, plus a fixed kernel cost.

Each primitive of ``KernelTimer`` costs::

    max(flops / (peak_flops(dtype) · eff_compute), bytes / (hbm_bw · eff_mem)) + overhead

and an all-reduce over ``n`` GPUs is a ring::

    2(n-1)/n · message_bytes / (link_bw · eff_link) + floor(n),   floor(n) = a + b·(n-1)

Across nodes the ring also crosses the network: NCCL builds one ring per channel through every
GPU and sends each ring's node crossing through another NIC (rail-optimised servers have one
NIC per GPU), so each NIC carries ``1 / gpus_per_node`` of the crossing traffic and the ring runs
at the slower of NVLink and the node's NICs together (``gpus_per_node · nic_bw · eff_nic``), plus
a network latency over the intra-node floor: small messages go up and down NCCL's tree (a chain
inside each node, a tree between nodes), so the fixed cost is one node's ``floor(gpus_per_node)``
plus ``inter_node_latency_s``, not the ring's per-GPU step over all ``n`` GPUs (which made the
16-GPU floor 48 µs; DeepSeek-R1 decoding one request on TP16 measures 9.1 ms per token with 122
all-reduces in it). On a DGX H100 the bandwidth is 8 × 50 GB/s = 400 GB/s, what two-node nccl-tests
all_reduce measures (400-450 GB/s bus bandwidth on H100 SXM with NDR InfiniBand: Saturn Cloud's
NCCL cluster-validation guide, "Expected Performance"); one NIC's 50 GB/s, as this model had it,
made a 16-GPU all-reduce of a 6.6 MB decode batch 432 µs instead of ~100 µs.

FLOP and byte counts are exposed (``gemm_work`` and friends) so tests and reports can check them
by hand. Bytes are the compulsory traffic — each operand read once, the result written once — so
the memory term is a lower bound (FlashAttention re-reading KV per query tile is not counted).

The defaults of ``RooflineParams`` were read off the measured H100-SXM profiles in
``shared/data/profiles/h100_sxm`` (vLLM 0.24.0 kernels, NCCL 2.27.3) against the H100's
datasheet peaks (989 bf16 / 1979 fp8 dense TFLOPS, 3.35 TB/s HBM, 450 GB/s NVLink per
direction); each field says which rows and what statistic. They are a starting point, not a fit:
``calibrated`` (part 2) fits per-class scales by least squares.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hardware.precision import gemm_compute_precision
from hardware.schema import BYTES_PER_ELEMENT, GpuSpec, Precision

__all__ = [
    "LOW_PRECISION_GEMM",
    "RooflineKernels",
    "RooflineParams",
    "Work",
    "all_reduce_work",
    "context_attention_work",
    "dsa_indexer_work",
    "gemm_work",
    "generation_attention_work",
]

#: Weight precisions whose GEMMs quantise activations too (W8A8, W4A4): their input activations
#: move at the weight's width and they reach a smaller fraction of the (higher) peak.
LOW_PRECISION_GEMM: dict[str, float] = {"fp8": 1.0, "int8": 1.0, "fp4": 0.5}
_OUTPUT_BYTES = 2.0  # GEMM and attention outputs are written in bf16
_QUERY_BYTES = 2.0  # attention runs its queries and outputs in bf16 (FA3 bf16 kernels)
#: The DSA indexer scores in FP8 (DeepGEMM ``fp8_mqa_logits``, vLLM and SGLang): FP8 queries
#: and keys, one fp32 scale per 128-wide key and one fp32 weight per query head; fp32 scores.
_INDEX_DTYPE: Precision = "fp8"
_INDEX_SCALE_BYTES = 4.0
_INDEX_SCORE_BYTES = 4.0


@dataclass(frozen=True, slots=True)
class Work:
    """What one kernel call does: floating-point operations and bytes moved to/from HBM."""

    flops: float
    bytes: float


@dataclass(frozen=True, slots=True)
class RooflineParams:
    """Efficiency factors and fixed costs of the roofline (fractions of peak; seconds).

    Defaults come from the H100-SXM profiles (see module doc); the statistic is named per field.
    """

    #: Median achieved fraction of the bf16 peak over the bf16 GEMM rows with m, n, k ≥ 4096
    #: (0.79; p90 0.86).
    gemm_compute_efficiency: float = 0.80
    #: Same for fp8 (CUTLASS scaled-mm) rows against the fp8 peak: median 0.53, p90 0.67. Used for
    #: every precision in ``LOW_PRECISION_GEMM``.
    gemm_low_precision_compute_efficiency: float = 0.55
    #: Median fraction of HBM bandwidth of bf16 GEMMs with m ≤ 16 and n·k ≥ 4096² (weight-read
    #: bound): 0.80 (p90 0.89).
    gemm_memory_efficiency: float = 0.80
    #: Same for the fp8 (CUTLASS scaled-mm) rows: median 0.61 (p90 0.82). Used for every
    #: precision in ``LOW_PRECISION_GEMM``.
    gemm_low_precision_memory_efficiency: float = 0.60
    #: Smallest bf16 GEMM times in the profile (m ≤ 16, n, k ≤ 256): 2.5–2.6 µs.
    gemm_overhead_s: float = 2.5e-6
    #: Smallest fp8 GEMM times (they include the activation quantisation): 4.7–5.1 µs.
    gemm_low_precision_overhead_s: float = 5.0e-6
    #: Median fraction of the bf16 peak of FA3 prefill rows with isl ≥ 4096 and head_dim 128
    #: (0.58; p90 0.63).
    context_attention_compute_efficiency: float = 0.60
    #: Median HBM fraction of decode-attention rows that read ≥ 1 GB of KV (0.90; 0.70 for
    #: 0.1–1 GB, where the fixed cost below covers part of the gap).
    attention_memory_efficiency: float = 0.90
    #: Smallest prefill and decode attention times (batch 1, ≤ 16 tokens): 10–12 µs.
    attention_overhead_s: float = 10.0e-6
    #: All-reduce bus bandwidth as a fraction of the per-direction link bandwidth: least-squares
    #: fit (in log time) to the NCCL all_reduce rows with messages of 1–512 MiB on 2, 4 and
    #: 8 GPUs (0.64; mean error 22%: 1–4 MiB messages, where NCCL switches protocols, come out
    #: ~30% fast, 8-GPU messages ≥ 64 MiB ~30% slow — the measured bus bandwidth rises from
    #: 320 GB/s on 2 GPUs to 445 GB/s on 8, of 450).
    link_efficiency: float = 0.64
    #: Latency floor of an all-reduce, ``base + per_gpu · (n - 1)``: the NCCL rows with messages
    #: ≤ 8 KiB take 6.2 µs on 2, 9.5 µs on 4 and 15.5 µs on 8 H100s, which this line matches.
    all_reduce_floor_base_s: float = 4.65e-6
    all_reduce_floor_per_gpu_s: float = 1.55e-6
    #: Extra latency when the ring crosses nodes (RDMA NIC): an assumption, ~2 network hops.
    inter_node_latency_s: float = 20.0e-6
    #: Fraction of NIC bandwidth an inter-node all-reduce reaches: an assumption.
    nic_efficiency: float = 0.80

    def __post_init__(self) -> None:
        for name in self.__dataclass_fields__:
            value = getattr(self, name)
            if value < 0 or (name.endswith("efficiency") and not 0 < value <= 1):
                raise ValueError(f"RooflineParams.{name}={value} out of range")


# ----- work counts (pure functions of shapes) --------------------------------------------------
def gemm_work(m: int, n: int, k: int, dtype: str) -> Work:
    """``[m,k] x [k,n]``: 2mnk FLOPs; reads activations and weights, writes a bf16 result."""
    in_bytes = LOW_PRECISION_GEMM.get(dtype, _OUTPUT_BYTES)
    weight_bytes = BYTES_PER_ELEMENT.get(dtype, 2.0)
    return Work(
        flops=2.0 * m * n * k,
        bytes=m * k * in_bytes + k * n * weight_bytes + m * n * _OUTPUT_BYTES,
    )


def context_attention_work(  # noqa: PLR0917  (mirrors KernelTimer's positional signature)
    batch_size: int,
    new_tokens: int,
    cached_tokens: int,
    num_heads: int,
    num_kv_heads: int,
    head_dim: int,
    kv_dtype: str,
) -> Work:
    """Causal prefill: each new token attends to the cached prefix and to itself and earlier new
    tokens, ``new·cached + new(new+1)/2`` query-key pairs; 4·head_dim FLOPs per pair and head
    (QKᵀ and PV). Bytes: Q and O in bf16, the K and V of every attended token once."""
    pairs = new_tokens * cached_tokens + new_tokens * (new_tokens + 1) / 2
    kv_elements = (cached_tokens + new_tokens) * 2 * num_kv_heads * head_dim
    kv_bytes = kv_elements * BYTES_PER_ELEMENT[kv_dtype]
    qo_bytes = 2 * new_tokens * num_heads * head_dim * _QUERY_BYTES
    return Work(
        flops=4.0 * batch_size * num_heads * head_dim * pairs,
        bytes=batch_size * (kv_bytes + qo_bytes),
    )


def generation_attention_work(  # noqa: PLR0917  (mirrors KernelTimer's signature)
    batch_size: int,
    kv_len: int,
    num_heads: int,
    num_kv_heads: int,
    head_dim: int,
    kv_dtype: str,
) -> Work:
    """Decode: one query token per request reads ``kv_len`` tokens of K and V."""
    kv_bytes = kv_len * 2 * num_kv_heads * head_dim * BYTES_PER_ELEMENT[kv_dtype]
    qo_bytes = 2 * num_heads * head_dim * _QUERY_BYTES
    return Work(
        flops=4.0 * batch_size * num_heads * head_dim * kv_len,
        bytes=batch_size * (kv_bytes + qo_bytes),
    )


def dsa_indexer_work(queries: int, pairs: int, keys: int, num_heads: int, head_dim: int) -> Work:
    """DeepSeek Sparse Attention's lightning indexer over a batch: ``queries`` query tokens,
    ``pairs`` query-key pairs scored (every earlier token of each query's request), ``keys``
    cached indexer keys read (each request's, once). FLOPs: ``2 · heads · head_dim`` per pair
    (the FP8 dot products; the ReLU and the weighted sum over heads, ``3 · heads`` per pair, are
    left out). Bytes: the FP8 keys with their fp32 scales, the FP8 queries with one fp32 weight
    per head, and the fp32 score of every pair written once and read once by the top-k
    selection (its sorting work is not counted)."""
    key_bytes = keys * (head_dim * BYTES_PER_ELEMENT[_INDEX_DTYPE] + _INDEX_SCALE_BYTES)
    query_bytes = queries * num_heads * (head_dim * BYTES_PER_ELEMENT[_INDEX_DTYPE] + 4.0)
    return Work(
        flops=2.0 * num_heads * head_dim * pairs,
        bytes=key_bytes + query_bytes + 2.0 * _INDEX_SCORE_BYTES * pairs,
    )


def all_reduce_work(message_bytes: float, num_gpus: int) -> Work:
    """Ring all-reduce: each GPU sends and receives ``2(n-1)/n`` of the message; the FLOPs of
    the reduction are negligible and not counted."""
    if num_gpus <= 1:
        return Work(0.0, 0.0)
    return Work(0.0, 2.0 * (num_gpus - 1) / num_gpus * message_bytes)


# ----- the timer --------------------------------------------------------------------------------
class RooflineKernels:
    """``KernelTimer`` from a ``GpuSpec``'s peaks and ``RooflineParams``.

    Precision names are the catalog's ('bf16', 'fp8', ...). A GEMM precision the chip has no peak
    for (weight-only int4) computes at the bf16 peak. Inter-node all-reduces (``num_gpus`` beyond
    ``gpu.gpus_per_node``) run at the slower of NVLink and the node's NICs together, plus
    ``inter_node_latency_s`` (module doc).
    """

    __slots__ = ("_bf16_flops", "_gpu", "_hbm", "_link", "_nic", "_params", "_peak")

    def __init__(self, gpu: GpuSpec, params: RooflineParams | None = None) -> None:
        self._gpu = gpu
        self._params = params or RooflineParams()
        p = self._params
        self._bf16_flops = gpu.dense_tflops.get("bf16", gpu.dense_tflops.get("fp16", 0.0)) * 1e12
        if self._bf16_flops <= 0:
            raise ValueError(f"{gpu.name}: the roofline needs a bf16 or fp16 peak")
        self._peak: dict[str, float] = {}
        for dtype, tflops in gpu.dense_tflops.items():
            if gemm_compute_precision(dtype) != dtype:
                continue  # a weight-only precision computes at the 16-bit peak (WEIGHT_ONLY)
            eff = (
                p.gemm_low_precision_compute_efficiency
                if dtype in LOW_PRECISION_GEMM
                else p.gemm_compute_efficiency
            )
            self._peak[dtype] = tflops * 1e12 * eff
        self._hbm = gpu.hbm_tb_per_s * 1e12
        self._link = gpu.gpu_link_gb_per_s * 1e9 * p.link_efficiency
        # Every GPU's NIC carries its share of the ring's node crossings (module doc).
        self._nic = gpu.nic_gb_per_s * 1e9 * p.nic_efficiency * gpu.gpus_per_node

    @property
    def gpu(self) -> GpuSpec:
        """The GPU whose peaks are used."""
        return self._gpu

    @property
    def params(self) -> RooflineParams:
        """The efficiency factors and fixed costs."""
        return self._params

    def gemm(self, m: int, n: int, k: int, dtype: str) -> float:
        """Seconds of one GEMM (see ``gemm_work``)."""
        w = gemm_work(m, n, k, dtype)
        peak, mem_eff, overhead = self._gemm_rates(dtype)
        return max(w.flops / peak, w.bytes / (self._hbm * mem_eff)) + overhead

    def gemm_many(self, m: np.ndarray, n: np.ndarray, k: np.ndarray, dtype: str) -> np.ndarray:
        """``gemm`` of many shapes of one ``dtype`` (equal-length arrays of whole numbers) in
        one numpy pass, bit for bit the same seconds as ``gemm`` shape by shape: the same IEEE
        operations in the same order (a test holds the two equal)."""
        m, n, k = (np.trunc(np.asarray(a, dtype=float)) for a in (m, n, k))
        w = gemm_work(m, n, k, dtype)  # type: ignore[arg-type]  # numpy arrays, same formula
        peak, mem_eff, overhead = self._gemm_rates(dtype)
        seconds: np.ndarray = np.maximum(w.flops / peak, w.bytes / (self._hbm * mem_eff))
        return seconds + overhead

    def _gemm_rates(self, dtype: str) -> tuple[float, float, float]:
        """(peak FLOP/s, HBM efficiency, fixed seconds) of a GEMM in ``dtype``."""
        p = self._params
        peak = self._peak.get(dtype) or self._bf16_flops * p.gemm_compute_efficiency
        if dtype in LOW_PRECISION_GEMM:
            return peak, p.gemm_low_precision_memory_efficiency, p.gemm_low_precision_overhead_s
        return peak, p.gemm_memory_efficiency, p.gemm_overhead_s

    def context_attention(  # noqa: PLR0917  (KernelTimer's positional signature)
        self,
        batch_size: int,
        new_tokens: int,
        cached_tokens: int,
        num_heads: int,
        num_kv_heads: int,
        head_dim: int,
        kv_dtype: str,
    ) -> float:
        """Seconds of one prefill-attention call (see ``context_attention_work``)."""
        w = context_attention_work(
            batch_size, new_tokens, cached_tokens, num_heads, num_kv_heads, head_dim, kv_dtype
        )
        return self._attention_seconds(w)

    def generation_attention(  # noqa: PLR0917  (KernelTimer's positional signature)
        self,
        batch_size: int,
        kv_len: int,
        num_heads: int,
        num_kv_heads: int,
        head_dim: int,
        kv_dtype: str,
    ) -> float:
        """Seconds of one decode-attention call (see ``generation_attention_work``)."""
        w = generation_attention_work(
            batch_size, kv_len, num_heads, num_kv_heads, head_dim, kv_dtype
        )
        # Decode attention is memory-bound; the compute term only matters for huge head counts.
        return self._attention_seconds(w)

    def dsa_indexer(
        self, queries: int, pairs: int, keys: int, num_heads: int, head_dim: int
    ) -> float:
        """Seconds of one DSA indexer call (``dsa_indexer_work``): an attention-like kernel on
        FP8 tensor cores, so the attention terms with the FP8 peak (the bf16 one where the GPU
        has no FP8) at the prefill-attention efficiency, and the attention's fixed cost (the
        score kernel and the top-k kernel after it)."""
        w = dsa_indexer_work(queries, pairs, keys, num_heads, head_dim)
        p = self._params
        peak = self._gpu.dense_tflops.get(_INDEX_DTYPE, 0.0) * 1e12 or self._bf16_flops
        compute = w.flops / (peak * p.context_attention_compute_efficiency)
        memory = w.bytes / (self._hbm * p.attention_memory_efficiency)
        return max(compute, memory) + p.attention_overhead_s

    def _attention_seconds(self, w: Work) -> float:
        """Prefill and decode attention alike: bf16 tensor-core compute at the prefill
        efficiency, HBM traffic at the attention efficiency, plus the fixed attention cost."""
        p = self._params
        compute = w.flops / (self._bf16_flops * p.context_attention_compute_efficiency)
        memory = w.bytes / (self._hbm * p.attention_memory_efficiency)
        return max(compute, memory) + p.attention_overhead_s

    def all_reduce(self, message_bytes: float, num_gpus: int) -> float:
        """Seconds of one ring all-reduce; 0 on one GPU."""
        if num_gpus <= 1:
            return 0.0
        p = self._params
        within = min(num_gpus, self._gpu.gpus_per_node)  # the tree's chain inside one node
        floor = p.all_reduce_floor_base_s + p.all_reduce_floor_per_gpu_s * (within - 1)
        wire = all_reduce_work(message_bytes, num_gpus).bytes
        if num_gpus > self._gpu.gpus_per_node:
            return wire / min(self._nic, self._link) + floor + p.inter_node_latency_s
        return wire / self._link + floor
