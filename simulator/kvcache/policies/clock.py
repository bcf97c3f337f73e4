"""CLOCK (second chance): FIFO order plus a small reference counter per block.

A new block enters at the back with its counter at 0 (as libCacheSim's Clock); a hit raises the
counter by one, up to ``2**bits - 1`` (``bits=1``: the classic reference bit). Eviction looks at
the front (the clock hand): a block with a non-zero counter is decremented and moved to the back
(its second chance), the first block found at 0 is the victim. Hits never move blocks.

Pinned blocks at the hand are passed over without touching their counters and keep their place.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Collection, Iterable
from typing import Any, ClassVar

import numpy as np

from simulator.kvcache.policies._common import ResidentKeysPolicy

__all__ = ["Clock"]


class Clock(ResidentKeysPolicy):
    """CLOCK with an n-bit counter (``bits``, default 1); ``find`` is a dict membership test."""

    name: ClassVar[str] = "clock"

    def __init__(
        self, capacity: int, *, rng: np.random.Generator, bits: int = 1, **params: Any
    ) -> None:
        super().__init__(capacity, rng=rng, **params)
        if not 1 <= bits <= 8:
            raise ValueError(f"clock: bits must be between 1 and 8, got {bits}")
        self._max_count = (1 << bits) - 1
        # Front = the hand; value = reference counter.
        self._resident: OrderedDict[int, int] = OrderedDict()

    def access(self, block: int, cost: float, next_access: int) -> None:
        del cost, next_access  # not used by this policy
        ring = self._resident
        count = ring.get(block)
        if count is None:
            ring[block] = 0
        elif count < self._max_count:
            ring[block] = count + 1

    def _replay(self, blocks: Iterable[int]) -> None:
        ring, top = self._resident, self._max_count
        get = ring.get
        for block in blocks:
            count = get(block)
            if count is None:
                ring[block] = 0
            elif count < top:
                ring[block] = count + 1

    def evict_n(self, n: int, pinned: Collection[int]) -> list[int]:
        ring = self._resident
        popitem = ring.popitem
        victims: list[int] = []
        passed: list[tuple[int, int]] = []
        while len(victims) < n and ring:
            block, count = popitem(last=False)
            if block in pinned:
                passed.append((block, count))
            elif count:
                ring[block] = count - 1  # second chance: to the back, one step colder
            else:
                victims.append(block)
        for block, count in reversed(passed):
            ring[block] = count
            ring.move_to_end(block, last=False)
        return victims

    def remove(self, block: int) -> None:
        self._resident.pop(block, None)
