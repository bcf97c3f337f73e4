"""MLA attention priced from measured MLA kernels, behind the generic attention protocol.

``compose.OperatorPlanner`` describes MLA attention in the generic ``KernelTimer`` terms (a
prefill as multi-head attention on decompressed K/V; a decode as multi-query attention over the
latent, passed as twice the heads over half its width). ``MeasuredMla`` takes those calls and
answers them from the kernel source's measured MLA tables (``mla_table.MlaTimer``) where it has
the point — the same heads per GPU and KV dtype — and from the generic answer where it does not:

- inside the measured range, a prefill without a cached prefix and every decode are the table's
  value;
- outside it (a batch or length beyond the grid), and for a prefill chunk over a cached prefix
  (the tables measure none), the table's value at the nearest measured point times the generic
  answer's growth from there to the query (``generic(query) / generic(anchor)``), as the
  fused-MoE table is carried beyond its tokens (``model.py``).

On a GPU other than the profiled one (a catalog stand-in, ``kernel_profiles_from``) the
table's values are first carried over by one ratio per phase, the two GPUs' rooflines of a
long generic call of that phase (``CARRY_AT``; ``MlaTimer.carry``): a prefill core is
compute-bound and a decode core bandwidth-bound across the tables' range, and one factor per
phase keeps the tables' monotone order.

Only models with the measured latent shape get here (``mla_table.measured_mla_shape``).
"""

from __future__ import annotations

from simulator.latency.kernels import KernelTimer
from simulator.latency.mla_table import MlaTimer

__all__ = ["CARRY_AT", "MeasuredMla"]

#: The generic calls whose roofline ratio carries each phase's table to another GPU:
#: ``(batch, new tokens, cached)`` for a prefill, ``(batch, KV length)`` for a decode.
CARRY_AT: dict[str, tuple[int, ...]] = {"context": (1, 8192, 0), "generation": (64, 8192)}


class MeasuredMla:
    """``context_attention`` / ``generation_attention`` for MLA from measured tables.

    Args:
        tables: the measured MLA source (``table.ProfileKernels``).
        generic: the generic attention timer the planner's calls were written for (the same
            source: its generic tables, carried over by FLOPs and bytes).
        kv_precision: the deployment's KV-cache precision (the latent's storage), which the
            context table is keyed by (the generic prefill call always says 16-bit K/V).
    """

    def __init__(self, tables: MlaTimer, generic: KernelTimer, kv_precision: str) -> None:
        self._tables = tables
        self._generic = generic
        self._kv = kv_precision
        self._ratio: dict[str, float] = {}

    def _carried(self, phase: str, seconds: float, args: tuple[object, ...]) -> float:
        """``seconds`` measured on the profiled GPU, on the GPU modelled (module doc)."""
        ratio = self._ratio.get(phase)
        if ratio is None:
            kind = f"{phase}_attention"
            ratio = self._ratio[phase] = self._tables.carry(kind, *CARRY_AT[phase], *args)
        return seconds * ratio

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
        """One layer's MLA prefill core for ``batch_size`` prompts (``num_heads`` per GPU)."""
        generic = self._generic.context_attention
        args = (num_heads, num_kv_heads, head_dim, kv_dtype)
        hit = self._tables.mla_attention("context", batch_size, new_tokens, num_heads, self._kv)
        if hit is None:
            return generic(batch_size, new_tokens, cached_tokens, *args)
        seconds, (batch, new) = hit
        seconds = self._carried("context", seconds, args)
        if (batch, new) == (batch_size, new_tokens) and cached_tokens == 0:
            return seconds
        at_anchor = generic(batch, new, 0, *args)
        at_query = generic(batch_size, new_tokens, cached_tokens, *args)
        return seconds * at_query / at_anchor if at_anchor > 0 else at_query

    def generation_attention(  # noqa: PLR0917  (KernelTimer's positional signature)
        self,
        batch_size: int,
        kv_len: int,
        num_heads: int,
        num_kv_heads: int,
        head_dim: int,
        kv_dtype: str,
    ) -> float:
        """One layer's MLA decode core for ``batch_size`` requests reading ``kv_len`` tokens;
        ``num_heads`` is the planner's doubled head count (``compose.decode_args``)."""
        generic = self._generic.generation_attention
        args = (num_heads, num_kv_heads, head_dim, kv_dtype)
        heads = num_heads // 2
        hit = self._tables.mla_attention("generation", batch_size, kv_len, heads, kv_dtype)
        if hit is None:
            return generic(batch_size, kv_len, *args)
        seconds, (batch, length) = hit
        seconds = self._carried("generation", seconds, args)
        if (batch, length) == (batch_size, kv_len):
            return seconds
        at_anchor = generic(batch, length, *args)
        at_query = generic(batch_size, kv_len, *args)
        return seconds * at_query / at_anchor if at_anchor > 0 else at_query
