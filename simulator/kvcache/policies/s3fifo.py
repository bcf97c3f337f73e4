"""S3-FIFO (Yang et al., SOSP 2023): a small FIFO, a main FIFO and a ghost FIFO.

New blocks enter the small queue S (target ``small_ratio`` of the capacity); a block leaving S
moves to the main queue M if it was hit while in S (``freq > 0``), else it leaves the cache and
its id enters the ghost queue G. A miss whose id is in G goes straight to M. M is a FIFO with
reinsertion: a block at its tail with ``freq > 0`` is reinserted at the head with ``freq - 1``.
Per-block frequency is capped at 3 and reset to 0 on promotion to M (it must earn its stay in
M afresh). One-hit wonders thus leave through S without disturbing M.

``evict`` loops until one block has actually left the cache (a promotion frees nothing).
Pinned blocks are skipped by reinsertion at the head of their own queue with their frequency
unchanged; when one queue holds only pinned blocks the other queue gives the victim.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Collection
from typing import Any

import numpy as np

from simulator.kvcache.policies._common import nothing_evictable
from simulator.kvcache.policies.base import EvictionPolicy

__all__ = ["S3Fifo"]

_FREQ_CAP = 3


class S3Fifo(EvictionPolicy):
    """S3-FIFO. Params: ``small_ratio`` (default 0.1): small-queue target as a fraction of the
    capacity (at least 1 block); the ghost queue remembers ``capacity - small`` ids (≥ 1).
    Honours pins."""

    name = "s3fifo"

    def __init__(
        self,
        capacity: int,
        *,
        rng: np.random.Generator,
        small_ratio: float = 0.1,
        **params: Any,
    ) -> None:
        super().__init__(capacity, rng=rng, **params)
        if not 0.0 < small_ratio < 1.0:
            raise ValueError(f"s3fifo: small_ratio must be in (0, 1), got {small_ratio}")
        self.small_target = max(1, int(small_ratio * capacity))
        self.ghost_capacity = max(1, capacity - self.small_target)
        # block -> freq, oldest (tail) first.
        self._small: OrderedDict[int, int] = OrderedDict()
        self._main: OrderedDict[int, int] = OrderedDict()
        self._ghost: OrderedDict[int, None] = OrderedDict()

    def __len__(self) -> int:
        return len(self._small) + len(self._main)

    def find(self, block: int) -> bool:
        return block in self._small or block in self._main

    def access(self, block: int, cost: float, next_access: int) -> None:
        del cost, next_access  # not used by this policy
        for queue in (self._small, self._main):
            freq = queue.get(block)
            if freq is not None:
                queue[block] = min(freq + 1, _FREQ_CAP)
                return
        if block in self._ghost:
            del self._ghost[block]
            self._main[block] = 0
        else:
            self._small[block] = 0

    def evict(self, pinned: Collection[int]) -> list[int]:
        # Consecutive pinned blocks met at each tail; reaching the queue length means the
        # queue holds nothing evictable right now.
        stuck_small = stuck_main = 0
        while True:
            small_ok = stuck_small < len(self._small)
            main_ok = stuck_main < len(self._main)
            if not (small_ok or main_ok):
                raise nothing_evictable(self.name)
            if small_ok and (len(self._small) >= self.small_target or not main_ok):
                block, freq = self._small.popitem(last=False)
                if block in pinned:
                    self._small[block] = freq
                    stuck_small += 1
                    continue
                stuck_small = 0
                if freq > 0:
                    self._main[block] = 0
                    stuck_main = 0  # main changed; its pinned count no longer holds
                    continue
                self._ghost[block] = None
                if len(self._ghost) > self.ghost_capacity:
                    self._ghost.popitem(last=False)
                return [block]
            block, freq = self._main.popitem(last=False)
            if block in pinned:
                self._main[block] = freq
                stuck_main += 1
                continue
            stuck_main = 0
            if freq > 0:
                self._main[block] = freq - 1
                continue
            return [block]

    def remove(self, block: int) -> None:
        self._small.pop(block, None)
        self._main.pop(block, None)
