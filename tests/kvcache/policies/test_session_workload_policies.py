"""Session-level eviction (claims, orphans, pins) and the workload-aware policy."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from policy_harness import random_prefix_trace, trace_of

from simulator.kvcache.policies.base import NEVER, RequestContext
from simulator.kvcache.policies.lru import LRU
from simulator.kvcache.policies.session import SessionBelady, SessionLru
from simulator.kvcache.policies.workload_aware import WorkloadAware
from simulator.kvcache.replay import replay


def rng() -> np.random.Generator:
    return np.random.default_rng(0)


def turn(
    policy: SessionLru | SessionBelady | WorkloadAware,
    blocks: list[int],
    *,
    session: int = -1,
    nxt: int = NEVER,
    category: int = 0,
) -> None:
    """Phases of one request without eviction (the tests call evict_n themselves)."""
    policy.set_request_ctx(
        RequestContext(
            index=0,
            timestamp_s=0.0,
            n_blocks=len(blocks),
            category=category,
            session=session,
            session_next_access=nxt,
        )
    )
    policy.record_request(blocks)
    for block in reversed(blocks):
        policy.access(block, 1.0, NEVER)


def test_session_lru_frees_only_unclaimed_blocks_of_the_oldest_session() -> None:
    policy = SessionLru(16, rng=rng())
    turn(policy, [1, 2, 3], session=1)
    turn(policy, [1, 4], session=2)
    turn(policy, [1, 2, 3, 5], session=1)  # claims the new turn before releasing the old one
    assert policy._claims == {1: 2, 2: 1, 3: 1, 4: 1, 5: 1}
    assert policy.evict_n(1, set()) == [4]  # session 2 is the LRU; block 1 is still claimed
    assert policy.find(1)


def test_session_orphans_go_first_oldest_first() -> None:
    policy = SessionLru(16, rng=rng())
    turn(policy, [1, 2, 3, 5], session=1)
    turn(policy, [9], session=2)
    turn(policy, [1, 2, 6], session=1)  # 3 and 5 dropped from the conversation
    assert policy.evict_n(1, set()) == [3]
    assert policy.evict_n(2, set()) == [5, 9]  # then the LRU session 2


def test_session_eviction_keeps_going_when_a_session_frees_nothing() -> None:
    policy = SessionLru(16, rng=rng())
    turn(policy, [1, 2], session=1)
    turn(policy, [1, 2, 3], session=2)
    turn(policy, [7], session=3)
    # Session 1 is the LRU but all its blocks are claimed by session 2; session 2 frees 1, 2
    # except the pinned 3, which becomes an orphan instead of leaving.
    assert policy.evict_n(1, {3}) == [1, 2]
    assert policy.find(3)
    assert 3 in policy._orphans


def test_session_policies_through_replay_hand_trace() -> None:
    paths = [[1, 2, 3], [1, 2, 3, 4], [10, 11], [1, 2, 3, 4, 5], [10, 11, 12], [20, 21, 22]]
    trace = trace_of(paths, sessions=[1, 1, 2, 1, 2, 3])
    for cls in (SessionLru, SessionBelady):
        result = replay(trace, cls(6, rng=rng()))
        assert result.n_self_eviction == 0
        assert result.n_unexpected_eviction == 0
        # Request 3 (session 1, 5 blocks) evicts session 2 whole; session 1 keeps its 4 hits.
        # Session_belady first picks session 1 itself (no next turn): all pinned, frees none.
        assert (result.n_block_hits, result.n_eviction) == (3 + 4, 2 + 5)


def test_session_belady_keeps_the_session_that_returns_first() -> None:
    trace = trace_of([[1, 2, 3], [10, 11, 12], [20, 21, 22], [1, 2, 3]], sessions=[1, 2, 3, 1])
    lru = replay(trace, SessionLru(6, rng=rng()))
    oracle = replay(trace, SessionBelady(6, rng=rng()))
    assert (lru.n_block_hits, oracle.n_block_hits) == (0, 3)


def test_session_belady_evicts_the_session_needed_furthest() -> None:
    policy = SessionBelady(16, rng=rng())
    turn(policy, [1, 2], session=1, nxt=10)
    turn(policy, [3, 4], session=2, nxt=5)
    turn(policy, [5], session=3, nxt=NEVER)
    assert policy.evict_n(1, set()) == [5]
    assert policy.evict_n(1, set()) == [1, 2]


def test_session_policy_warns_once_without_session_ids() -> None:
    policy = SessionLru(16, rng=rng())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        turn(policy, [1, 2])
        turn(policy, [1, 3])
    assert len(caught) == 1
    assert "session" in str(caught[0].message)
    assert policy.evict_n(1, set()) == [2]  # the first request is its own (LRU) session


def test_workload_aware_with_one_category_is_lru() -> None:
    trace = random_prefix_trace(4, 400)
    for capacity in (6, 15):
        ours = replay(trace, WorkloadAware(capacity, rng=rng()))
        lru = replay(trace, LRU(capacity, rng=rng()))
        assert (ours.n_block_hits, ours.n_eviction) == (lru.n_block_hits, lru.n_eviction)


def test_workload_aware_estimator_counts_reuse_per_category() -> None:
    policy = WorkloadAware(8, rng=rng())
    turn(policy, [1, 2], category=1)  # trials[1] = 2
    turn(policy, [1, 2], category=2)  # both reused: reuses[1] = 2, trials[2] = 2
    turn(policy, [3], category=2)  # trials[2] = 3
    assert policy.reuse_probability(1) == pytest.approx(3 / 4)
    assert policy.reuse_probability(2) == pytest.approx(1 / 5)
    assert policy.reuse_probability(7) == 0.5


def test_workload_aware_evicts_the_low_reuse_category_first() -> None:
    policy = WorkloadAware(8, rng=rng())
    turn(policy, [1], category=1)
    turn(policy, [1], category=1)  # category 1: 1 reuse in 2 trials
    turn(policy, [5], category=2)
    turn(policy, [6], category=2)  # category 2: 0 reuses in 2 trials
    turn(policy, [7], category=1)
    # LRU would evict 5; category 2 has the lower estimate, and within it 5 is the oldest.
    assert policy.evict_n(2, set()) == [5, 6]
    assert policy.evict_n(1, {1}) == [7]


def test_workload_aware_ghost_still_counts_reuse_after_eviction() -> None:
    policy = WorkloadAware(2, rng=rng())
    turn(policy, [1], category=3)
    assert policy.evict_n(1, set()) == [1]
    turn(policy, [1], category=4)
    assert policy.reuse_probability(3) == pytest.approx(2 / 3)
