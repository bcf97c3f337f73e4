"""Helpers shared by several eviction policies (a private module; the policy modules that first
defined ``pop_oldest``, ``first_unpinned``, ``KeyedHeap`` and ``ResidentSample`` still export them).

- ``ResidentKeysPolicy``: the base of policies whose resident set *is* the keys of one dict (or
  set), so ``len``, ``find`` and ``resident_view`` are that container's, and which evict in
  batches (``evict`` = ``evict_n(1)``) and read neither cost nor next access in phase 3;
- ``pop_oldest`` / ``first_unpinned``: the oldest unpinned keys of an ``OrderedDict`` queue;
- ``KeyedHeap``: a min-heap with replaceable priorities (Belady, GDSF, session Belady);
- ``ResidentSample``: the resident set as a dense list for uniform sampling (the random
  policies);
- ``nothing_evictable``: the one error every policy raises when everything left is pinned.

Nothing here adds a call on the per-block path: subclasses still inline their loops.
"""

from __future__ import annotations

import heapq
from abc import abstractmethod
from collections import OrderedDict, deque
from collections.abc import Collection, Container, Iterable, Sequence
from itertools import islice
from typing import Any

import numpy as np

from simulator.kvcache.policies.base import EvictionPolicy

__all__ = [
    "KeyedHeap",
    "KeyedHeapPolicy",
    "ResidentKeysPolicy",
    "ResidentSample",
    "first_unpinned",
    "nothing_evictable",
    "pop_oldest",
]

Priority = tuple[float, ...]

# Redraws before a sampler falls back to a scan when every drawn block was pinned.
_MAX_REDRAWS = 16


def nothing_evictable(name: str) -> RuntimeError:
    """What ``evict`` raises when every resident block is pinned (the serve loop never asks)."""
    return RuntimeError(f"{name}: evict() found no unpinned resident block")


class ResidentKeysPolicy(EvictionPolicy):
    """Base of policies whose resident set is exactly the keys of ``self._resident``.

    A subclass assigns ``_resident`` (a dict or set; values are the subclass's own) in its
    ``__init__`` and keeps every resident block in it and nothing else, so ``find`` is one
    C-level membership test and the container itself is the serve loop's ``resident_view``.
    It implements ``evict_n`` (``evict`` is ``evict_n(1)``) and ``_replay``, phase 3 with the
    blocks already in replay order. Not for policies that read ``cost`` or ``next_access`` in
    phase 3 (``access_request`` drops them), nor for ones with ghost entries in the container.
    """

    _resident: Collection[int]

    def __len__(self) -> int:
        return len(self._resident)

    def find(self, block: int) -> bool:
        return block in self._resident

    def resident_view(self) -> Container[int] | None:
        return self._resident

    def evict(self, pinned: Collection[int]) -> list[int]:
        return self.evict_n(1, pinned)

    @abstractmethod
    def evict_n(self, n: int, pinned: Collection[int]) -> list[int]:
        """See ``EvictionPolicy.evict_n``; the one eviction verb of these policies."""

    def access_request(
        self,
        blocks: Sequence[int],
        costs: Sequence[float],
        next_access: Sequence[int] | None,
        deepest_first: bool,
    ) -> None:
        del costs, next_access  # not read by these policies
        self._replay(reversed(blocks) if deepest_first else blocks)

    @abstractmethod
    def _replay(self, blocks: Iterable[int]) -> None:
        """``access`` every block of ``blocks``, in that order; must match calling ``access``
        per block. Hot policies inline ``access`` here (one call per request, not per block)."""


def pop_oldest(order: OrderedDict[int, Any], n: int, pinned: Collection[int]) -> list[int]:
    """Remove up to ``n`` unpinned keys from the front of ``order``; return them, oldest first.

    Pinned keys are passed over and keep their place and value. Shared by the queue-based
    policies. Fast path (no pinned key among the first ``n``): C-level slicing, then the
    victims are popped from the front (``popitem(last=False)`` finds its node without a
    lookup by key: about a fifth less time than deleting each victim by key).
    """
    victims = list(islice(order, n))
    if pinned and any(map(pinned.__contains__, victims)):
        victims = list(islice((key for key in order if key not in pinned), n))
        deque(map(order.__delitem__, victims), maxlen=0)
        return victims
    popitem = order.popitem
    for _ in victims:  # the victims are the first ``len(victims)`` keys
        popitem(False)
    return victims


def first_unpinned(queue: OrderedDict[int, Any], pinned: Collection[int]) -> int | None:
    """Oldest key of ``queue`` not in ``pinned`` (None if none); reads, never reorders."""
    for block in queue:
        if block not in pinned:
            return block
    return None


class KeyedHeap:
    """Min-heap of integer items, each with one current priority tuple.

    ``set`` replaces an item's priority in O(log n) by pushing a new entry; superseded entries
    stay in the heap and are skipped when they surface (lazy deletion). The heap is rebuilt
    when stale entries outnumber live ones, so memory stays O(live items).
    Not thread-safe, not a general priority queue (items are ints, one entry live per item).
    """

    __slots__ = ("_heap", "_prio")

    def __init__(self) -> None:
        self._prio: dict[int, Priority] = {}
        self._heap: list[tuple[Priority, int]] = []

    def __len__(self) -> int:
        return len(self._prio)

    def __contains__(self, item: int) -> bool:
        return item in self._prio

    @property
    def members(self) -> Container[int]:
        """Live read-only view of the items (a dict; ``in`` is a C-level lookup)."""
        return self._prio

    def priority(self, item: int) -> Priority:
        """Current priority of ``item`` (``KeyError`` if absent)."""
        return self._prio[item]

    def set(self, item: int, prio: Priority) -> None:
        """Insert ``item`` or replace its priority."""
        if self._prio.get(item) == prio:
            return
        self._prio[item] = prio
        heapq.heappush(self._heap, (prio, item))
        if len(self._heap) > 2 * len(self._prio) + 64:
            self._heap = [(p, i) for i, p in self._prio.items()]
            heapq.heapify(self._heap)

    def discard(self, item: int) -> None:
        """Remove ``item`` if present (its heap entry goes stale)."""
        self._prio.pop(item, None)

    def peek(self, pinned: Collection[int]) -> tuple[Priority, int] | None:
        """The live minimum not in ``pinned``, left in place; ``None`` if there is none."""
        skipped: list[tuple[Priority, int]] = []
        top = None
        while self._heap:
            prio, item = self._heap[0]
            if self._prio.get(item) != prio:
                heapq.heappop(self._heap)
            elif item in pinned:
                skipped.append(heapq.heappop(self._heap))
            else:
                top = (prio, item)
                break
        for entry in skipped:
            heapq.heappush(self._heap, entry)
        return top

    def pop_n(self, n: int, pinned: Collection[int]) -> list[tuple[Priority, int]]:
        """Remove and return up to ``n`` smallest live items not in ``pinned``, in order."""
        out: list[tuple[Priority, int]] = []
        skipped: list[tuple[Priority, int]] = []
        while len(out) < n and self._heap:
            prio, item = heapq.heappop(self._heap)
            if self._prio.get(item) != prio:
                continue
            if item in pinned:
                skipped.append((prio, item))
                continue
            del self._prio[item]
            out.append((prio, item))
        for entry in skipped:
            heapq.heappush(self._heap, entry)
        return out


class ResidentSample:
    """The resident block set as a dense list, for O(1) uniform sampling and removal."""

    __slots__ = ("_blocks", "_slot")

    def __init__(self) -> None:
        self._blocks: list[int] = []
        self._slot: dict[int, int] = {}

    def __len__(self) -> int:
        return len(self._blocks)

    def __contains__(self, block: int) -> bool:
        return block in self._slot

    @property
    def members(self) -> Container[int]:
        """Live read-only view of the blocks (a dict; ``in`` is a C-level lookup)."""
        return self._slot

    def add(self, block: int) -> None:
        if block not in self._slot:
            self._slot[block] = len(self._blocks)
            self._blocks.append(block)

    def discard(self, block: int) -> None:
        """Remove ``block`` if present (swap with the last element; O(1))."""
        index = self._slot.pop(block, None)
        if index is None:
            return
        last = self._blocks.pop()
        if last != block:
            self._blocks[index] = last
            self._slot[last] = index

    def draw_unpinned(self, rng: np.random.Generator, k: int, pinned: Collection[int]) -> list[int]:
        """``k`` uniform draws with replacement, pinned ones dropped (duplicates kept).

        Redraws when every draw was pinned; after ``_MAX_REDRAWS`` rounds falls back to the
        first unpinned block of a scan. Empty only if every resident block is pinned.
        """
        for _ in range(_MAX_REDRAWS):
            chosen = self.pick(rng.random(k).tolist(), pinned)
            if chosen:
                return chosen
        return next(([b] for b in self._blocks if b not in pinned), [])

    def pick(self, uniforms: Sequence[float], pinned: Collection[int]) -> list[int]:
        """The blocks at positions ``int(u × len)`` for each ``u`` in [0, 1), pinned dropped.

        Lets a caller draw many samples' uniforms in one generator call (the list changes
        between samples, so positions are taken only now).
        """
        blocks, n = self._blocks, len(self._blocks)
        return [b for b in [blocks[int(u * n)] for u in uniforms] if b not in pinned]


class KeyedHeapPolicy(EvictionPolicy):
    """Base of policies that evict the resident block of lowest priority in a ``KeyedHeap``
    (``self._heap``); subclasses decide the priority in ``access``. Honours pins."""

    def __init__(self, capacity: int, *, rng: np.random.Generator, **params: Any) -> None:
        super().__init__(capacity, rng=rng, **params)
        self._heap = KeyedHeap()

    def __len__(self) -> int:
        return len(self._heap)

    def find(self, block: int) -> bool:
        return block in self._heap

    def resident_view(self) -> Container[int]:
        return self._heap.members

    def evict(self, pinned: Collection[int]) -> list[int]:
        return self.evict_n(1, pinned)

    def evict_n(self, n: int, pinned: Collection[int]) -> list[int]:
        victims = [block for _, block in self._heap.pop_n(n, pinned)]
        if not victims and n > 0 and len(self._heap):
            raise nothing_evictable(self.name)
        return victims

    def remove(self, block: int) -> None:
        self._heap.discard(block)
