"""FIFO: evict the block that was inserted longest ago; hits change nothing.

State is one ``OrderedDict`` in insertion order (front = oldest). A block evicted and inserted
again counts as new. Inside one request, missing blocks are inserted in replay order
(deepest-first by default, so the root of a fresh request is the youngest of its blocks).
Pinned blocks met at the front are skipped and keep their place.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Collection, Container, Sequence
from typing import Any, ClassVar

import numpy as np

from simulator.kvcache.policies.base import EvictionPolicy
from simulator.kvcache.policies.lru import pop_oldest

__all__ = ["FIFO"]


class FIFO(EvictionPolicy):
    """First in, first out; ``find`` is a dict membership test (fast path in the serve loop)."""

    name: ClassVar[str] = "fifo"

    def __init__(self, capacity: int, *, rng: np.random.Generator, **params: Any) -> None:
        super().__init__(capacity, rng=rng, **params)
        self._queue: OrderedDict[int, None] = OrderedDict()

    def __len__(self) -> int:
        return len(self._queue)

    def find(self, block: int) -> bool:
        return block in self._queue

    def resident_view(self) -> Container[int] | None:
        return self._queue

    def access(self, block: int, cost: float, next_access: int) -> None:
        del cost, next_access  # not used by this policy
        if block not in self._queue:
            self._queue[block] = None

    def access_request(
        self,
        blocks: Sequence[int],
        costs: Sequence[float],
        next_access: Sequence[int] | None,
        deepest_first: bool,
    ) -> None:
        del costs, next_access  # not used by this policy
        # access() inlined: one method lookup per request instead of one call per block.
        queue = self._queue
        for block in reversed(blocks) if deepest_first else blocks:
            if block not in queue:
                queue[block] = None

    def evict(self, pinned: Collection[int]) -> list[int]:
        return self.evict_n(1, pinned)

    def evict_n(self, n: int, pinned: Collection[int]) -> list[int]:
        return pop_oldest(self._queue, n, pinned)

    def remove(self, block: int) -> None:
        self._queue.pop(block, None)
