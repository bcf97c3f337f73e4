"""LRU: evict the block whose last access is oldest.

State is one ``OrderedDict`` in recency order (front = least recently used, back = most). Ties
cannot occur: every access moves its block to the back, so the order is total. Inside one
request the replay order decides the ranks: deepest-first leaves the root block at the back.

Pinned blocks met at the front during eviction are skipped and put back at the front in their
original order, so pinning never changes their recency rank.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Collection, Iterable
from typing import Any, ClassVar

import numpy as np

from simulator.kvcache.policies._common import ResidentKeysPolicy, pop_oldest

__all__ = ["LRU", "pop_oldest"]


class LRU(ResidentKeysPolicy):
    """Least recently used; ``find`` is a dict membership test (fast path in the serve loop)."""

    name: ClassVar[str] = "lru"

    def __init__(self, capacity: int, *, rng: np.random.Generator, **params: Any) -> None:
        super().__init__(capacity, rng=rng, **params)
        self._resident: OrderedDict[int, None] = OrderedDict()  # recency order, LRU first

    def access(self, block: int, cost: float, next_access: int) -> None:
        del cost, next_access  # not used by this policy
        order = self._resident
        if block in order:
            order.move_to_end(block)
        else:
            order[block] = None

    def _replay(self, blocks: Iterable[int]) -> None:
        order = self._resident
        move = order.move_to_end
        for block in blocks:
            if block in order:
                move(block)
            else:
                order[block] = None

    def resident_view(self) -> OrderedDict[int, None]:
        """The recency order itself (read-only for callers: ``in`` is ``find``, ``len`` the
        resident count, both C-level)."""
        return self._resident

    def evict_n(self, n: int, pinned: Collection[int]) -> list[int]:
        if not pinned:
            return self.evict_oldest(n)
        return pop_oldest(self._resident, n, pinned)

    def evict_oldest(self, n: int) -> list[int]:
        """``evict_n(n, ())``: the ``n`` least recently used blocks (all, when fewer reside),
        oldest first. One pass: each victim is popped from the front as it is taken (the
        engine's parking tiers, whose pinned blocks are outside the policy, evict this way)."""
        order = self._resident
        popitem = order.popitem
        return [popitem(False)[0] for _ in range(min(n, len(order)))]

    def insert_absent(self, blocks: Iterable[int]) -> None:
        """``access`` every block of ``blocks``, none of them resident and no two equal: each
        is added at the recent end, in order (no membership test per block)."""
        order = self._resident
        for block in blocks:
            order[block] = None

    def remove(self, block: int) -> None:
        self._resident.pop(block, None)
