"""Differential tests: the real code against tiny list-based references written here.

1. The serve loop with ``lru`` against ``kvcache_helpers.reference_lru`` on random traces
   (prefix-structured and arbitrary, duplicates included), every option combination.
2. Each core policy's verbs against a list-based textbook reference, on random sequences of
   accesses and pinned evictions: same victims, same residents, step by step.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from kvcache_helpers import as_requests, random_prefix_trace, reference_lru

from simulator.kvcache.policies import make_policy
from simulator.kvcache.replay import replay

COUNTERS = ("n_req", "n_req_skipped", "n_blocks", "n_block_hits", "n_eviction", "n_self_eviction")

arbitrary_traces = st.lists(st.lists(st.integers(0, 14), max_size=9), max_size=40)


def _compare(lists: list[list[int]], capacity: int, pin: bool, deep: bool, stop: bool) -> None:
    result = replay(
        as_requests(lists),
        make_policy("lru", capacity),
        pin=pin,
        replay_order="deepest-first" if deep else "prefix-order",
        match="stop-at-first-miss" if stop else "all",
    )
    expected = reference_lru(lists, capacity, pin=pin, deepest_first=deep, stop_at_first_miss=stop)
    assert {k: getattr(result, k) for k in COUNTERS} == vars(expected)
    assert result.n_unexpected_eviction == 0
    assert result.compute_saving_ratio == result.block_hit_ratio


@settings(max_examples=300, deadline=None)
@given(
    lists=arbitrary_traces,
    capacity=st.integers(1, 10),
    pin=st.booleans(),
    deep=st.booleans(),
    stop=st.booleans(),
)
def test_lru_matches_reference_on_arbitrary_traces(
    lists: list[list[int]], capacity: int, pin: bool, deep: bool, stop: bool
) -> None:
    _compare(lists, capacity, pin, deep, stop)


@settings(max_examples=100, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    capacity=st.integers(1, 40),
    pin=st.booleans(),
    deep=st.booleans(),
    stop=st.booleans(),
)
def test_lru_matches_reference_on_prefix_traces(
    seed: int, capacity: int, pin: bool, deep: bool, stop: bool
) -> None:
    trace = random_prefix_trace(np.random.default_rng(seed), 60)
    _compare([list(r.block_ids) for r in trace], capacity, pin, deep, stop)


# --- verb-level references ---------------------------------------------------------------


class RefFIFO:
    def __init__(self) -> None:
        self.queue: list[int] = []

    def access(self, b: int) -> None:
        if b not in self.queue:
            self.queue.append(b)

    def evict(self, pinned: Collection[int]) -> int:
        victim = next(b for b in self.queue if b not in pinned)
        self.queue.remove(victim)
        return victim

    def resident(self) -> set[int]:
        return set(self.queue)


class RefLRU(RefFIFO):
    def access(self, b: int) -> None:
        if b in self.queue:
            self.queue.remove(b)
        self.queue.append(b)


class RefClock:
    """One reference bit; the hand is the front of the list, a second chance goes to the back."""

    def __init__(self) -> None:
        self.ring: list[list[int]] = []  # [block, bit]

    def access(self, b: int) -> None:
        for entry in self.ring:
            if entry[0] == b:
                entry[1] = 1
                return
        self.ring.append([b, 0])

    def evict(self, pinned: Collection[int]) -> int:
        while True:
            entry = next(e for e in self.ring if e[0] not in pinned)
            self.ring.remove(entry)
            if entry[1]:
                entry[1] = 0
                self.ring.append(entry)
            else:
                return entry[0]

    def resident(self) -> set[int]:
        return {e[0] for e in self.ring}


class RefSieve:
    """Queue index 0 = tail (oldest); the hand is a block (or None = start at the tail)."""

    def __init__(self) -> None:
        self.queue: list[int] = []
        self.visited: dict[int, int] = {}
        self.hand: int | None = None

    def access(self, b: int) -> None:
        if b in self.visited:
            self.visited[b] = 1
        else:
            self.queue.append(b)
            self.visited[b] = 0

    def evict(self, pinned: Collection[int]) -> int:
        i = 0 if self.hand is None else self.queue.index(self.hand)
        while True:
            if i == len(self.queue):
                i = 0
            b = self.queue[i]
            if b in pinned:
                i += 1
            elif self.visited[b]:
                self.visited[b] = 0
                i += 1
            else:
                del self.queue[i], self.visited[b]
                self.hand = self.queue[i] if i < len(self.queue) else None
                return b

    def resident(self) -> set[int]:
        return set(self.queue)


class RefLFU:
    """Counts since insertion; ties broken by the oldest last access."""

    def __init__(self) -> None:
        self.count: dict[int, int] = {}
        self.last: dict[int, int] = {}
        self.clock = 0

    def access(self, b: int) -> None:
        self.clock += 1
        self.count[b] = self.count.get(b, 0) + 1
        self.last[b] = self.clock

    def evict(self, pinned: Collection[int]) -> int:
        victim = min(
            (b for b in self.count if b not in pinned), key=lambda b: (self.count[b], self.last[b])
        )
        del self.count[victim], self.last[victim]
        return victim

    def resident(self) -> set[int]:
        return set(self.count)


class RefSLRU:
    def __init__(self, protected_capacity: int) -> None:
        self.probation: list[int] = []
        self.protected: list[int] = []
        self.limit = protected_capacity

    def access(self, b: int) -> None:
        if b in self.protected:
            self.protected.remove(b)
            self.protected.append(b)
        elif b in self.probation:
            self.probation.remove(b)
            self.protected.append(b)
            if len(self.protected) > self.limit:
                self.probation.append(self.protected.pop(0))
        else:
            self.probation.append(b)

    def evict(self, pinned: Collection[int]) -> int:
        for segment in (self.probation, self.protected):
            for b in segment:
                if b not in pinned:
                    segment.remove(b)
                    return b
        raise AssertionError("everything pinned")

    def resident(self) -> set[int]:
        return set(self.probation) | set(self.protected)


CAP = 6
REFERENCES: dict[str, Any] = {
    "lru": RefLRU,
    "fifo": RefFIFO,
    "clock": RefClock,
    "sieve": RefSieve,
    "lfu": RefLFU,
    "slru": lambda: RefSLRU(int(0.8 * CAP)),
}

operations = st.lists(
    st.one_of(
        st.tuples(st.just("access"), st.integers(0, 12)),
        st.tuples(st.just("evict"), st.sets(st.integers(0, 12), max_size=5)),
    ),
    max_size=80,
)


@settings(max_examples=150, deadline=None)
@given(name=st.sampled_from(sorted(REFERENCES)), ops=operations)
def test_core_policy_verbs_match_textbook_reference(name: str, ops: list[Any]) -> None:
    policy = make_policy(name, CAP)
    reference = REFERENCES[name]()
    for op, arg in ops:
        if op == "access":
            if not policy.find(arg) and len(policy) == CAP:
                continue  # the serve loop never inserts into a full cache
            policy.access(arg, 1.0, 0)
            reference.access(arg)
        else:
            resident = reference.resident()
            if not resident - arg:
                continue  # evict is only called with an unpinned resident block
            assert policy.evict(arg) == [reference.evict(arg)]
        assert {b for b in range(13) if policy.find(b)} == reference.resident()
        assert len(policy) == len(reference.resident())


@settings(max_examples=60, deadline=None)
@given(
    name=st.sampled_from(sorted(REFERENCES)),
    lists=st.lists(st.lists(st.integers(0, 12), max_size=6), max_size=12),
    deep=st.booleans(),
)
def test_access_request_equals_per_block_access(
    name: str, lists: list[list[int]], deep: bool
) -> None:
    batched = make_policy(name, 100)
    single = make_policy(name, 100)
    costs = [1.0] * 10
    for blocks in lists:
        batched.access_request(blocks, costs, None, deep)
        for b in reversed(blocks) if deep else blocks:
            single.access(b, 1.0, 0)
    drained = [batched.evict_n(1, ()) for _ in range(len(batched))]
    assert drained == [single.evict_n(1, ()) for _ in range(len(single))]
