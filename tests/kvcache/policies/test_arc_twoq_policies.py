"""ARC and 2Q: hand-traced victims, ghost lists that never hit, ARC's adaptive target."""

from __future__ import annotations

import numpy as np
from policy_harness import serve_single

from simulator.kvcache.policies.arc import Arc
from simulator.kvcache.policies.twoq import TwoQ


def rng() -> np.random.Generator:
    return np.random.default_rng(0)


def test_arc_ghost_is_not_a_hit() -> None:
    arc = Arc(2, rng=rng())
    misses, victims = serve_single(arc, [1, 1, 2, 3])
    assert victims == [[], [], [], [2]]  # T1 = [2] is over p = 0, T2 = [1] stays
    assert misses == 3
    assert not arc.find(2)  # 2 is in ghost list B1 only
    assert len(arc) == 2


def test_arc_adapts_p_on_ghost_hits() -> None:
    arc = Arc(2, rng=rng())
    serve_single(arc, [1, 1, 2, 3])  # T2 = [1], T1 = [3], B1 = [2], p = 0
    ps = []
    all_victims = []
    for block in (2, 3, 1):
        _, victims = serve_single(arc, [block])
        all_victims += victims
        ps.append(arc.p)
    # 2 (B1 hit): evict T1's 3 first, then p += max(|B2|/|B1|, 1) = 1.
    # 3 (B1 hit): T1 empty -> evict T2's LRU 1 into B2; p += max(1/1, 1) -> 2.
    # 1 (B2 hit): evict T2's LRU 2; p -= max(|B1|/|B2|, 1) = 1 -> 1.
    assert all_victims == [[3], [1], [2]]
    assert ps == [1.0, 2.0, 1.0]
    assert arc.find(1)
    assert arc.find(3)


def test_arc_directory_stays_within_2c() -> None:
    arc = Arc(3, rng=rng())
    serve_single(arc, [1, 2, 1, 3, 4, 5, 6, 2, 7, 8, 1, 9, 10, 4, 11])
    ghosts = len(arc._b1) + len(arc._b2)
    assert len(arc) == 3
    assert len(arc._t1) + len(arc._b1) <= 3
    assert len(arc) + ghosts <= 6


def test_arc_skips_pinned_blocks() -> None:
    arc = Arc(3, rng=rng())
    serve_single(arc, [1, 2, 3])
    assert arc.evict({1}) == [2]
    assert arc.find(1)


def test_twoq_scan_does_not_flush_am() -> None:
    q = TwoQ(4, rng=rng())  # Kin = 1, Kout = 2
    _, victims = serve_single(q, [1, 2, 3, 4, 5, 1, 6, 1, 7, 2, 8, 9])
    # 1 comes back from A1out into Am and survives the scan 6..9; A1out forgot 2 (Kout = 2).
    assert victims == [[], [], [], [], [1], [2], [3], [], [4], [5], [6], [7]]
    assert q.find(1)
    assert [q.find(b) for b in (2, 8, 9)] == [True, True, True]


def test_twoq_evicts_am_when_a1in_is_small() -> None:
    q = TwoQ(4, rng=rng())
    serve_single(q, [1, 2, 3, 4, 5, 1, 2])  # Am = [1, 2], A1in = [4, 5]... then shrink
    q.evict(set())  # A1in has 2 > Kin = 1: evicts from A1in
    assert not q.find(4)
    assert q.evict(set()) == [1]  # A1in = [5] is within Kin: Am's LRU goes
    assert not q.find(1)
    assert q.find(2)
