"""SIEVE (Zhang et al., NSDI'24): a FIFO queue, a visited bit and a hand that sifts.

New blocks enter at the head (newest end) with the bit clear; a hit sets the bit and moves
nothing. The hand starts at the tail (oldest end) and walks toward the head: a visited block has
its bit cleared and is passed, the first unvisited block is evicted, and the hand stays where the
victim was (at the next newer block), wrapping to the tail past the head.

State: three plain dicts over block ids forming a circular doubly linked list through a sentinel,
so no object is allocated per block. Pinned blocks are passed over untouched (bit kept).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from typing import Any, ClassVar

import numpy as np

from simulator.kvcache.policies._common import ResidentKeysPolicy

__all__ = ["Sieve"]

# A key no block id can take (trace ids fit in 64 bits): the ring's sentinel.
_SENTINEL = -(2**64)


class Sieve(ResidentKeysPolicy):
    """SIEVE; ``find`` is a dict membership test (fast path in the serve loop)."""

    name: ClassVar[str] = "sieve"

    def __init__(self, capacity: int, *, rng: np.random.Generator, **params: Any) -> None:
        super().__init__(capacity, rng=rng, **params)
        self._resident: dict[int, int] = {}  # resident block -> visited bit
        # Ring through the sentinel: _newer[_SENTINEL] is the tail, _older[_SENTINEL] the head.
        self._newer: dict[int, int] = {_SENTINEL: _SENTINEL}
        self._older: dict[int, int] = {_SENTINEL: _SENTINEL}
        self._hand = _SENTINEL  # the sentinel means "start at the tail"

    def access(self, block: int, cost: float, next_access: int) -> None:
        del cost, next_access  # not used by this policy
        if block in self._resident:
            self._resident[block] = 1
        else:
            self._push_head(block)

    def _replay(self, blocks: Iterable[int]) -> None:
        # access() inlined; new blocks are chained onto the head and the ring closed once.
        visited, newer, older = self._resident, self._newer, self._older
        head = older[_SENTINEL]
        for block in blocks:
            if block in visited:
                visited[block] = 1
            else:
                newer[head] = block
                older[block] = head
                visited[block] = 0
                head = block
        newer[head] = _SENTINEL
        older[_SENTINEL] = head

    def _push_head(self, block: int) -> None:
        newer, older = self._newer, self._older
        head = older[_SENTINEL]
        newer[head] = block
        older[block] = head
        newer[block] = _SENTINEL
        older[_SENTINEL] = block
        self._resident[block] = 0

    def _unlink(self, block: int) -> None:
        newer, older = self._newer, self._older
        after, before = newer.pop(block), older.pop(block)
        newer[before] = after
        older[after] = before
        del self._resident[block]

    def evict_n(self, n: int, pinned: Collection[int]) -> list[int]:
        visited, newer = self._resident, self._newer
        victims: list[int] = []
        hand = self._hand
        # Two full turns without a victim means everything left is pinned: give up (the serve
        # loop never asks then; the guard keeps a misuse from spinning forever).
        idle = 0
        while len(victims) < n and idle <= 2 * len(visited) + 2:
            idle += 1
            if hand == _SENTINEL:
                hand = newer[_SENTINEL]
            elif hand in pinned:
                hand = newer[hand]
            elif visited[hand]:
                visited[hand] = 0
                hand = newer[hand]
            else:
                victim, hand = hand, newer[hand]
                self._unlink(victim)
                victims.append(victim)
                idle = 0
        self._hand = hand
        return victims

    def remove(self, block: int) -> None:
        if block in self._resident:
            if self._hand == block:
                self._hand = self._newer[block]
            self._unlink(block)
