"""FIFO: evict the block that was inserted longest ago; hits change nothing.

State is one ``OrderedDict`` in insertion order (front = oldest). A block evicted and inserted
again counts as new. Inside one request, missing blocks are inserted in replay order
(deepest-first by default, so the root of a fresh request is the youngest of its blocks).
Pinned blocks met at the front are skipped and keep their place.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Collection, Iterable
from typing import Any, ClassVar

import numpy as np

from simulator.kvcache.policies._common import ResidentKeysPolicy, pop_oldest

__all__ = ["FIFO"]


class FIFO(ResidentKeysPolicy):
    """First in, first out; ``find`` is a dict membership test (fast path in the serve loop)."""

    name: ClassVar[str] = "fifo"

    def __init__(self, capacity: int, *, rng: np.random.Generator, **params: Any) -> None:
        super().__init__(capacity, rng=rng, **params)
        self._resident: OrderedDict[int, None] = OrderedDict()  # insertion order, oldest first

    def access(self, block: int, cost: float, next_access: int) -> None:
        del cost, next_access  # not used by this policy
        if block not in self._resident:
            self._resident[block] = None

    def _replay(self, blocks: Iterable[int]) -> None:
        queue = self._resident
        for block in blocks:
            if block not in queue:
                queue[block] = None

    def evict_n(self, n: int, pinned: Collection[int]) -> list[int]:
        return pop_oldest(self._resident, n, pinned)

    def remove(self, block: int) -> None:
        self._resident.pop(block, None)
