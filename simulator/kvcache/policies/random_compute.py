"""RandomCompute: sampled eviction by a cost × frequency / age score.

Per eviction, ``n_sample`` resident blocks are drawn uniformly *with replacement* using the
policy's ``rng`` (pinned draws are dropped); the one with the lowest score leaves:

    score(b) = cost(b) × freq(b) / age(b),   age(b) = clock - last_access(b) + 1

``cost`` is the block's cost-model weight at its last access, ``freq`` the number of accesses
since insertion, ``clock`` the policy's count of accesses (one tick per ``access`` call), so
``age ≥ 1`` in block accesses. The score is the compute a block has saved per unit of time it
has recently held its slot (a cost-weighted version of hyperbolic caching's ``n/t``).
Ties: older last access first, then larger block id.

``ResidentSample`` (O(1) insert/remove/uniform draw) is shared with the partial-node policy.
"""

from __future__ import annotations

from collections.abc import Collection, Container, Sequence
from typing import Any

import numpy as np

from simulator.kvcache.policies.base import EvictionPolicy

__all__ = ["RandomCompute", "ResidentSample"]

# Redraws before a sampler falls back to a scan when every drawn block was pinned.
_MAX_REDRAWS = 16


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


class RandomCompute(EvictionPolicy):
    """Sampled lowest-score eviction. Params: ``n_sample`` (default 8) draws per eviction.
    Honours pins (pinned draws are discarded; see ``ResidentSample.draw_unpinned``)."""

    name = "random_compute"

    def __init__(
        self, capacity: int, *, rng: np.random.Generator, n_sample: int = 8, **params: Any
    ) -> None:
        super().__init__(capacity, rng=rng, **params)
        if n_sample < 1:
            raise ValueError(f"random_compute: n_sample must be ≥ 1, got {n_sample}")
        self.n_sample = n_sample
        self._resident = ResidentSample()
        self._cost: dict[int, float] = {}
        self._freq: dict[int, int] = {}
        self._last: dict[int, int] = {}
        self._clock = 0

    def __len__(self) -> int:
        return len(self._resident)

    def find(self, block: int) -> bool:
        return block in self._resident

    def resident_view(self) -> Container[int]:
        return self._resident.members

    def access(self, block: int, cost: float, next_access: int) -> None:
        del next_access  # not used by this policy
        self._clock += 1
        self._resident.add(block)
        self._cost[block] = cost
        self._freq[block] = self._freq.get(block, 0) + 1
        self._last[block] = self._clock

    def score(self, block: int) -> float:
        """Current score of a resident block (lower = evicted sooner)."""
        age = self._clock - self._last[block] + 1
        return self._cost[block] * self._freq[block] / age

    def evict(self, pinned: Collection[int]) -> list[int]:
        return self.evict_n(1, pinned)

    def evict_n(self, n: int, pinned: Collection[int]) -> list[int]:
        k = self.n_sample
        uniforms = self.rng.random(n * k).tolist()  # one generator call for all n samples
        victims: list[int] = []
        for j in range(n):
            sample = self._resident.pick(uniforms[j * k : (j + 1) * k], pinned)
            if not sample:
                sample = self._resident.draw_unpinned(self.rng, k, pinned)
            if not sample:
                if victims:
                    break
                raise RuntimeError(f"{self.name}: evict() found no unpinned resident block")
            victim = self._lowest(sample)
            self.remove(victim)
            victims.append(victim)
        return victims

    def _lowest(self, sample: list[int]) -> int:
        """The sampled block with the lowest (score, last access, -id)."""
        clock, cost, freq, last = self._clock, self._cost, self._freq, self._last
        best = sample[0]
        best_key = (cost[best] * freq[best] / (clock - last[best] + 1), last[best], -best)
        for block in sample[1:]:
            key = (cost[block] * freq[block] / (clock - last[block] + 1), last[block], -block)
            if key < best_key:
                best, best_key = block, key
        return best

    def remove(self, block: int) -> None:
        if block in self._resident:
            self._resident.discard(block)
            del self._cost[block], self._freq[block], self._last[block]
