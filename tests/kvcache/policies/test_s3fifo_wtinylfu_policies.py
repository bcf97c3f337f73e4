"""S3-FIFO and W-TinyLFU: hand-traced queue movements, sketch behaviour, frequency duels."""

from __future__ import annotations

import numpy as np
import pytest
from policy_harness import serve_single

from simulator.kvcache.policies.lru import LRU
from simulator.kvcache.policies.s3fifo import S3Fifo
from simulator.kvcache.policies.wtinylfu import CountMinSketch, WTinyLfu


def rng() -> np.random.Generator:
    return np.random.default_rng(0)


def test_s3fifo_one_hit_wonders_leave_through_small_queue() -> None:
    s3 = S3Fifo(10, rng=rng())  # small target 1, ghost of 9
    seq = [*range(1, 11), 2, 11, 12]
    _, victims = serve_single(s3, seq)
    # 1 was never hit: it leaves from small into the ghost. 2 was hit: promoted to main,
    # so 12's eviction takes the next one-hit wonder, 3.
    assert victims[-2:] == [[1], [3]]
    assert s3.find(2)
    assert not s3.find(1)
    assert not s3.find(3)
    assert 2 in s3._main
    assert 1 in s3._ghost


def test_s3fifo_ghost_hit_goes_to_main_and_main_reinserts() -> None:
    s3 = S3Fifo(10, rng=rng())
    serve_single(s3, [*range(1, 11), 2, 11, 12, 1])  # 1 is in the ghost: enters main
    assert list(s3._main) == [2, 1]
    serve_single(s3, [2])  # freq(2) = 1 in main
    small = set(s3._small)
    # With every small block pinned, main evicts: 2 (freq 1) is reinserted with freq 0, 1 goes.
    assert s3.evict(small) == [1]
    assert s3._main == {2: 0}
    assert not s3.find(1)


def test_s3fifo_pinned_small_tail_is_reinserted_not_evicted() -> None:
    s3 = S3Fifo(10, rng=rng())
    serve_single(s3, list(range(1, 11)))
    assert s3.evict({1, 2}) == [3]
    assert list(s3._small)[-2:] == [1, 2]  # rotated to the head, order kept
    assert s3.find(1)
    assert s3.find(2)


def test_s3fifo_frequency_is_capped_at_three() -> None:
    s3 = S3Fifo(10, rng=rng())
    serve_single(s3, [5] * 10)
    assert s3._small[5] == 3


def test_s3fifo_rejects_bad_ratio() -> None:
    with pytest.raises(ValueError, match="small_ratio"):
        S3Fifo(10, rng=rng(), small_ratio=1.5)


def test_sketch_doorkeeper_counts_and_halving() -> None:
    sketch = CountMinSketch(64, 4, period=10, doorkeeper=True)
    for _ in range(5):
        sketch.record(7)
    assert sketch.estimate(7) == 5  # 1 in the doorkeeper + 4 in the rows
    assert sketch.estimate(8) == 0
    for _ in range(5):
        sketch.record(9)  # the 10th record halves everything and clears the doorkeeper
    assert sketch.estimate(7) == 2
    assert sketch.estimate(9) == 2  # rows held 4, halved to 2; the doorkeeper was cleared
    saturating = CountMinSketch(64, 4, period=10**6, doorkeeper=False)
    for _ in range(40):
        saturating.record(11)
    assert saturating.estimate(11) == 15  # 4-bit counters


def test_wtinylfu_candidate_loses_then_wins_duel() -> None:
    w = WTinyLfu(4, rng=rng(), window_ratio=0.25)  # window 1, main 3, protected 2
    _, victims = serve_single(w, [1, 2, 3, 4, 1, 1])
    assert victims == [[]] * 6
    assert list(w._window) == [4]
    assert list(w._probation) == [2, 3]
    assert list(w._protected) == [1]
    _, victims = serve_single(w, [5])
    assert victims == [[4]]  # candidate 4 (estimate 1) ties probation's 2 (1): 4 goes
    _, victims = serve_single(w, [5, 5, 6])
    assert victims == [[], [], [2]]  # candidate 5 (estimate 3) beats 2: 5 enters main
    assert list(w._window) == [6]
    assert list(w._probation) == [3, 5]


def test_wtinylfu_never_refuses_the_requested_block() -> None:
    w = WTinyLfu(3, rng=rng())
    serve_single(w, [1, 1, 1, 2, 2, 2])
    for block in (3, 4, 5, 6):
        serve_single(w, [block])
        assert w.find(block)
    assert w.find(1)
    assert w.find(2)


def test_wtinylfu_beats_lru_on_frequency_skewed_trace() -> None:
    gen = np.random.default_rng(3)
    hot = gen.zipf(1.3, size=4000) % 200
    scan = np.arange(1000, 1000 + 4000)
    seq = [int(b) for pair in zip(hot, scan, strict=True) for b in pair]
    lru_misses, _ = serve_single(LRU(50, rng=rng()), seq)
    w_misses, _ = serve_single(WTinyLfu(50, rng=rng()), seq)
    assert w_misses < lru_misses - 400
