"""``CachedKernels``: the memoising front shared by the table and calibrated kernel sources.

Both sources compute a primitive in pure Python (grid interpolation, a dot product of terms)
and are asked the same shapes millions of times by the engine, so each keeps one LRU cache per
primitive. This base owns those caches and the four public ``KernelTimer`` methods; a subclass
computes the primitives uncached and hands the four functions to ``__init__``. The uncached
attention functions take the head configuration as one ``Heads`` tuple (it is also how both
sources key their per-configuration state).

Not a kernel source itself (it times nothing), and not ``RooflineKernels``' business: the
roofline is a few arithmetic operations, cheaper than a cache lookup.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache

__all__ = ["CachedKernels", "Heads", "float_heads"]

#: Entries per primitive's cache (per instance).
_CACHE_SIZE = 1 << 16

#: An attention call's head configuration per GPU: (heads, KV heads, head dim, KV dtype).
Heads = tuple[int, int, int, str]

GemmFn = Callable[[int, int, int, str], float]
#: ``(batch_size, new_tokens, cached_tokens, heads) -> seconds``
ContextAttentionFn = Callable[[int, int, int, Heads], float]
#: ``(batch_size, kv_len, heads) -> seconds``
GenerationAttentionFn = Callable[[int, int, Heads], float]
AllReduceFn = Callable[[float, int], float]


def float_heads(heads: Heads) -> tuple[float, float, float, str]:
    """``heads`` with the sizes as floats (grid keys and float arithmetic take them so)."""
    num_heads, num_kv_heads, head_dim, kv_dtype = heads
    return float(num_heads), float(num_kv_heads), float(head_dim), kv_dtype


class CachedKernels:
    """``KernelTimer`` whose primitives answer from per-instance LRU caches (seconds, per GPU).

    ``__init__`` takes the uncached primitives (``KernelTimer``'s signatures, the attention ones
    with ``Heads`` in place of the four head arguments); results are cached per distinct call,
    ``cache_size`` entries per primitive. A subclass may call the cached primitives itself
    through ``_gemm``, ``_context``, ``_decode`` and ``_all_reduce`` (the table bounds prefill
    attention by the cached decode time).
    """

    def __init__(
        self,
        gemm: GemmFn,
        context_attention: ContextAttentionFn,
        generation_attention: GenerationAttentionFn,
        all_reduce: AllReduceFn,
        *,
        cache_size: int = _CACHE_SIZE,
    ) -> None:
        self._gemm = lru_cache(maxsize=cache_size)(gemm)
        self._context = lru_cache(maxsize=cache_size)(context_attention)
        self._decode = lru_cache(maxsize=cache_size)(generation_attention)
        self._all_reduce = lru_cache(maxsize=cache_size)(all_reduce)

    def gemm(self, m: int, n: int, k: int, dtype: str) -> float:
        """Seconds of ``[m, k] x [k, n]`` at weight precision ``dtype``."""
        return self._gemm(m, n, k, dtype)

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
        """Seconds of causal prefill attention (see ``KernelTimer``)."""
        heads = (num_heads, num_kv_heads, head_dim, kv_dtype)
        return self._context(batch_size, new_tokens, cached_tokens, heads)

    def generation_attention(  # noqa: PLR0917  (KernelTimer's positional signature)
        self,
        batch_size: int,
        kv_len: int,
        num_heads: int,
        num_kv_heads: int,
        head_dim: int,
        kv_dtype: str,
    ) -> float:
        """Seconds of decode attention (see ``KernelTimer``)."""
        return self._decode(batch_size, kv_len, (num_heads, num_kv_heads, head_dim, kv_dtype))

    def all_reduce(self, message_bytes: float, num_gpus: int) -> float:
        """Seconds of an all-reduce of ``message_bytes`` over ``num_gpus`` GPUs."""
        return self._all_reduce(message_bytes, num_gpus)
