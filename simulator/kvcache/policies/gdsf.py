"""Greedy-Dual-Size-Frequency (Cherkasova 1998) for unit-size KV blocks.

Every resident block carries a priority ``H = L + freq × cost / size`` fixed when it is last
accessed; eviction removes the lowest ``H`` and raises the inflation value ``L`` to it, so
blocks that have not been touched for a while age out relative to fresh ones. All blocks have
``size = 1``. ``gdsf`` uses ``cost = 1`` (then it is LFU with dynamic aging, LFU-DA);
``gdsf_compute`` uses the block's cost-model weight, so expensive-to-recompute blocks stay.
Frequencies are forgotten on eviction (no ghost history).
"""

from __future__ import annotations

from collections.abc import Collection, Container
from typing import Any, ClassVar

import numpy as np

from simulator.kvcache.policies._common import KeyedHeap, nothing_evictable
from simulator.kvcache.policies.base import EvictionPolicy

__all__ = ["Gdsf", "GdsfCompute"]


class Gdsf(EvictionPolicy):
    """GDSF with uniform cost: ``H = L + freq``; ties evict the least recently accessed.

    ``freq`` counts accesses since insertion (1 on insert). No parameters; honours pins (a
    pinned block is skipped and keeps its priority; ``L`` only ever rises to a victim's ``H``).
    """

    name = "gdsf"
    clock: ClassVar[str] = "priority"
    use_cost: ClassVar[bool] = False

    def __init__(self, capacity: int, *, rng: np.random.Generator, **params: Any) -> None:
        super().__init__(capacity, rng=rng, **params)
        self._heap = KeyedHeap()  # priority (H, access sequence number)
        self._freq: dict[int, int] = {}
        self._inflation = 0.0
        self._seq = 0

    def __len__(self) -> int:
        return len(self._freq)

    def find(self, block: int) -> bool:
        return block in self._freq

    def resident_view(self) -> Container[int]:
        return self._freq

    def access(self, block: int, cost: float, next_access: int) -> None:
        del next_access  # not used by this policy
        self._seq += 1
        freq = self._freq.get(block, 0) + 1
        self._freq[block] = freq
        weight = cost if self.use_cost else 1.0
        self._heap.set(block, (self._inflation + freq * weight, self._seq))

    def evict(self, pinned: Collection[int]) -> list[int]:
        return self.evict_n(1, pinned)

    def evict_n(self, n: int, pinned: Collection[int]) -> list[int]:
        popped = self._heap.pop_n(n, pinned)
        if not popped:
            if n > 0 and self._freq:
                raise nothing_evictable(self.name)
            return []
        for _, block in popped:
            del self._freq[block]
        # Popped in ascending H, so the last one is the largest: L never decreases.
        self._inflation = max(self._inflation, popped[-1][0][0])
        return [block for _, block in popped]

    def remove(self, block: int) -> None:
        if self._freq.pop(block, None) is not None:
            self._heap.discard(block)


class GdsfCompute(Gdsf):
    """GDSF with ``cost`` = the block's cost-model weight: ``H = L + freq × cost``."""

    name = "gdsf_compute"
    clock: ClassVar[str] = "priority"
    use_cost = True
