"""Oracle policies that read the future: Belady's MIN and a cost-aware variant.

Both need next-access annotations (``needs_next_access = True``): the serve loop passes, with
every access, the 1-based forward virtual time of the block's next access (``NEVER`` if none).
They are bounds to compare online policies against, not deployable policies.

``KeyedHeap`` (a min-heap of items with replaceable priorities and lazy deletion; in
``_common``, exported here too) orders Belady's blocks; the GDSF and session policies reuse it.
"""

from __future__ import annotations

import heapq
from collections.abc import Collection, Container, Sequence
from typing import Any, ClassVar

import numpy as np

from simulator.kvcache.policies._common import KeyedHeap, KeyedHeapPolicy, nothing_evictable
from simulator.kvcache.policies.base import NEVER, EvictionPolicy

__all__ = ["Belady", "BeladyCompute", "KeyedHeap"]


class Belady(KeyedHeapPolicy):
    """Belady's MIN: evict the resident block whose next access is furthest in the future.

    Optimal miss count for unit-size blocks under demand paging (one block per request); with
    multi-block requests it is the natural oracle, not a proven optimum. Ties (equal next
    access, typically several ``NEVER`` blocks) go to the larger block id first: prefix-interned
    ids grow with depth, so a tie drops the deeper block and keeps shared roots.
    No parameters. Honours pins.
    """

    name = "belady"
    clock: ClassVar[str] = "future"
    needs_next_access = True

    def access(self, block: int, cost: float, next_access: int) -> None:
        del cost  # not used by this policy
        # Min-heap on (-next_access, -block): furthest next access, then largest id, first.
        self._heap.set(block, (-next_access, -block))


class BeladyCompute(EvictionPolicy):
    """Cost-aware oracle: evict the block that saves the least cost per slot-time held.

    Rule: with ``now`` the forward virtual time of the current request's first block, a
    resident block ``b`` with cost-model weight ``c_b`` and next access ``n_b`` is worth
    ``c_b / max(n_b - now, 1)`` (cost saved by keeping it, per block-access of cache time it
    occupies until then). Evict the lowest worth; ties by furthest next access, then by larger
    block id. With a uniform cost this is exactly ``belady``; ``NEVER`` blocks are worth ~0
    and go first, cheapest first.

    ``now`` is tracked, not given: the previous request's first vtime plus its length. Skipped
    requests are numbered by the annotation but never reach the policy, so ``record_request``
    re-synchronises: a resident block first seen at position ``i`` of the request, whose
    stored next access is ``s``, proves ``now ≥ s - i`` (equality when ``s`` points at this
    very occurrence). ``now`` is therefore exact after any request with a hit, and only a
    request following skipped ones may see distances overestimated by the skipped length.

    Worth changes with ``now``, so one heap cannot hold it; blocks are bucketed by cost (within
    a bucket worth order is next-access order) and each eviction compares the bucket heads:
    O(distinct costs) per ``evict_n`` call, not per resident block. No parameters; honours pins.
    """

    name = "belady_compute"
    clock: ClassVar[str] = "future"
    needs_next_access = True

    def __init__(self, capacity: int, *, rng: np.random.Generator, **params: Any) -> None:
        super().__init__(capacity, rng=rng, **params)
        self._buckets: dict[float, KeyedHeap] = {}
        self._cost: dict[int, float] = {}
        self._next: dict[int, int] = {}
        self._base = 1  # forward vtime of the current request's first block
        self._count = 0  # accesses since ``_base`` was set

    def __len__(self) -> int:
        return len(self._cost)

    def find(self, block: int) -> bool:
        return block in self._cost

    def resident_view(self) -> Container[int]:
        return self._cost

    def record_request(self, blocks: Sequence[int]) -> None:
        base = self._base + self._count
        for i, block in enumerate(blocks):
            stored = self._next.get(block)
            if stored is not None and stored != NEVER and stored - i > base:
                base = stored - i
        self._base, self._count = base, 0

    def access(self, block: int, cost: float, next_access: int) -> None:
        self._count += 1
        old = self._cost.get(block)
        if old is not None and old != cost:
            self._drop_from_bucket(block, old)
        self._cost[block] = cost
        self._next[block] = next_access
        self._buckets.setdefault(cost, KeyedHeap()).set(block, (-next_access, -block))

    def evict(self, pinned: Collection[int]) -> list[int]:
        return self.evict_n(1, pinned)

    def evict_n(self, n: int, pinned: Collection[int]) -> list[int]:
        now = self._base + self._count
        heads: list[tuple[float, int, int, float]] = []  # (worth, -next, -block, cost)
        for cost, bucket in self._buckets.items():
            self._push_head(heads, cost, bucket, pinned, now)
        victims: list[int] = []
        while len(victims) < n and heads:
            _, _, neg_block, cost = heapq.heappop(heads)
            block = -neg_block
            bucket = self._buckets[cost]
            bucket.discard(block)
            del self._cost[block], self._next[block]
            victims.append(block)
            self._push_head(heads, cost, bucket, pinned, now)
        if not victims and n > 0 and self._cost:
            raise nothing_evictable(self.name)
        for cost in [c for c, b in self._buckets.items() if not b]:
            del self._buckets[cost]
        return victims

    @staticmethod
    def _push_head(
        heads: list[tuple[float, int, int, float]],
        cost: float,
        bucket: KeyedHeap,
        pinned: Collection[int],
        now: int,
    ) -> None:
        top = bucket.peek(pinned)
        if top is None:
            return
        (neg_next, neg_block), _ = top
        distance = max(-int(neg_next) - now, 1)
        heapq.heappush(heads, (cost / distance, int(neg_next), int(neg_block), cost))

    def _drop_from_bucket(self, block: int, cost: float) -> None:
        bucket = self._buckets[cost]
        bucket.discard(block)
        if not bucket:
            del self._buckets[cost]

    def remove(self, block: int) -> None:
        cost = self._cost.pop(block, None)
        if cost is not None:
            del self._next[block]
            self._drop_from_bucket(block, cost)
