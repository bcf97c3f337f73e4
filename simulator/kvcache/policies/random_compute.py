"""RandomCompute: sampled eviction by a cost / age score (PrefixSim's ``random_compute``).

Per eviction, ``n_sample`` resident blocks are drawn uniformly *with replacement* using the
policy's ``rng`` (pinned draws are dropped); the one with the lowest score leaves:

    score(b) = cost(b) / age(b),   age(b) = clock - last_access(b) + 1

``cost`` is the block's cost-model weight at its last access and ``clock`` the policy's count
of block accesses. Every block of a request is stamped with one time, the request's *end*
(``clock + n`` for a request of ``n`` blocks, PrefixSim's ``n_req + n``): blocks of one request
age together, so the score ranks requests by recency and, within one, by cost — a per-block
stamp would make the root of every request look older than its tail, the bug that cost
PrefixSim's random_compute 3 points (0.6071 -> 0.6378 in its own measurements). A single
``access`` call outside the serve loop is a one-block request. ``age ≥ 1`` in block accesses.
Ties: older last access first, then larger block id.

``ResidentSample`` (O(1) insert/remove/uniform draw; in ``_common``, exported here too) is
shared with the partial-node policy.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Collection, Container, Iterator, Sequence
from typing import Any, ClassVar

import numpy as np

from simulator.kvcache.policies._common import ResidentSample, nothing_evictable, pop_oldest
from simulator.kvcache.policies.base import EvictionPolicy

__all__ = ["RandomCompute", "RandomComputeSmallQueue", "ResidentSample"]


class RandomCompute(EvictionPolicy):
    """Sampled lowest-score eviction. Params: ``n_sample`` (default 8) draws per eviction.
    Honours pins (pinned draws are discarded; see ``ResidentSample.draw_unpinned``)."""

    name = "random_compute"
    clock: ClassVar[str] = "block accesses"

    def __init__(
        self, capacity: int, *, rng: np.random.Generator, n_sample: int = 8, **params: Any
    ) -> None:
        super().__init__(capacity, rng=rng, **params)
        if n_sample < 1:
            raise ValueError(f"random_compute: n_sample must be ≥ 1, got {n_sample}")
        self.n_sample = n_sample
        self._resident = ResidentSample()
        self._cost: dict[int, float] = {}
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
        self._last[block] = self._clock

    def access_request(
        self,
        blocks: Sequence[int],
        costs: Sequence[float],
        next_access: Sequence[int] | None,
        deepest_first: bool,
    ) -> None:
        # One stamp for the whole request (its end); the order only decides which cost a block
        # repeated within the request keeps (that of its last access, as per block).
        del next_access
        self._clock += len(blocks)
        end, add, cost, last = self._clock, self._resident.add, self._cost, self._last
        order = range(len(blocks) - 1, -1, -1) if deepest_first else range(len(blocks))
        for i in order:
            block = blocks[i]
            add(block)
            cost[block] = costs[i]
            last[block] = end

    def score(self, block: int) -> float:
        """Current score of a resident block (lower = evicted sooner)."""
        return self._cost[block] / (self._clock - self._last[block] + 1)

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
                raise nothing_evictable(self.name)
            victim = self._lowest(sample)
            self.remove(victim)
            victims.append(victim)
        return victims

    def _lowest(self, sample: list[int]) -> int:
        """The sampled block with the lowest (score, last access, -id)."""
        clock, cost, last = self._clock, self._cost, self._last
        best = sample[0]
        best_key = (cost[best] / (clock - last[best] + 1), last[best], -best)
        for block in sample[1:]:
            key = (cost[block] / (clock - last[block] + 1), last[block], -block)
            if key < best_key:
                best, best_key = block, key
        return best

    def remove(self, block: int) -> None:
        if block in self._resident:
            self._resident.discard(block)
            del self._cost[block], self._last[block]


class _Excluded:
    """``in`` = pinned or still in the small queue (draws from the main part only)."""

    __slots__ = ("_pinned", "_small")

    def __init__(self, pinned: Collection[int], small: Container[int]) -> None:
        self._pinned, self._small = pinned, small

    def __contains__(self, block: object) -> bool:
        return block in self._small or block in self._pinned

    def __len__(self) -> int:  # a Collection for ResidentSample; never iterated
        return len(self._pinned)

    def __iter__(self) -> Iterator[int]:
        return iter(self._pinned)


class RandomComputeSmallQueue(RandomCompute):
    """RandomCompute behind an S3-FIFO-style small queue (quick demotion of one-hit blocks).

    A block enters a small FIFO on insertion and leaves it for the sampled main part when it is
    accessed again by a later request. While the small queue holds at least ``small_ratio ×
    capacity`` blocks (at least 1), victims are its oldest unpinned blocks; otherwise the main
    part is sampled as in ``random_compute`` (the small queue is the fallback when every main
    block is pinned). Params: ``n_sample`` (8), ``small_ratio`` (0.1). Honours pins."""

    name = "random_compute_small_queue"

    def __init__(
        self,
        capacity: int,
        *,
        rng: np.random.Generator,
        n_sample: int = 8,
        small_ratio: float = 0.1,
        **params: Any,
    ) -> None:
        super().__init__(capacity, rng=rng, n_sample=n_sample, **params)
        if not 0.0 < small_ratio < 1.0:
            raise ValueError(f"{self.name}: small_ratio must be in (0, 1), got {small_ratio}")
        self.small_target = max(1, int(small_ratio * capacity))
        self._small: OrderedDict[int, None] = OrderedDict()

    def _enter(self, blocks: Sequence[int]) -> None:
        """Before phase 3: new blocks queue in S; S blocks seen again are promoted."""
        resident, small = self._resident, self._small
        for block in dict.fromkeys(blocks):
            if block not in resident:
                small[block] = None
            else:
                small.pop(block, None)

    def access(self, block: int, cost: float, next_access: int) -> None:
        self._enter((block,))
        super().access(block, cost, next_access)

    def access_request(
        self,
        blocks: Sequence[int],
        costs: Sequence[float],
        next_access: Sequence[int] | None,
        deepest_first: bool,
    ) -> None:
        self._enter(blocks)
        super().access_request(blocks, costs, next_access, deepest_first)

    def evict_n(self, n: int, pinned: Collection[int]) -> list[int]:
        victims: list[int] = []
        while len(victims) < n:
            if len(self._small) >= self.small_target:
                taken = pop_oldest(self._small, 1, pinned)
                if taken:
                    self._drop(taken[0])
                    victims.append(taken[0])
                    continue
            main = self._sample_main(pinned)
            if main is None:
                taken = pop_oldest(self._small, 1, pinned)
                if not taken:
                    break
                main = taken[0]
            self._drop(main)
            victims.append(main)
        if not victims and n > 0 and len(self._resident):
            raise nothing_evictable(self.name)
        return victims

    def _sample_main(self, pinned: Collection[int]) -> int | None:
        if len(self._small) >= len(self._resident):
            return None
        excluded = _Excluded(pinned, self._small)
        sample = self._resident.draw_unpinned(self.rng, self.n_sample, excluded)
        return self._lowest(sample) if sample else None

    def _drop(self, block: int) -> None:
        self._small.pop(block, None)
        RandomCompute.remove(self, block)

    def remove(self, block: int) -> None:
        self._drop(block)
