"""S3-FIFO-D: S3-FIFO whose small-queue target adapts to the workload (PrefixSim's ``s3fifod``).

Same queues and rules as ``s3fifo`` plus a second ghost FIFO for blocks evicted from the main
queue. A miss found in the small queue's ghost means the small queue let a block go too early:
its target grows by one block; a miss found in the main queue's ghost means the main queue is
too small: the small target shrinks by one (bounds: 1 .. capacity - 1). The returning block
goes to the main queue either way (it has proven reuse). Both ghosts hold up to
``capacity - small target`` ids as initialised. The adaptation is ARC's idea applied to
S3-FIFO's split; our reading of libCacheSim's S3FIFOd, whose ``evict()`` PrefixSim patched to
actually free space (ours does: every ``evict`` returns a block that left the cache).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Collection
from typing import Any

import numpy as np

from simulator.kvcache.policies.s3fifo import S3Fifo

__all__ = ["S3FifoD"]


class S3FifoD(S3Fifo):
    """Params: ``small_ratio`` (initial small target, default 0.1). Honours pins."""

    name = "s3fifod"

    def __init__(
        self, capacity: int, *, rng: np.random.Generator, small_ratio: float = 0.1, **params: Any
    ) -> None:
        super().__init__(capacity, rng=rng, small_ratio=small_ratio, **params)
        self._main_ghost: OrderedDict[int, None] = OrderedDict()

    def access(self, block: int, cost: float, next_access: int) -> None:
        if block in self._ghost and not self.find(block):
            self.small_target = min(self.small_target + 1, max(1, self.capacity - 1))
        elif block in self._main_ghost:
            del self._main_ghost[block]
            if not self.find(block):
                self.small_target = max(1, self.small_target - 1)
                self._main[block] = 0
                return
        super().access(block, cost, next_access)

    def evict(self, pinned: Collection[int]) -> list[int]:
        victims = super().evict(pinned)
        for block in victims:
            if block not in self._ghost:  # left from the main queue
                self._main_ghost[block] = None
                if len(self._main_ghost) > self.ghost_capacity:
                    self._main_ghost.popitem(last=False)
        return victims
