"""``cache_aware``: SGLang's cache-aware router (sgl-router ``cache_aware`` policy) on blocks.

Per request, in order (SGLang's rule, with its command-line defaults):

1. **Imbalance** — with ``load`` = outstanding *requests* per instance (queued or running, the
   measure SGLang's router counts), the pool is imbalanced when ``max − min > balance_abs``
   *and* ``max > balance_rel × min``. Then the request goes to the least loaded instance
   (fewest requests; ties to fewer outstanding tokens, then the lowest index).
2. **Prefix match** — otherwise the instance whose approximate tree
   (``routers.prefix_tree``) holds the longest leading run of the request's blocks wins if
   ``matched blocks / request blocks > cache_threshold``. Ties in match length go to the less
   loaded instance (requests, then tokens, then index); SGLang takes whichever tenant its tree
   node lists first.
3. **Fallback** — otherwise ``fallback='least_load'`` (default) sends it to the instance with
   the fewest outstanding tokens (as the ``least_load`` router); ``fallback='smallest_tree'``
   is SGLang's exact choice, the instance whose tree holds the fewest blocks (ties to the
   lowest index) — a proxy for "most free cache" that ignores queue lengths.

Whatever the branch, the request's blocks are then recorded in the chosen instance's tree (as
SGLang does). Differences from SGLang, on purpose: the trees hold block ids (the trace's unit
of prefix reuse), not characters, so the match share counts blocks; and pruning to
``max_tree_blocks`` happens at every insert, not on a 120 s background timer, so a run never
depends on wall-clock timing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar, Literal

import numpy as np
from pydantic import Field

from simulator.cluster.routers.base import (
    InstanceView,
    Router,
    RouterParams,
    least_loaded,
    least_requests,
)
from simulator.cluster.routers.prefix_tree import ApproxPrefixTrees
from simulator.workload.request import TraceRequest

__all__ = ["CacheAwareParams", "CacheAwareRouter"]


class CacheAwareParams(RouterParams):
    """Parameters of ``cache_aware`` (defaults: sgl-router's command-line defaults)."""

    cache_threshold: float = Field(
        default=0.3,
        ge=0.0,
        le=1.0,
        description="Route by prefix only when matched blocks / request blocks exceeds this.",
    )
    balance_abs: int = Field(
        default=64,
        ge=0,
        description="Imbalanced needs max − min outstanding requests above this (requests).",
    )
    balance_rel: float = Field(
        default=1.5,
        ge=1.0,
        description="Imbalanced also needs max outstanding requests above this × the minimum.",
    )
    max_tree_blocks: int = Field(
        default=32768,
        ge=1,
        description="Blocks each instance's approximate tree keeps (least recently routed "
        "pruned). Default: sgl-router's 2**26-character tree ≈ 2**24 tokens at ~4 characters "
        "a token = 32768 blocks of 512 tokens (Mooncake's block).",
    )
    fallback: Literal["least_load", "smallest_tree"] = Field(
        default="least_load",
        description="Where a request with no good prefix match goes: the instance with the "
        "fewest outstanding tokens, or (SGLang) the one whose tree is smallest.",
    )


class CacheAwareRouter(Router):
    """SGLang's cache-aware routing over per-instance prefix trees (module docstring)."""

    name: ClassVar[str] = "cache_aware"
    params_model: ClassVar[type[RouterParams]] = CacheAwareParams

    def __init__(
        self, n_instances: int, rng: np.random.Generator, params: RouterParams | None = None
    ) -> None:
        super().__init__(n_instances, rng, params)
        self.config = self.typed_params(CacheAwareParams)
        self.trees = ApproxPrefixTrees(n_instances, self.config.max_tree_blocks)
        self.decisions = {"imbalance": 0, "prefix": 0, "fallback": 0}
        """How many requests each rule decided (diagnostics)."""

    def forget(self, index: int) -> None:
        """A stopped instance's cache is gone: so is the router's belief about it."""
        self.trees.forget(index)

    def imbalanced(self, instances: Sequence[InstanceView]) -> bool:
        """SGLang's test: max − min > balance_abs and max > balance_rel × min (requests)."""
        loads = [view.n_outstanding for view in instances]
        high, low = max(loads), min(loads)
        return high - low > self.config.balance_abs and high > self.config.balance_rel * low

    def route(self, request: TraceRequest, instances: Sequence[InstanceView]) -> int:
        blocks = request.block_ids
        if self.imbalanced(instances):
            choice, rule = least_requests(instances), "imbalance"
        else:
            choice, rule = self._by_prefix(blocks, instances)
        self.decisions[rule] += 1
        self.trees.insert(choice, blocks)
        return choice

    def _by_prefix(
        self, blocks: Sequence[int], instances: Sequence[InstanceView]
    ) -> tuple[int, str]:
        # Only the routable instances compete (an autoscaled pool routes to a prefix).
        lengths = self.trees.match_lengths(self.trees.known_path(blocks))[: len(instances)]
        longest = max(lengths)
        if blocks and longest / len(blocks) > self.config.cache_threshold:
            holders = [i for i, n in enumerate(lengths) if n == longest]
            best = min(
                holders,
                key=lambda i: (instances[i].n_outstanding, instances[i].outstanding_tokens, i),
            )
            return best, "prefix"
        if self.config.fallback == "smallest_tree":
            sizes = [self.trees.size(i) for i in range(len(instances))]
            return sizes.index(min(sizes)), "fallback"
        return least_loaded(instances, range(len(instances))), "fallback"
