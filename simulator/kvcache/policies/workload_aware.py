"""Workload-aware eviction (KVCache Cache in the Wild, ATC'25, arXiv:2506.02634, §4.2 idea).

The paper observes that reuse behaviour differs by request category (request type × turn)
and ranks KV blocks by a per-category reuse probability. This policy estimates that
probability online, per ``RequestContext.category``, and evicts from the category with the
lowest estimate; within a category (and across categories with equal estimates) the least
recently accessed block goes first. One category (e.g. a trace without type/turn fields,
``category = 0`` everywhere) makes this exactly LRU.

Estimator. Every access of a block under category ``k`` opens a *trial* for ``k``
(``trials[k] += 1``); the block's next access, whenever it comes, closes that trial as a
*reuse* of ``k`` (``reuses[k] += 1``). A block keeps the category of its latest access; after
eviction its category is remembered in a ghost FIFO of ``capacity`` ids, so a reuse that
arrives after eviction still counts (otherwise categories this policy evicts would look
reuse-free and be evicted ever more eagerly). The estimate is the Laplace rule

    p[k] = (reuses[k] + 1) / (trials[k] + 2)

Open trials count as "not yet reused", which biases every category's estimate down by about
the same amount. Counts are halved every ``aging_period`` accesses so the estimate follows
drift. Cost-model weights are not used (the paper's signal is the reuse probability).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Collection, Container
from typing import Any, ClassVar

import numpy as np

from simulator.kvcache.policies._common import first_unpinned, nothing_evictable
from simulator.kvcache.policies.base import EvictionPolicy, RequestContext

__all__ = ["WorkloadAware"]


class WorkloadAware(EvictionPolicy):
    """Params: ``aging_period`` (accesses between halvings of the counts; default
    ``16 × capacity``). Honours pins. Eviction costs O(categories) per victim."""

    name = "workload_aware"
    clock: ClassVar[str] = "block accesses"

    def __init__(
        self,
        capacity: int,
        *,
        rng: np.random.Generator,
        aging_period: int | None = None,
        **params: Any,
    ) -> None:
        super().__init__(capacity, rng=rng, **params)
        self.aging_period = aging_period if aging_period is not None else 16 * capacity
        if self.aging_period < 1:
            raise ValueError(f"workload_aware: aging_period must be ≥ 1, got {aging_period}")
        self._lru: dict[int, OrderedDict[int, None]] = {}  # category -> blocks, LRU first
        self._category_of: dict[int, int] = {}  # resident block -> category of last access
        self._seq: dict[int, int] = {}  # resident block -> access tick of last access
        self._ghost: OrderedDict[int, int] = OrderedDict()  # evicted block -> category
        self._trials: dict[int, float] = {}
        self._reuses: dict[int, float] = {}
        self._category = 0
        self._clock = 0

    def __len__(self) -> int:
        return len(self._category_of)

    def find(self, block: int) -> bool:
        return block in self._category_of

    def resident_view(self) -> Container[int]:
        return self._category_of

    def set_request_ctx(self, ctx: RequestContext) -> None:
        self._category = ctx.category

    def reuse_probability(self, category: int) -> float:
        """Current estimate ``p[category]`` (0.5 for a category never seen)."""
        return (self._reuses.get(category, 0.0) + 1.0) / (self._trials.get(category, 0.0) + 2.0)

    def access(self, block: int, cost: float, next_access: int) -> None:
        del cost, next_access  # not used by this policy (see the module doc)
        self._clock += 1
        previous = self._category_of.get(block)
        if previous is not None:
            self.remove(block)
        else:
            previous = self._ghost.pop(block, None)
        if previous is not None:
            self._reuses[previous] = self._reuses.get(previous, 0.0) + 1.0
        category = self._category
        self._trials[category] = self._trials.get(category, 0.0) + 1.0
        self._category_of[block] = category
        self._seq[block] = self._clock
        self._lru.setdefault(category, OrderedDict())[block] = None
        if self._clock % self.aging_period == 0:
            self._trials = {k: v / 2 for k, v in self._trials.items()}
            self._reuses = {k: v / 2 for k, v in self._reuses.items()}

    def evict(self, pinned: Collection[int]) -> list[int]:
        best: tuple[float, int] | None = None
        victim = -1
        for category, blocks in self._lru.items():
            head = first_unpinned(blocks, pinned)
            if head is None:
                continue
            key = (self.reuse_probability(category), self._seq[head])
            if best is None or key < best:
                best, victim = key, head
        if best is None:
            raise nothing_evictable(self.name)
        category = self._category_of[victim]
        self.remove(victim)
        self._ghost[victim] = category
        if len(self._ghost) > self.capacity:
            self._ghost.popitem(last=False)
        return [victim]

    def remove(self, block: int) -> None:
        category = self._category_of.pop(block, None)
        if category is None:
            return
        blocks = self._lru[category]
        del blocks[block]
        if not blocks:
            del self._lru[category]
        del self._seq[block]
