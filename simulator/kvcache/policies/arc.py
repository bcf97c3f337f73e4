"""ARC, the Adaptive Replacement Cache (Megiddo & Modha, FAST 2003), split into our verbs.

Resident lists T1 (seen once recently) and T2 (seen at least twice), ghost lists B1 and B2
(ids only, no slot), and the adaptive target ``p`` for |T1|. The paper's REPLACE runs inside a
miss; here it is ``evict`` (phase 2) and the miss handling is ``access`` (phase 3), so two
details differ from the paper, both documented rather than hidden:

* ``p`` adapts when a ghost hit is *accessed* (phase 3), i.e. one request after the paper
  would have adapted it during the same miss.
* REPLACE's tie rule "evict from T1 if |T1| == p and the missing page is in B2" has no missing
  page in ``evict``; we evict from T1 iff |T1| > p (or T2 has no unpinned block).

Ghosts never make ``find`` report a hit. Directory bounds: |T1| + |B1| ≤ c and
|T1| + |T2| + |B1| + |B2| ≤ 2c, restored after every insertion. Honours pins (a pinned LRU
block is skipped, not moved).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Collection
from typing import Any

import numpy as np

from simulator.kvcache.policies._common import first_unpinned, nothing_evictable
from simulator.kvcache.policies.base import EvictionPolicy

__all__ = ["Arc", "first_unpinned"]


class Arc(EvictionPolicy):
    """ARC with ghost lists B1/B2 and adaptive target ``p`` (starts at 0). No parameters."""

    name = "arc"

    def __init__(self, capacity: int, *, rng: np.random.Generator, **params: Any) -> None:
        super().__init__(capacity, rng=rng, **params)
        # Each OrderedDict runs LRU (first) -> MRU (last).
        self._t1: OrderedDict[int, None] = OrderedDict()
        self._t2: OrderedDict[int, None] = OrderedDict()
        self._b1: OrderedDict[int, None] = OrderedDict()
        self._b2: OrderedDict[int, None] = OrderedDict()
        self.p = 0.0
        """Target size of T1 in blocks, 0 ≤ p ≤ capacity (public for tests and diagnostics)."""

    def __len__(self) -> int:
        return len(self._t1) + len(self._t2)

    def find(self, block: int) -> bool:
        return block in self._t1 or block in self._t2

    def access(self, block: int, cost: float, next_access: int) -> None:
        del cost, next_access  # not used by this policy
        if block in self._t1:
            del self._t1[block]
            self._t2[block] = None
        elif block in self._t2:
            self._t2.move_to_end(block)
        elif block in self._b1:
            # Recency was undervalued: grow T1's target (δ1 = max(|B2|/|B1|, 1)).
            self.p = min(float(self.capacity), self.p + max(len(self._b2) / len(self._b1), 1.0))
            del self._b1[block]
            self._t2[block] = None
        elif block in self._b2:
            self.p = max(0.0, self.p - max(len(self._b1) / len(self._b2), 1.0))
            del self._b2[block]
            self._t2[block] = None
        else:
            self._t1[block] = None
            self._trim_ghosts()

    def _trim_ghosts(self) -> None:
        c = self.capacity
        while len(self._t1) + len(self._b1) > c and self._b1:
            self._b1.popitem(last=False)
        while len(self) + len(self._b1) + len(self._b2) > 2 * c:
            (self._b2 if self._b2 else self._b1).popitem(last=False)

    def evict(self, pinned: Collection[int]) -> list[int]:
        from_t1 = first_unpinned(self._t1, pinned)
        from_t2 = first_unpinned(self._t2, pinned)
        if from_t1 is not None and (len(self._t1) > self.p or from_t2 is None):
            del self._t1[from_t1]
            self._b1[from_t1] = None
            return [from_t1]
        if from_t2 is not None:
            del self._t2[from_t2]
            self._b2[from_t2] = None
            return [from_t2]
        raise nothing_evictable(self.name)

    def remove(self, block: int) -> None:
        self._t1.pop(block, None)
        self._t2.pop(block, None)
