"""Partial-node RandomCompute: sample blocks, score their prefix-tree nodes, trim a node's tail.

A *node* is the run of blocks one request inserted (its misses, in prefix order), learned from
``record_request``: in a radix tree these are the blocks that request added below the shared
prefix it matched. A node is scored as a whole and loses blocks from its deep end, so the
resident part of a conversation stays prefix-contiguous instead of being punched full of holes
by per-block choices (PrefixSim's partial-node family).

Eviction round: draw ``n_sample`` resident blocks uniformly with replacement (the policy's
``rng``; pinned draws are dropped), map them to their nodes, and pick the lowest-scoring node

    score(node) = cost(deepest unpinned block) × freq(node) / (clock - last(node) + 1)

(``freq`` = requests that touched the node, ``last`` = the latest access tick of any of its
blocks, ``clock`` = this policy's access count; same units as ``random_compute``). Ties: older
``last``, then larger deepest block id. Then evict the node's deepest unpinned blocks:

* ``eviction_mode="micro"`` (default, as PrefixSim): at most ``micro_batch`` blocks (default
  64), then re-sample;
* ``eviction_mode="drain"``: the whole remaining deficit (fewer if the node is smaller; then a
  new round), so ``evict_n`` usually draws one sample per request (PrefixSim measured it
  within 0.002 of micro at every size, and faster).

Without ``record_request`` (a driver that does not call it) every block is its own node.
"""

from __future__ import annotations

from collections.abc import Collection, Container, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import numpy as np

from simulator.kvcache.policies._common import ResidentSample, nothing_evictable
from simulator.kvcache.policies.base import EvictionPolicy, RequestContext

__all__ = ["EvictionMode", "PartialNodeRandomCompute", "PartialNodeRandomFreq"]

EvictionMode = Literal["drain", "micro"]


@dataclass(slots=True, eq=False)
class _Node:
    """Blocks one request inserted. ``blocks`` is in prefix order and may keep stale entries
    (blocks since evicted or removed); a block belongs to the node iff ``node_of[b] is node``."""

    blocks: list[int]
    freq: int
    last: int
    last_request: int


class PartialNodeRandomCompute(EvictionPolicy):
    """Params: ``n_sample`` (128), ``eviction_mode`` (``"micro"``, the default, | ``"drain"``),
    ``micro_batch`` (64, used by ``"micro"``). Honours pins (pinned blocks are never drawn
    nor taken; a node's tail is trimmed around them)."""

    name = "partial_node_random_compute"
    clock: ClassVar[str] = "block accesses"

    def __init__(
        self,
        capacity: int,
        *,
        rng: np.random.Generator,
        n_sample: int = 128,
        eviction_mode: EvictionMode = "micro",
        micro_batch: int = 64,
        **params: Any,
    ) -> None:
        super().__init__(capacity, rng=rng, **params)
        if n_sample < 1 or micro_batch < 1:
            raise ValueError(f"{self.name}: n_sample and micro_batch must be ≥ 1")
        if eviction_mode not in ("drain", "micro"):
            raise ValueError(f"{self.name}: eviction_mode must be 'drain' or 'micro'")
        self.n_sample = n_sample
        self.eviction_mode = eviction_mode
        self.micro_batch = micro_batch
        self._resident = ResidentSample()
        self._node_of: dict[int, _Node] = {}
        self._cost: dict[int, float] = {}
        self._pending: dict[int, _Node] = {}
        self._clock = 0
        self._request = 0

    def __len__(self) -> int:
        return len(self._resident)

    def find(self, block: int) -> bool:
        return block in self._resident

    def resident_view(self) -> Container[int]:
        return self._node_of

    def set_request_ctx(self, ctx: RequestContext) -> None:
        del ctx  # only marks a request boundary (for drivers without record_request)
        self._request += 1

    def record_request(self, blocks: Sequence[int]) -> None:
        self._request += 1
        missing = [b for b in dict.fromkeys(blocks) if b not in self._resident]
        node = _Node(missing, freq=1, last=self._clock, last_request=self._request)
        self._pending = dict.fromkeys(missing, node)

    def access(self, block: int, cost: float, next_access: int) -> None:
        del next_access  # not used by this policy
        self._clock += 1
        self._cost[block] = cost
        node = self._node_of.get(block)
        if node is None:
            node = self._pending.pop(block, None)
            if node is None:
                node = _Node([block], freq=1, last=self._clock, last_request=self._request)
            self._node_of[block] = node
            self._resident.add(block)
        if node.last_request != self._request:
            node.freq += 1
            node.last_request = self._request
        node.last = self._clock

    def evict(self, pinned: Collection[int]) -> list[int]:
        return self.evict_n(1, pinned)

    def evict_n(self, n: int, pinned: Collection[int]) -> list[int]:
        victims: list[int] = []
        while len(victims) < n:
            sample = self._resident.draw_unpinned(self.rng, self.n_sample, pinned)
            if not sample:
                break
            # Nodes hash by identity (eq=False): fromkeys de-duplicates in first-drawn order.
            nodes = dict.fromkeys(map(self._node_of.__getitem__, sample))
            winner = min(nodes, key=lambda node: self._rank(node, pinned))
            left = n - len(victims)
            chunk = left if self.eviction_mode == "drain" else min(left, self.micro_batch)
            victims.extend(self._take_tail(winner, chunk, pinned))
        if not victims and n > 0 and len(self._resident):
            raise nothing_evictable(self.name)
        return victims

    def _deepest_unpinned(self, node: _Node, pinned: Collection[int]) -> int:
        for block in reversed(node.blocks):
            if self._node_of.get(block) is node and block not in pinned:
                return block
        raise AssertionError("a sampled node has an unpinned block")

    def _rank(self, node: _Node, pinned: Collection[int]) -> tuple[float, int, int]:
        deepest = self._deepest_unpinned(node, pinned)
        score = self._cost[deepest] * node.freq / (self._clock - node.last + 1)
        return (score, node.last, -deepest)

    def _take_tail(self, node: _Node, chunk: int, pinned: Collection[int]) -> list[int]:
        taken: list[int] = []
        for block in reversed(node.blocks):
            if len(taken) == chunk:
                break
            if self._node_of.get(block) is node and block not in pinned:
                taken.append(block)
        for block in taken:
            self.remove(block)
        node.blocks = [b for b in node.blocks if self._node_of.get(b) is node]
        return taken

    def remove(self, block: int) -> None:
        if self._node_of.pop(block, None) is not None:
            self._resident.discard(block)
            del self._cost[block]


class PartialNodeRandomFreq(PartialNodeRandomCompute):
    """The cost-blind sibling: ``score(node) = freq(node) / (clock - last(node) + 1)`` (the
    hyperbolic-caching score of the node), same sampling, ties and tail trimming. Same
    parameters; honours pins."""

    name = "partial_node_random_freq"

    def _rank(self, node: _Node, pinned: Collection[int]) -> tuple[float, int, int]:
        deepest = self._deepest_unpinned(node, pinned)
        return (node.freq / (self._clock - node.last + 1), node.last, -deepest)
