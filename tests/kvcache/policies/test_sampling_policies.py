"""RandomCompute and partial-node RandomCompute: scores, sampling, node-tail eviction."""

from __future__ import annotations

import numpy as np
import pytest
from policy_harness import random_prefix_trace, serve_single

from simulator.kvcache.policies.partial_node import EvictionMode, PartialNodeRandomCompute
from simulator.kvcache.policies.random_compute import RandomCompute, ResidentSample
from simulator.kvcache.replay import replay


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def test_resident_sample_swap_remove_and_pinned_draws() -> None:
    sample = ResidentSample()
    for block in (4, 5, 6):
        sample.add(block)
    sample.discard(4)
    assert 4 not in sample
    assert len(sample) == 2
    drawn = sample.draw_unpinned(rng(), 50, {5})
    assert drawn
    assert set(drawn) == {6}
    assert sample.draw_unpinned(rng(), 5, {5, 6}) == []


def test_random_compute_score_is_cost_over_age() -> None:
    policy = RandomCompute(4, rng=rng())
    policy.access(1, 3.0, 0)  # tick 1
    policy.access(1, 3.0, 0)  # tick 2: a repeat does not raise the score (no frequency term)
    policy.access(2, 1.0, 0)  # tick 3
    assert policy.score(1) == pytest.approx(3.0 / (3 - 2 + 1))
    assert policy.score(2) == pytest.approx(1.0)


def test_random_compute_stamps_a_request_with_its_end_time() -> None:
    # PrefixSim stamps every block of a request with n_req + n: the root and the tail of one
    # request have the same age, so the cheaper (shallower, under a position cost) leaves first.
    policy = RandomCompute(8, rng=rng(), n_sample=256)
    policy.access_request([1, 2, 3], [1.0, 2.0, 3.0], None, deepest_first=True)
    policy.access_request([4], [10.0], None, deepest_first=True)
    assert {policy.score(b) * 2 for b in (1, 2, 3)} == {1.0, 2.0, 3.0}  # age 2 for all three
    assert policy.score(4) == 10.0
    assert policy.evict_n(1, set()) == [1]  # per-block stamps would have kept 1 (newest)


def test_random_compute_evicts_lowest_score_among_its_sample() -> None:
    policy = RandomCompute(3, rng=rng(), n_sample=64)  # 64 draws cover 3 blocks surely
    serve_single(policy, [1, 2, 1, 3], costs=[1.0, 1.0, 1.0, 5.0])
    # scores at tick 4: 1 -> 1/2, 2 -> 1/3, 3 -> 5/1
    assert policy.evict(set()) == [2]
    assert policy.evict({1}) == [3]


def test_random_compute_is_deterministic_for_a_seed() -> None:
    trace = random_prefix_trace(2, 300)
    runs = [replay(trace, RandomCompute(10, rng=rng(7))) for _ in range(2)]
    assert runs[0] == runs[1]
    assert runs[0].n_unexpected_eviction == 0


def _two_nodes(mode: EvictionMode = "drain", micro_batch: int = 64) -> PartialNodeRandomCompute:
    policy = PartialNodeRandomCompute(8, rng=rng(), eviction_mode=mode, micro_batch=micro_batch)
    for path in ([1, 2, 3, 4], [1, 2, 5, 6]):
        policy.record_request(path)
        for block in reversed(path):
            policy.access(block, 1.0, 0)
    return policy


def test_partial_node_scores_nodes_and_trims_the_deep_end() -> None:
    policy = _two_nodes()
    # Node A = [1..4] (2 requests, last tick 8) scores 2/1; node B = [5, 6] scores 1/3.
    assert policy.evict_n(1, set()) == [6]
    # B now holds only 5 (score 1/3); drain takes 5, then a fresh sample picks A's tail.
    assert policy.evict_n(3, set()) == [5, 4, 3]
    assert [policy.find(b) for b in (1, 2, 3)] == [True, True, False]


def test_partial_node_micro_batches_resample_between_chunks() -> None:
    drain = _two_nodes("drain")
    micro = _two_nodes("micro", micro_batch=1)
    assert drain.evict_n(3, set()) == micro.evict_n(3, set()) == [6, 5, 4]


def test_partial_node_skips_pinned_tail_blocks() -> None:
    policy = _two_nodes()
    assert policy.evict_n(3, {6, 4}) == [5, 3, 2]


def test_partial_node_rejects_unknown_mode() -> None:
    with pytest.raises(ValueError, match="eviction_mode"):
        PartialNodeRandomCompute(8, rng=rng(), eviction_mode="bulk")  # type: ignore[arg-type]


@pytest.mark.parametrize("mode", ["drain", "micro"])
def test_partial_node_through_the_serve_loop(mode: EvictionMode) -> None:
    trace = random_prefix_trace(5, 400)
    policy = PartialNodeRandomCompute(16, rng=rng(), eviction_mode=mode, micro_batch=2)
    result = replay(trace, policy)
    assert result.n_unexpected_eviction == 0
    assert result.n_self_eviction == 0
    assert 0.0 < result.block_hit_ratio < 1.0
