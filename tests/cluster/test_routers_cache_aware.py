"""``cache_aware``: SGLang's rule on both sides of each threshold, and its approximate trees."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.cluster.router import make_router
from simulator.cluster.routers.cache_aware import CacheAwareRouter
from simulator.cluster.routers.prefix_tree import ApproxPrefixTrees
from simulator.workload.request import TraceRequest

PREFIX = tuple(range(1, 11))  # ten blocks that instance 0 holds in most cases


@dataclass
class View:
    outstanding_tokens: int = 0
    n_outstanding: int = 0


def router(
    spec: str = "cache_aware", n: int = 2, held: tuple[int, ...] = PREFIX
) -> CacheAwareRouter:
    """A cache_aware router whose instance 0 holds ``held`` in its tree."""
    built = make_router(spec, n, np.random.default_rng(0))
    assert isinstance(built, CacheAwareRouter)
    built.trees.insert(0, held)
    return built


def req(blocks: tuple[int, ...], index: int = 0) -> TraceRequest:
    return TraceRequest(index, 0.0, 512 * max(1, len(blocks)), 8, blocks)


def views(*requests: int) -> list[View]:
    """Views with these outstanding request counts (tokens = 100 per request)."""
    return [View(100 * n, n) for n in requests]


# ----- the prefix rule ----------------------------------------------------------------------------
def test_a_request_goes_to_the_instance_holding_its_prefix() -> None:
    r = router()
    # Instance 0 is busier but the load is balanced by SGLang's rule: the prefix wins.
    assert r.route(req((*PREFIX, 99)), views(10, 0)) == 0
    assert r.decisions["prefix"] == 1


@pytest.mark.parametrize(("matched", "expected"), [(3, 1), (4, 0)])
def test_cache_threshold_is_strict(matched: int, expected: int) -> None:
    # 10-block request; instance 0 holds its first ``matched`` blocks. 3/10 = 0.3 is not
    # above the 0.3 threshold, so it falls back to the least loaded instance (1).
    r = router(held=PREFIX[:matched])
    assert r.route(req(PREFIX), views(5, 0)) == expected


@pytest.mark.parametrize(("threshold", "expected"), [(0.7, 0), (0.8, 1)])
def test_cache_threshold_is_a_parameter(threshold: float, expected: int) -> None:
    r = router(f"cache_aware:cache_threshold={threshold}", held=PREFIX[:8])
    assert r.route(req((*PREFIX[:8], 50, 51)), views(5, 0)) == expected


def test_a_miss_past_a_gap_does_not_count() -> None:
    # Instance 0 holds blocks 1..10 but the request differs at block 0: no prefix match.
    r = router()
    assert r.route(req((77, *PREFIX[1:])), views(5, 0)) == 1


def test_the_longest_match_wins_and_ties_go_to_the_less_loaded() -> None:
    r = router(n=3)
    r.trees.insert(1, PREFIX[:6])
    r.trees.insert(2, PREFIX[:6])
    assert r.route(req((*PREFIX[:6], 40, 41)), views(9, 7, 4)) == 2  # all three hold 6 blocks
    assert r.route(req(PREFIX), views(9, 0, 0)) == 0  # 0 matches 10 blocks, 1 and 2 only 6


# ----- the imbalance rule -------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("loads", "imbalanced"),
    [
        ((130, 66), False),  # max - min = 64: not above balance_abs
        ((131, 66), True),  # 65 > 64 and 131 > 1.5 * 66 = 99
        ((201, 134), False),  # 67 > 64 but 201 = 1.5 * 134: not above
        ((202, 134), True),  # 202 > 201
        ((70, 0), True),
        ((64, 0), False),
    ],
)
def test_imbalance_overrides_the_prefix(loads: tuple[int, int], imbalanced: bool) -> None:
    r = router()
    choice = r.route(req((*PREFIX, 99)), views(*loads))
    assert choice == (1 if imbalanced else 0)
    assert r.decisions["imbalance" if imbalanced else "prefix"] == 1


def test_balance_thresholds_are_parameters() -> None:
    r = router("cache_aware:balance_abs=8,balance_rel=1.2")
    assert r.route(req(PREFIX), views(13, 4)) == 1  # 9 > 8 and 13 > 4.8
    r = router("cache_aware:balance_abs=8,balance_rel=4")
    assert r.route(req(PREFIX), views(13, 4)) == 0  # 13 is not above 16


def test_imbalance_picks_fewest_requests_even_against_tokens() -> None:
    r = router(n=3)
    loads = [View(0, 200), View(90_000, 10), View(10, 11)]
    assert r.route(req(PREFIX), loads) == 1


# ----- the fallback -------------------------------------------------------------------------------
def test_fallback_least_load_reads_tokens() -> None:
    r = router(n=3)
    assert r.route(req((500, 501)), [View(900, 1), View(10, 5), View(500, 0)]) == 1
    assert r.decisions["fallback"] == 1


def test_fallback_smallest_tree_is_sglangs_choice() -> None:
    r = router("cache_aware:fallback=smallest_tree", n=3)
    r.trees.insert(1, (200, 201))
    # Instance 2's tree is empty: it wins even though it is the most loaded.
    assert r.route(req((500, 501, 502)), views(0, 0, 9)) == 2
    # Now 2 holds 3 blocks, 1 holds 2, 0 holds 10: instance 1.
    assert r.route(req((600,)), views(0, 0, 9)) == 1


def test_every_routed_request_is_recorded_in_the_chosen_tree() -> None:
    r = router(n=2, held=())
    r.route(req((1, 2, 3)), views(0, 0))  # fallback → 0
    assert r.route(req((1, 2, 3, 4)), views(40, 0)) == 0  # 3/4 held by 0: prefix
    assert r.trees.size(0) == 4
    r.route(req((9, 9)), views(200, 10))  # imbalanced → 1, still recorded
    assert r.trees.size(1) == 2


# ----- the approximate trees ----------------------------------------------------------------------
def test_trees_prune_least_recently_routed_leaves_first() -> None:
    trees = ApproxPrefixTrees(1, max_blocks=5)
    trees.insert(0, (1, 2, 3))
    trees.insert(0, (7, 8))
    trees.insert(0, (1, 2, 4))  # 6 nodes: the oldest leaf (block 3 under 1, 2) goes
    assert trees.size(0) == 5
    assert trees.match_lengths(trees.known_path((1, 2, 3))) == [2]
    assert trees.match_lengths(trees.known_path((7, 8))) == [2]
    trees.insert(0, (9,))  # next oldest leaf: 8
    assert trees.match_lengths(trees.known_path((7, 8))) == [1]
    assert trees.n_pruned == 2


def test_a_path_longer_than_the_bound_keeps_its_head() -> None:
    trees = ApproxPrefixTrees(1, max_blocks=3)
    trees.insert(0, tuple(range(10)))
    assert trees.match_lengths(trees.known_path(tuple(range(10)))) == [3]


def test_same_block_id_under_different_parents_is_a_different_node() -> None:
    trees = ApproxPrefixTrees(2, max_blocks=100)
    trees.insert(0, (1, 5))
    trees.insert(1, (2, 5))  # raw ids: block 5 repeats under another parent
    assert trees.match_lengths(trees.known_path((1, 5))) == [2, 0]
    assert trees.match_lengths(trees.known_path((2, 5))) == [0, 2]
    assert trees.n_nodes() == 4


class BruteForceTrees:
    """Reference: per instance, an LRU of whole prefix tuples (no shared trie)."""

    def __init__(self, n: int, max_blocks: int) -> None:
        self.max_blocks = max_blocks
        self.held: list[OrderedDict[tuple[int, ...], None]] = [OrderedDict() for _ in range(n)]

    def insert(self, instance: int, blocks: tuple[int, ...]) -> None:
        held = self.held[instance]
        for depth in range(len(blocks), 0, -1):
            prefix = blocks[:depth]
            held.pop(prefix, None)
            held[prefix] = None
        while len(held) > self.max_blocks:
            held.popitem(last=False)

    def match(self, blocks: tuple[int, ...]) -> list[int]:
        out = []
        for held in self.held:
            depth = 0
            while depth < len(blocks) and blocks[: depth + 1] in held:
                depth += 1
            out.append(depth)
        return out


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(1, 4),
    max_blocks=st.integers(1, 12),
    ops=st.lists(
        st.tuples(
            st.integers(0, 3), st.lists(st.integers(0, 3), min_size=0, max_size=6).map(tuple)
        ),
        min_size=1,
        max_size=60,
    ),
)
def test_trees_match_a_brute_force_reference(
    n: int, max_blocks: int, ops: list[tuple[int, tuple[int, ...]]]
) -> None:
    trees, reference = ApproxPrefixTrees(n, max_blocks), BruteForceTrees(n, max_blocks)
    for raw_instance, blocks in ops:
        instance = raw_instance % n
        assert trees.match_lengths(trees.known_path(blocks)) == reference.match(blocks)
        trees.insert(instance, blocks)
        reference.insert(instance, blocks)
        assert [trees.size(i) for i in range(n)] == [len(h) for h in reference.held]
    # The shared trie holds exactly the nodes some instance holds.
    assert trees.n_nodes() == len({p for held in reference.held for p in held})
