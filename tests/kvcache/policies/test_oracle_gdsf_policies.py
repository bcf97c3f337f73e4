"""Belady, BeladyCompute and GDSF: exact victims, optimality, and cost awareness."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from policy_harness import optimal_misses, random_prefix_trace, serve_single

from simulator.kvcache.policies.base import NEVER
from simulator.kvcache.policies.belady import Belady, BeladyCompute, KeyedHeap
from simulator.kvcache.policies.gdsf import Gdsf, GdsfCompute
from simulator.kvcache.policies.lru import LRU
from simulator.kvcache.replay import replay


def rng() -> np.random.Generator:
    return np.random.default_rng(0)


def test_keyed_heap_replaces_priorities_and_skips_pinned() -> None:
    heap = KeyedHeap()
    for item, prio in ((1, 5.0), (2, 3.0), (3, 4.0)):
        heap.set(item, (prio,))
    heap.set(2, (9.0,))  # the old (3.0,) entry is stale now
    assert heap.peek({3}) == ((5.0,), 1)
    assert [item for _, item in heap.pop_n(2, {1})] == [3, 2]
    assert len(heap) == 1
    assert 1 in heap


def test_belady_hand_trace() -> None:
    # c = 2: at 3, next(1) = 4 < next(2) = 6 -> evict 2; at the last 2, neither 1 nor 3 comes
    # back (a tie at NEVER) -> the larger id, 3.
    _, victims = serve_single(Belady(2, rng=rng()), [1, 2, 3, 1, 3, 2])
    assert victims == [[], [], [2], [], [], [3]]


def test_belady_ties_go_to_the_larger_block_id() -> None:
    _, victims = serve_single(Belady(2, rng=rng()), [5, 7, 9])  # 5 and 7 are never reused
    assert victims[-1] == [7]


@settings(max_examples=150, deadline=None)
@given(
    seq=st.lists(st.integers(1, 5), min_size=1, max_size=11),
    capacity=st.integers(1, 3),
)
def test_belady_is_optimal_for_demand_paging(seq: list[int], capacity: int) -> None:
    misses, _ = serve_single(Belady(capacity, rng=rng()), seq)
    assert misses == optimal_misses(seq, capacity)


@settings(max_examples=60, deadline=None)
@given(
    seq=st.lists(st.integers(1, 30), min_size=1, max_size=200),
    capacity=st.integers(1, 12),
)
def test_belady_never_misses_more_than_lru(seq: list[int], capacity: int) -> None:
    belady, _ = serve_single(Belady(capacity, rng=rng()), seq)
    lru, _ = serve_single(LRU(capacity, rng=rng()), seq)
    assert belady <= lru


def test_belady_beats_lru_on_prefix_traces_through_the_serve_loop() -> None:
    for seed in range(5):
        trace = random_prefix_trace(seed, 300)
        for capacity in (8, 20):
            oracle = replay(trace, Belady(capacity, rng=rng()))
            lru = replay(trace, LRU(capacity, rng=rng()))
            assert oracle.n_unexpected_eviction == 0
            assert oracle.n_block_hits >= lru.n_block_hits


def test_belady_compute_with_uniform_cost_is_belady() -> None:
    trace = random_prefix_trace(11, 400)
    a = replay(trace, Belady(12, rng=rng()))
    b = replay(trace, BeladyCompute(12, rng=rng()))
    assert (a.n_block_hits, a.n_eviction) == (b.n_block_hits, b.n_eviction)


def test_belady_compute_keeps_the_expensive_block() -> None:
    policy = BeladyCompute(2, rng=rng())
    policy.access(1, 10.0, 12)  # now = 1 after this; worth 10 / (12 - 3) later
    policy.access(2, 1.0, 5)  # worth 1 / (5 - 3)
    # Belady would evict 1 (further next access); the cost-aware rule evicts 2.
    assert policy.evict_n(1, ()) == [2]
    assert policy.find(1)


def test_belady_compute_orders_by_worth_then_next_access() -> None:
    policy = BeladyCompute(5, rng=rng())
    for block, cost, nxt in ((1, 2.0, 10), (2, 1.0, NEVER), (3, 4.0, 20), (4, 1.0, 7)):
        policy.access(block, cost, nxt)
    # now = 5: worths 2/5, ~0, 4/15, 1/2 -> 2, 3, 1, 4
    assert policy.evict_n(4, ()) == [2, 3, 1, 4]


def test_belady_compute_resynchronises_its_clock_after_skipped_requests() -> None:
    policy = BeladyCompute(4, rng=rng())
    policy.record_request([1, 2])
    policy.access(2, 1.0, 40)  # 2's next access is at vtime 40 (position 1 of a later request)
    policy.access(1, 1.0, NEVER)
    assert policy._base + policy._count == 3  # its own count: the next request starts at 3
    policy.record_request([7, 2])  # requests in between were skipped: 2 proves now >= 39
    assert policy._base == 39


def test_gdsf_inflation_ages_old_frequent_blocks() -> None:
    g = Gdsf(2, rng=rng())
    _, victims = serve_single(g, [1, 2, 1, 3, 4, 5])
    # H: 1 -> 2 (two accesses), 2 -> 1: 3 evicts 2 (L = 1); 3 gets H = 2, ties 1 (older):
    # 4 evicts 1 (L = 2); 4 gets H = 3 and 3 (H = 2) goes at 5.
    assert victims == [[], [], [], [2], [1], [3]]
    assert g._inflation == 2.0


def test_gdsf_compute_weights_by_cost() -> None:
    g = GdsfCompute(3, rng=rng())
    _, victims = serve_single(g, [1, 2, 3, 4, 5], costs=[5.0, 1.0, 2.0, 1.0, 1.0])
    # H = 5, 1, 2; 4 evicts 2 (L = 1) and gets H = 2, tying 3 (older): 5 evicts 3.
    assert victims == [[], [], [], [2], [3]]
    assert g.find(1)
