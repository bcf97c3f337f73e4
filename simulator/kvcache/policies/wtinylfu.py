"""W-TinyLFU (Einziger, Friedman & Manes, TOS 2017; Caffeine's layout) for a prefix cache.

Layout: a small LRU *window* (``window_ratio`` of the capacity) in front of a segmented-LRU
*main* cache (probation + protected, ``protected_ratio`` of main), and a count-min sketch that
estimates how often each block was accessed recently.

Admission in a prefix cache must never refuse a block of the request being served: the block
is needed in memory whatever the policy thinks of it. So the TinyLFU duel moves to
``evict_n(n)``: the ``n`` incoming blocks will push the window over its target, and each window
block they push out (oldest first, the *candidate*) duels the main cache's victim (probation
LRU, else protected LRU). If the candidate's estimated frequency is strictly higher, the main
victim is evicted and the candidate moves to probation; otherwise the candidate itself is
evicted *instead of* the main victim. New blocks always enter the window in ``access``; while
main holds fewer than its target, window overflow moves to probation there without a duel
(the cache is not full yet, nothing has to lose). The window size is fixed (no hill climber).

Sketch: ``depth`` rows of 4-bit saturating counters (max 15), width the next power of two
≥ capacity, multiplicative hashing with fixed odd constants (deterministic). An exact
*doorkeeper* set absorbs each block's first access since the last reset; the estimate is
``min over rows + (1 if in doorkeeper)``. Aging: after ``sample_factor × capacity`` recorded
accesses every counter and the access count are halved and the doorkeeper is cleared.
Only ``access`` touches the sketch; ``find`` and ``evict`` read it.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Collection
from typing import Any

import numpy as np

from simulator.kvcache.policies._common import first_unpinned, nothing_evictable
from simulator.kvcache.policies.base import EvictionPolicy

__all__ = ["CountMinSketch", "WTinyLfu"]

_MASK64 = (1 << 64) - 1
# Odd 64-bit multipliers (golden-ratio and SplitMix64 constants), one per sketch row.
_ROW_MULTIPLIERS = (
    0x9E3779B97F4A7C15,
    0xBF58476D1CE4E5B9,
    0x94D049BB133111EB,
    0xD6E8FEB86659FD93,
    0xA0761D6478BD642F,
    0xE7037ED1A0B428DB,
    0x8EBC6AF09C88C6E3,
    0x589965CC75374CC3,
)
_COUNTER_MAX = 15


class CountMinSketch:
    """Count-min frequency sketch with 4-bit counters, a doorkeeper and periodic halving."""

    __slots__ = ("_additions", "_doorkeeper", "_rows", "_shift", "period", "use_doorkeeper")

    def __init__(self, width_hint: int, depth: int, period: int, *, doorkeeper: bool) -> None:
        if not 1 <= depth <= len(_ROW_MULTIPLIERS):
            raise ValueError(f"sketch depth must be in 1..{len(_ROW_MULTIPLIERS)}, got {depth}")
        bits = max(4, (max(width_hint, 1) - 1).bit_length())
        self._shift = 64 - bits
        self._rows = [[0] * (1 << bits) for _ in range(depth)]
        self._doorkeeper: set[int] = set()
        self._additions = 0
        self.period = max(1, period)
        self.use_doorkeeper = doorkeeper

    def _slots(self, key: int) -> list[int]:
        h = (key + 1) & _MASK64
        return [((h * m) & _MASK64) >> self._shift for m in _ROW_MULTIPLIERS[: len(self._rows)]]

    def estimate(self, key: int) -> int:
        """Estimated recent access count of ``key`` (never below the true count since reset)."""
        base = min(row[i] for row, i in zip(self._rows, self._slots(key), strict=True))
        return base + (1 if key in self._doorkeeper else 0)

    def record(self, key: int) -> None:
        """Count one access of ``key``; halve everything every ``period`` accesses."""
        if self.use_doorkeeper and key not in self._doorkeeper:
            self._doorkeeper.add(key)
        else:
            for row, i in zip(self._rows, self._slots(key), strict=True):
                if row[i] < _COUNTER_MAX:
                    row[i] += 1
        self._additions += 1
        if self._additions >= self.period:
            for row in self._rows:
                row[:] = [v >> 1 for v in row]
            self._doorkeeper.clear()
            self._additions //= 2


class WTinyLfu(EvictionPolicy):
    """W-TinyLFU. Params (defaults): ``window_ratio`` (0.01; window ≥ 1 block),
    ``protected_ratio`` (0.8 of main), ``sketch_depth`` (4), ``sample_factor`` (10: aging
    period in multiples of the capacity), ``doorkeeper`` (True). Honours pins: the candidate
    and the main victim are the oldest unpinned blocks of their segments."""

    name = "wtinylfu"

    def __init__(
        self,
        capacity: int,
        *,
        rng: np.random.Generator,
        window_ratio: float = 0.01,
        protected_ratio: float = 0.8,
        sketch_depth: int = 4,
        sample_factor: int = 10,
        doorkeeper: bool = True,
        **params: Any,
    ) -> None:
        super().__init__(capacity, rng=rng, **params)
        if not (0.0 < window_ratio < 1.0 and 0.0 <= protected_ratio <= 1.0):
            raise ValueError(
                f"wtinylfu: need 0 < window_ratio < 1 and 0 <= protected_ratio <= 1, "
                f"got {window_ratio}, {protected_ratio}"
            )
        self.window_target = max(1, int(window_ratio * capacity))
        self.main_target = max(capacity - self.window_target, 0)
        self.protected_target = int(protected_ratio * self.main_target)
        self.sketch = CountMinSketch(
            capacity, sketch_depth, sample_factor * capacity, doorkeeper=doorkeeper
        )
        # LRU (first) -> MRU (last) in every segment.
        self._window: OrderedDict[int, None] = OrderedDict()
        self._probation: OrderedDict[int, None] = OrderedDict()
        self._protected: OrderedDict[int, None] = OrderedDict()

    def __len__(self) -> int:
        return len(self._window) + len(self._probation) + len(self._protected)

    def find(self, block: int) -> bool:
        return block in self._window or block in self._probation or block in self._protected

    def access(self, block: int, cost: float, next_access: int) -> None:
        del cost, next_access  # not used by this policy
        self.sketch.record(block)
        if block in self._window:
            self._window.move_to_end(block)
        elif block in self._protected:
            self._protected.move_to_end(block)
        elif block in self._probation:
            del self._probation[block]
            self._protected[block] = None
            if len(self._protected) > self.protected_target:
                demoted, _ = self._protected.popitem(last=False)
                self._probation[demoted] = None
        else:
            self._window[block] = None
            # While main has room, window overflow moves in without a duel (Caffeine admits
            # freely until the cache is full); afterwards the duel happens in ``evict_n``.
            while len(self._window) > self.window_target and self._main_size() < self.main_target:
                moved, _ = self._window.popitem(last=False)
                self._probation[moved] = None

    def _main_size(self) -> int:
        return len(self._probation) + len(self._protected)

    def evict(self, pinned: Collection[int]) -> list[int]:
        return self.evict_n(1, pinned)

    def evict_n(self, n: int, pinned: Collection[int]) -> list[int]:
        """Free ``n`` blocks for ``n`` (or more) incoming ones, which will enter the window.

        The incoming blocks push ``len(window) + n - window_target`` window blocks out; each
        of those (oldest first) duels the current main victim, as in Caffeine. Remaining
        evictions take the main victim directly (the window LRU if main has none).
        """
        overflow = len(self._window) + n - self.window_target
        victims: list[int] = []
        for _ in range(n):
            victims.append(self._evict_one(pinned, duel=overflow > 0))
            overflow -= 1
        return victims

    def _evict_one(self, pinned: Collection[int], *, duel: bool) -> int:
        candidate = first_unpinned(self._window, pinned)
        victim = first_unpinned(self._probation, pinned)
        segment = self._probation
        if victim is None:
            victim = first_unpinned(self._protected, pinned)
            segment = self._protected
        if candidate is not None and (duel or victim is None):
            del self._window[candidate]
            if victim is None or self.sketch.estimate(candidate) <= self.sketch.estimate(victim):
                return candidate
            # The candidate wins the duel: it is admitted to main and the main victim leaves.
            self._probation[candidate] = None
        if victim is None:
            raise nothing_evictable(self.name)
        del segment[victim]
        return victim

    def remove(self, block: int) -> None:
        self._window.pop(block, None)
        self._probation.pop(block, None)
        self._protected.pop(block, None)
