"""LHD (Beckmann, Chen & Cidon, NSDI 2018): evict the block with the least *hit density*.

A block's hit density at age a (ticks since its last access) is the probability that it hits
again divided by the space-time it will occupy until then, estimated from what blocks of the
same age did: with ``H[x]`` hits and ``E[x]`` evictions counted at age x,

    density(a) = Σ_{x ≥ a} H[x] / Σ_{x ≥ a} Σ_{y ≥ x} (H[y] + E[y])

(the denominator is the expected remaining lifetime in age units). Ages are coarsened into
``N_AGES`` = 128 classes of ``max(1, capacity // 16)`` block accesses and capped at the last
class; the counters decay by half at each reconfiguration (every ``4 × capacity`` accesses),
when the density table is recomputed. Before the first one, density(a) = 1 / (a + 1) (older
first, as LRU). This is the single-class LHD (no per-application classes).

Eviction samples ``n_sample`` (64) resident blocks uniformly with replacement (pinned draws
are dropped, the policy's ``rng``) and evicts the lowest ``density(age)`` — times the block's
cost-model weight for ``lhd_compute`` (hit density weighted by the compute a hit saves). Ties:
older last access, then larger id. The clock counts block accesses.
"""

from __future__ import annotations

from collections.abc import Collection, Container
from typing import Any, ClassVar

import numpy as np

from simulator.kvcache.policies._common import ResidentSample, nothing_evictable
from simulator.kvcache.policies.base import EvictionPolicy

__all__ = ["N_AGES", "Lhd", "LhdCompute", "hit_densities"]

N_AGES = 128
_DECAY = 0.5


def hit_densities(hits: list[float], evictions: list[float]) -> list[float]:
    """The density table from per-age hit and eviction counts (see the module doc)."""
    out = [0.0] * len(hits)
    hits_above = events_above = lifetime = 0.0
    for age in range(len(hits) - 1, -1, -1):
        hits_above += hits[age]
        events_above += hits[age] + evictions[age]
        lifetime += events_above
        out[age] = hits_above / lifetime if lifetime > 0 else 0.0
    return out


class Lhd(EvictionPolicy):
    """Params: ``n_sample`` (64). Honours pins."""

    name = "lhd"
    clock: ClassVar[str] = "block accesses"
    use_cost: ClassVar[bool] = False

    def __init__(
        self, capacity: int, *, rng: np.random.Generator, n_sample: int = 64, **params: Any
    ) -> None:
        super().__init__(capacity, rng=rng, **params)
        if n_sample < 1:
            raise ValueError(f"{self.name}: n_sample must be ≥ 1, got {n_sample}")
        self.n_sample = n_sample
        self.coarsening = max(1, capacity // 16)
        self.period = 4 * capacity
        self._resident = ResidentSample()
        self._last: dict[int, int] = {}
        self._cost: dict[int, float] = {}
        self._hits = [0.0] * N_AGES
        self._evictions = [0.0] * N_AGES
        self.density = [1.0 / (a + 1) for a in range(N_AGES)]
        self._clock = 0

    def __len__(self) -> int:
        return len(self._resident)

    def find(self, block: int) -> bool:
        return block in self._resident

    def resident_view(self) -> Container[int]:
        return self._resident.members

    def age(self, block: int) -> int:
        """Age class of a resident block (0 .. N_AGES - 1)."""
        return min((self._clock - self._last[block]) // self.coarsening, N_AGES - 1)

    def access(self, block: int, cost: float, next_access: int) -> None:
        del next_access  # not an oracle
        if block in self._resident:
            self._hits[self.age(block)] += 1.0
        else:
            self._resident.add(block)
        self._clock += 1
        self._last[block] = self._clock
        self._cost[block] = cost
        if self._clock % self.period == 0:
            self._reconfigure()

    def _reconfigure(self) -> None:
        self.density = hit_densities(self._hits, self._evictions)
        self._hits = [h * _DECAY for h in self._hits]
        self._evictions = [e * _DECAY for e in self._evictions]

    def rank(self, block: int) -> tuple[float, int, int]:
        """Eviction key (lowest first): density (× cost for lhd_compute), last access, -id."""
        value = self.density[self.age(block)]
        if self.use_cost:
            value *= self._cost[block]
        return (value, self._last[block], -block)

    def evict(self, pinned: Collection[int]) -> list[int]:
        return self.evict_n(1, pinned)

    def evict_n(self, n: int, pinned: Collection[int]) -> list[int]:
        victims: list[int] = []
        while len(victims) < n:
            sample = self._resident.draw_unpinned(self.rng, self.n_sample, pinned)
            if not sample:
                break
            victim = min(dict.fromkeys(sample), key=self.rank)
            self._evictions[self.age(victim)] += 1.0
            self.remove(victim)
            victims.append(victim)
        if not victims and n > 0 and len(self._resident):
            raise nothing_evictable(self.name)
        return victims

    def remove(self, block: int) -> None:
        if block in self._resident:
            self._resident.discard(block)
            del self._last[block], self._cost[block]


class LhdCompute(Lhd):
    """LHD weighted by cost: evicts the lowest ``density(age) × cost``. Params: ``n_sample``."""

    name = "lhd_compute"
    use_cost: ClassVar[bool] = True
