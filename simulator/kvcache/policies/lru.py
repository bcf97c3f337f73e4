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

    def evict_n(self, n: int, pinned: Collection[int]) -> list[int]:
        return pop_oldest(self._resident, n, pinned)

    def remove(self, block: int) -> None:
        self._resident.pop(block, None)
