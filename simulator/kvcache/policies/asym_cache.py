"""AsymCache: cost-weighted recency decaying in wall-clock time (PrefixSim's ``asym_cache``).

A block's value is the compute its reuse would save, discounted by how long ago (in seconds of
the trace) it was last used: ``value(b) = cost(b) × 2^(-(now - t(b)) / half_life)``, with
``cost`` the cost-model weight of its position and ``t`` the arrival time of the request that
last accessed it. Eviction removes the lowest value. Because the discount is exponential, the
ranking of two blocks does not depend on ``now``: ``value(a) < value(b)`` iff
``log2 cost(a) + t(a)/half_life < log2 cost(b) + t(b)/half_life``, a static key per block, so
eviction is a heap pop rather than a scan. Ties (same key) evict the older access first.

Under a uniform cost the key is the last-access time, ties broken by access order: exactly LRU
whenever timestamps do not decrease along the trace (tested). A position-dependent cost lets a
deep (expensive) block outlive a shallow one for ``half_life × log2(cost ratio)`` seconds —
the asymmetry the name refers to. ``half_life`` defaults to 180 s, the wall-clock lifespan
PrefixSim's notes report for FreeInference traces; the clock is ``RequestContext.timestamp_s``
(blocks accessed outside the serve loop use the last timestamp seen, 0 at first).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from simulator.kvcache.policies._common import KeyedHeapPolicy
from simulator.kvcache.policies.base import RequestContext

__all__ = ["AsymCache"]


class AsymCache(KeyedHeapPolicy):
    """Params: ``half_life`` (seconds, default 180). Honours pins (a pinned block keeps its key)."""

    name = "asym_cache"
    clock: ClassVar[str] = "wall seconds"

    def __init__(
        self, capacity: int, *, rng: np.random.Generator, half_life: float = 180.0, **params: Any
    ) -> None:
        super().__init__(capacity, rng=rng, **params)
        if not half_life > 0.0:
            raise ValueError(f"asym_cache: half_life must be > 0 seconds, got {half_life}")
        self.half_life = half_life
        # self._heap: (log2 cost + t / half_life, access sequence number)
        self._now = 0.0
        self._seq = 0

    def set_request_ctx(self, ctx: RequestContext) -> None:
        self._now = ctx.timestamp_s

    def key(self, block: int) -> float:
        """The static eviction key of a resident block (lower = evicted sooner)."""
        return self._heap.priority(block)[0]

    def access(self, block: int, cost: float, next_access: int) -> None:
        del next_access  # not an oracle
        self._seq += 1
        weight = math.log2(cost) if cost > 0 else -math.inf
        self._heap.set(block, (weight + self._now / self.half_life, self._seq))

    def access_request(
        self,
        blocks: Sequence[int],
        costs: Sequence[float],
        next_access: Sequence[int] | None,
        deepest_first: bool,
    ) -> None:
        del next_access
        order = range(len(blocks) - 1, -1, -1) if deepest_first else range(len(blocks))
        stamp, put, seq = self._now / self.half_life, self._heap.set, self._seq
        log2 = math.log2
        for i in order:
            seq += 1
            cost = costs[i]
            put(blocks[i], ((log2(cost) if cost > 0 else -math.inf) + stamp, seq))
        self._seq = seq
