"""The kernel-timing protocol: the seam between operator composition and kernel cost sources.

A step's time is composed (``simulator/latency/compose.py``) from per-layer operators, each a
call of one of the four kernel primitives below. Three sources implement them:

- ``RooflineKernels`` (``roofline.py``): max(compute, memory) against the GPU's peaks, with
  documented efficiency factors and fixed per-kernel overheads;
- ``ProfileKernels`` (``table.py``): interpolation over measured kernel profiles, falling back to
  the roofline (scaled to agree at the table's edge) outside the measured range;
- ``ScaledKernels`` (``calibrated.py``): the roofline with per-class scale factors fitted by least
  squares to measurements.

All sizes are per GPU (already divided by tensor parallelism); all times are seconds. The
primitives mirror what the shipped H100 profiles measure, so a table lookup and a roofline
estimate answer exactly the same question.
"""

from __future__ import annotations

from typing import Literal, Protocol, runtime_checkable

__all__ = ["KERNEL_CLASSES", "IndexerTimer", "KernelClass", "KernelTimer"]

KernelClass = Literal["gemm", "context_attention", "generation_attention", "nccl"]
#: The kernel classes, in the order calibration files and accuracy reports list them.
KERNEL_CLASSES: tuple[KernelClass, ...] = (
    "gemm",
    "context_attention",
    "generation_attention",
    "nccl",
)


class KernelTimer(Protocol):
    """Seconds for one call of each kernel primitive on one GPU."""

    def gemm(self, m: int, n: int, k: int, dtype: str) -> float:
        """``[m, k] x [k, n]`` matrix multiply; ``m`` = tokens, ``dtype`` = weight precision
        ('bf16', 'fp8', 'fp4', ...), activations at the same or wider precision."""
        ...

    def context_attention(  # noqa: PLR0917  (mirrors the profile table's columns)
        self,
        batch_size: int,
        new_tokens: int,
        cached_tokens: int,
        num_heads: int,
        num_kv_heads: int,
        head_dim: int,
        kv_dtype: str,
    ) -> float:
        """Causal prefill attention for ``batch_size`` requests of identical shape, each with
        ``new_tokens`` query tokens attending over ``cached_tokens`` + themselves; heads per GPU."""
        ...

    def generation_attention(  # noqa: PLR0917  (mirrors the profile table's columns)
        self,
        batch_size: int,
        kv_len: int,
        num_heads: int,
        num_kv_heads: int,
        head_dim: int,
        kv_dtype: str,
    ) -> float:
        """Decode attention: ``batch_size`` requests, one query token each, reading ``kv_len``
        cached tokens each; heads per GPU."""
        ...

    def all_reduce(self, message_bytes: float, num_gpus: int) -> float:
        """NCCL all-reduce of ``message_bytes`` across ``num_gpus`` GPUs (0 if ``num_gpus`` = 1)."""
        ...


@runtime_checkable
class IndexerTimer(Protocol):
    """A kernel source that times DeepSeek Sparse Attention's lightning indexer (the roofline:
    ``RooflineKernels.dsa_indexer``). No measured profile has one; the composition prices the
    indexer with the deployment GPU's roofline when its kernel source is not one of these."""

    def dsa_indexer(
        self, queries: int, pairs: int, keys: int, num_heads: int, head_dim: int
    ) -> float:
        """Seconds of one indexer call: ``queries`` query tokens scoring ``pairs`` query-key
        pairs over ``keys`` cached indexer keys, ``num_heads`` heads of ``head_dim``."""
        ...
