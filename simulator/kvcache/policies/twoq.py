"""2Q, full version (Johnson & Shasha, VLDB 1994): A1in FIFO, A1out ghost FIFO, Am LRU.

A block seen for the first time enters A1in (resident FIFO). Evicted from A1in it leaves its
id in A1out (no slot). A miss that finds its id in A1out has proven reuse and goes to Am
(resident LRU); hits in A1in change nothing (correlated references), hits in Am refresh
recency. ``evict`` reclaims from A1in while it holds more than ``Kin`` blocks, else from Am.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Collection
from typing import Any

import numpy as np

from simulator.kvcache.policies._common import first_unpinned, nothing_evictable
from simulator.kvcache.policies.base import EvictionPolicy

__all__ = ["TwoQ"]


class TwoQ(EvictionPolicy):
    """2Q with ``Kin = kin_ratio × capacity`` and ``Kout = kout_ratio × capacity``.

    Params: ``kin_ratio`` (default 0.25, the paper's recommendation) and ``kout_ratio``
    (default 0.5); both round down and are at least 1 block. Honours pins: a pinned candidate
    is skipped in place; when one queue has only pinned blocks the other one gives a victim.
    """

    name = "twoq"

    def __init__(
        self,
        capacity: int,
        *,
        rng: np.random.Generator,
        kin_ratio: float = 0.25,
        kout_ratio: float = 0.5,
        **params: Any,
    ) -> None:
        super().__init__(capacity, rng=rng, **params)
        if not (0.0 < kin_ratio < 1.0 and kout_ratio > 0.0):
            raise ValueError(
                f"twoq: need 0 < kin_ratio < 1 and kout_ratio > 0, got {kin_ratio}, {kout_ratio}"
            )
        self.kin = max(1, int(kin_ratio * capacity))
        self.kout = max(1, int(kout_ratio * capacity))
        # Oldest first in every queue.
        self._a1in: OrderedDict[int, None] = OrderedDict()
        self._a1out: OrderedDict[int, None] = OrderedDict()
        self._am: OrderedDict[int, None] = OrderedDict()

    def __len__(self) -> int:
        return len(self._a1in) + len(self._am)

    def find(self, block: int) -> bool:
        return block in self._a1in or block in self._am

    def access(self, block: int, cost: float, next_access: int) -> None:
        del cost, next_access  # not used by this policy
        if block in self._am:
            self._am.move_to_end(block)
        elif block in self._a1in:
            pass  # a second touch while still in A1in is a correlated reference
        elif block in self._a1out:
            del self._a1out[block]
            self._am[block] = None
        else:
            self._a1in[block] = None

    def evict(self, pinned: Collection[int]) -> list[int]:
        from_in = first_unpinned(self._a1in, pinned)
        from_am = first_unpinned(self._am, pinned)
        if from_in is not None and (len(self._a1in) > self.kin or from_am is None):
            del self._a1in[from_in]
            self._a1out[from_in] = None
            if len(self._a1out) > self.kout:
                self._a1out.popitem(last=False)
            return [from_in]
        if from_am is not None:
            del self._am[from_am]
            return [from_am]
        raise nothing_evictable(self.name)

    def remove(self, block: int) -> None:
        self._a1in.pop(block, None)
        self._am.pop(block, None)
