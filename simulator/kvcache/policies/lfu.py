"""LFU: evict the block with the fewest accesses since it entered the cache.

Counts are in-cache counts: a block enters with 1, every hit adds 1, eviction forgets it (no
ghost history, no ageing). Ties between equal counts go to the least recently accessed block
(insertion counts as an access), i.e. LRU within a frequency class.

State: ``block -> count`` plus one recency-ordered ``OrderedDict`` per distinct count, so an
access is O(1) and a batched eviction walks the counts in increasing order once. Pinned blocks
are skipped and keep their count and rank.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Collection, Iterable
from typing import Any, ClassVar

import numpy as np

from simulator.kvcache.policies._common import ResidentKeysPolicy, pop_oldest

__all__ = ["LFU"]


class LFU(ResidentKeysPolicy):
    """Least frequently used with LRU tie-break; ``find`` is a dict membership test."""

    name: ClassVar[str] = "lfu"

    def __init__(self, capacity: int, *, rng: np.random.Generator, **params: Any) -> None:
        super().__init__(capacity, rng=rng, **params)
        self._resident: dict[int, int] = {}  # block -> in-cache access count
        self._classes: dict[int, OrderedDict[int, None]] = {}  # count -> blocks, oldest first

    def access(self, block: int, cost: float, next_access: int) -> None:
        del cost, next_access  # not used by this policy
        count = self._resident.get(block, 0)
        classes = self._classes
        if count:
            members = classes[count]
            del members[block]
            if not members:
                del classes[count]
        count += 1
        self._resident[block] = count
        bucket = classes.get(count)
        if bucket is None:
            bucket = classes[count] = OrderedDict()
        bucket[block] = None

    def _replay(self, blocks: Iterable[int]) -> None:
        counts, classes = self._resident, self._classes
        for block in blocks:
            count = counts.get(block, 0)
            if count:
                members = classes[count]
                del members[block]
                if not members:
                    del classes[count]
            count += 1
            counts[block] = count
            bucket = classes.get(count)
            if bucket is None:
                bucket = classes[count] = OrderedDict()
            bucket[block] = None

    def evict_n(self, n: int, pinned: Collection[int]) -> list[int]:
        victims: list[int] = []
        classes, counts = self._classes, self._resident
        for count in sorted(classes):
            members = classes[count]
            taken = pop_oldest(members, n - len(victims), pinned)
            for block in taken:
                del counts[block]
            victims += taken
            if not members:
                del classes[count]
            if len(victims) >= n:
                break
        return victims

    def remove(self, block: int) -> None:
        count = self._resident.pop(block, 0)
        if count:
            members = self._classes[count]
            del members[block]
            if not members:
                del self._classes[count]
