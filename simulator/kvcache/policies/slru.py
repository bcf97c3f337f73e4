"""SLRU, segmented LRU (Karedla et al., 1994): a probationary and a protected LRU segment.

A missed block enters the probationary segment at its MRU end. A hit in the probationary segment
promotes the block to the protected segment's MRU end; a hit in the protected segment moves it to
that segment's MRU end. When the protected segment holds more than ``protected_ratio ×
capacity`` blocks (rounded down), its LRU block is demoted to the probationary MRU end.
Eviction takes the probationary LRU block, and the protected LRU block only when the
probationary segment has nothing unpinned left. Pinned blocks are skipped and keep their place.

The default ``protected_ratio=0.8`` is the split Caffeine/W-TinyLFU use for their main region.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Collection, Iterable
from typing import Any, ClassVar

import numpy as np

from simulator.kvcache.policies._common import ResidentKeysPolicy, pop_oldest

__all__ = ["SLRU"]


class SLRU(ResidentKeysPolicy):
    """Two-segment LRU; ``find`` is a dict membership test (fast path in the serve loop)."""

    name: ClassVar[str] = "slru"

    def __init__(
        self,
        capacity: int,
        *,
        rng: np.random.Generator,
        protected_ratio: float = 0.8,
        **params: Any,
    ) -> None:
        super().__init__(capacity, rng=rng, **params)
        if not 0.0 <= protected_ratio < 1.0:
            raise ValueError(f"slru: protected_ratio must be in [0, 1), got {protected_ratio}")
        self._protected_capacity = int(protected_ratio * capacity)
        self._probation: OrderedDict[int, None] = OrderedDict()
        self._protected: OrderedDict[int, None] = OrderedDict()
        self._resident: dict[int, None] = {}  # union of both segments, for O(1) find

    def access(self, block: int, cost: float, next_access: int) -> None:
        del cost, next_access  # not used by this policy
        protected = self._protected
        if block in protected:
            protected.move_to_end(block)
        elif block in self._probation:
            del self._probation[block]
            protected[block] = None
            if len(protected) > self._protected_capacity:
                demoted = protected.popitem(last=False)[0]
                self._probation[demoted] = None
        else:
            self._probation[block] = None
            self._resident[block] = None

    def _replay(self, blocks: Iterable[int]) -> None:
        probation, protected, resident = self._probation, self._protected, self._resident
        limit = self._protected_capacity
        for block in blocks:
            if block in protected:
                protected.move_to_end(block)
            elif block in probation:
                del probation[block]
                protected[block] = None
                if len(protected) > limit:
                    probation[protected.popitem(last=False)[0]] = None
            else:
                probation[block] = None
                resident[block] = None

    def evict_n(self, n: int, pinned: Collection[int]) -> list[int]:
        victims = pop_oldest(self._probation, n, pinned)
        if len(victims) < n:
            victims += pop_oldest(self._protected, n - len(victims), pinned)
        resident = self._resident
        for block in victims:
            del resident[block]
        return victims

    def remove(self, block: int) -> None:
        if block in self._resident:
            del self._resident[block]
            self._probation.pop(block, None)
            self._protected.pop(block, None)
