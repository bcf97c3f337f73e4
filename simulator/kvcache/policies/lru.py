"""LRU: evict the block whose last access is oldest.

State is one ``OrderedDict`` in recency order (front = least recently used, back = most). Ties
cannot occur: every access moves its block to the back, so the order is total. Inside one
request the replay order decides the ranks: deepest-first leaves the root block at the back.

Pinned blocks met at the front during eviction are skipped and put back at the front in their
original order, so pinning never changes their recency rank.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Collection, Container, Sequence
from itertools import islice
from typing import Any, ClassVar

import numpy as np

from simulator.kvcache.policies.base import EvictionPolicy

__all__ = ["LRU", "pop_oldest"]


def pop_oldest(order: OrderedDict[int, Any], n: int, pinned: Collection[int]) -> list[int]:
    """Remove up to ``n`` unpinned keys from the front of ``order``; return them, oldest first.

    Pinned keys are passed over and keep their place and value. Shared by the queue-based
    policies. Fast path (no pinned key among the first ``n``): C-level slicing and deletion.
    """
    victims = list(islice(order, n))
    if pinned and any(map(pinned.__contains__, victims)):
        victims = list(islice((key for key in order if key not in pinned), n))
    deque(map(order.__delitem__, victims), maxlen=0)
    return victims


class LRU(EvictionPolicy):
    """Least recently used; ``find`` is a dict membership test (fast path in the serve loop)."""

    name: ClassVar[str] = "lru"

    def __init__(self, capacity: int, *, rng: np.random.Generator, **params: Any) -> None:
        super().__init__(capacity, rng=rng, **params)
        self._order: OrderedDict[int, None] = OrderedDict()

    def __len__(self) -> int:
        return len(self._order)

    def find(self, block: int) -> bool:
        return block in self._order

    def resident_view(self) -> Container[int] | None:
        return self._order

    def access(self, block: int, cost: float, next_access: int) -> None:
        del cost, next_access  # not used by this policy
        order = self._order
        if block in order:
            order.move_to_end(block)
        else:
            order[block] = None

    def access_request(
        self,
        blocks: Sequence[int],
        costs: Sequence[float],
        next_access: Sequence[int] | None,
        deepest_first: bool,
    ) -> None:
        del costs, next_access  # not used by this policy
        # access() inlined: one method lookup per request instead of one call per block.
        order = self._order
        move = order.move_to_end
        for block in reversed(blocks) if deepest_first else blocks:
            if block in order:
                move(block)
            else:
                order[block] = None

    def evict(self, pinned: Collection[int]) -> list[int]:
        return self.evict_n(1, pinned)

    def evict_n(self, n: int, pinned: Collection[int]) -> list[int]:
        return pop_oldest(self._order, n, pinned)

    def remove(self, block: int) -> None:
        self._order.pop(block, None)
