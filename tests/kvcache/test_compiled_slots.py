"""The compiled core's slots (``simulator.kvcache.compiled._slots``): any int64 block id, state
bounded by what the policy remembers, results unchanged.

Ids are mapped to slots by a hash table and slots are recycled between requests, so the same
trace must give the Python loop's result whether its ids are dense, sparse (2⁴⁰ apart), near
2⁶² or negative, and whether the arrays start large or grow (and recycle) in the middle of a
chunk; and a long trace of mostly new blocks must keep ``slot_space`` near the cache size
while its ids run far beyond it.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from kvcache_helpers import as_requests
from test_compiled_differential import SPECS, _both, _feed, _served_future

from simulator.kvcache.compiled import COMPILED, CompiledReplay
from simulator.kvcache.policies import make_policy
from simulator.kvcache.replay import replay
from simulator.workload.chunks import chunk_requests
from simulator.workload.request import TraceRequest

#: Ways to spell a small id as an int64 block id; each keeps distinct ids distinct and (except
#: the negative one, which reverses it) their order, on which Belady breaks ties.
ID_MAPS = {
    "dense": lambda i: i,
    "sparse": lambda i: i * (1 << 40) + 7,
    "near_2_62": lambda i: (1 << 62) + i,
    "negative": lambda i: -(1 << 63) + 3 * i,
}


@settings(max_examples=400, deadline=None)
@given(
    lists=st.lists(st.lists(st.integers(0, 40), max_size=9), max_size=60),
    spec=st.sampled_from(SPECS),
    sizes=st.tuples(st.integers(1, 12), st.integers(1, 60), st.sampled_from([4, 8, 16, 1024])),
    ids=st.sampled_from(sorted(ID_MAPS)),
    flags=st.tuples(st.booleans(), st.booleans(), st.booleans()),
)
def test_compiled_equals_python_on_any_int64_ids(
    lists: list[list[int]],
    spec: tuple[str, dict[str, Any]],
    sizes: tuple[int, int, int],
    ids: str,
    flags: tuple[bool, bool, bool],
) -> None:
    """``sizes``: (capacity, chunk blocks, initial slots); with few slots the arrays grow and
    slots are swept and reused mid-chunk. ``flags``: (pin, deepest-first, stop at a miss)."""
    capacity, chunk_blocks, slots = sizes
    pin, deep, stop = flags
    spell = ID_MAPS[ids]
    trace = as_requests([[spell(i) for i in request] for request in lists])
    expected, got = _both(
        trace,
        spec,
        capacity,
        chunk_blocks=chunk_blocks,
        pin=pin,
        deep=deep,
        stop=stop,
        slots=slots,
    )
    assert got == expected


def test_growth_mid_chunk_resumes_at_the_right_request() -> None:
    """Request 1 finds too few slots: the arrays grow and the same chunk goes on from it; the
    skipped request after it is still reported by its own index."""
    ids = [(1 << 62) - 1 - 3 * i for i in range(20)]
    trace = as_requests([ids[:2], ids[2:6], ids[6:12], ids[:3]])
    run = CompiledReplay("lru", 4, slots=4)
    (chunk,) = chunk_requests(trace)
    run.feed(chunk)
    assert run.slot_space > 3
    expected = replay(trace, make_policy("lru", 4))
    assert run.result() == expected
    assert expected.n_req_skipped == 1
    assert "the first is request 2 with 6 blocks" in expected.warnings[0]


def _churn(n_requests: int, seed: int) -> list[TraceRequest]:
    """Requests of a few hot blocks (a shared prefix) then new blocks never seen again, with
    sparse ids (2⁴⁰ + 1 apart): many distinct blocks, a small working set."""
    rng = np.random.default_rng(seed)
    fresh = 1000
    lists = []
    for _ in range(n_requests):
        hot = list(range(1 + int(rng.integers(0, 3)) * 10, 1 + int(rng.integers(4, 14))))
        new = int(rng.integers(1, 8))
        lists.append([i * ((1 << 40) + 1) for i in [*hot, *range(fresh, fresh + new)]])
        fresh += new
    return as_requests(lists)


def _ghosts(name: str, capacity: int) -> int:
    """How many non-resident blocks the policy remembers at most (its ghost queues)."""
    policy = make_policy(name, capacity)
    if name == "s3fifo":
        return int(policy.ghost_capacity)
    if name == "s3fifod":  # a small-queue and a main-queue ghost of that capacity each
        return 2 * int(policy.ghost_capacity)
    if name == "twoq":
        return int(policy.kout)
    if name == "wtinylfu":  # the doorkeeper's ids: at most a halving period of them
        return int(policy.sketch.period)
    # ARC: |T1| + |T2| + |B1| + |B2| ≤ 2c; LIRS: at most c non-resident HIR ids;
    # workload_aware: a ghost FIFO of c ids
    return capacity if name in {"arc", "lirs", "workload_aware"} else 0


def test_slot_space_follows_the_cache_not_the_ids() -> None:
    capacity = 48
    trace = _churn(4000, seed=3)
    longest = max(len(r.block_ids) for r in trace)
    largest = max(max(r.block_ids) for r in trace)
    distinct = len({b for r in trace for b in r.block_ids})
    for name in COMPILED:
        run = CompiledReplay(name, capacity, slots=4)
        _feed(run, chunk_requests(trace, max_blocks=5000), _served_future(trace, capacity))
        assert run.result() == replay(trace, make_policy(name, capacity)), name
        # Live slots between requests ≤ resident + ghosts; the arrays double (to a power of
        # two) only when those and the next request fill over 3/4 of them (``_slots``).
        bound = 8 * (capacity + _ghosts(name, capacity) + longest) / 3 + 1
        assert run.slot_space < bound, name
    assert distinct > 15_000  # over 30× the bound on the slots
    assert largest > 2**54


def test_session_state_follows_the_live_sessions_not_the_trace() -> None:
    """The session policies keep a session only while it is in their structures (a queue,
    ghost, heap or sample, or ``_paths``), and its latest path only: 4,000 sessions of one to
    three turns through a 48-block cache leave the session table and the path pool near what
    a few capacities' worth of sessions need, from a 4-slot start."""
    capacity = 48
    turns = np.random.default_rng(5).integers(1, 4, size=4000)  # per session, in a row
    sessions = np.repeat(np.arange(4000) + (1 << 50), turns)[:4000].tolist()
    trace = [replace(r, session_id=s) for r, s in zip(_churn(4000, seed=4), sessions, strict=True)]
    longest = max(len(r.block_ids) for r in trace)
    for name in [name for name in COMPILED if name.startswith("session_")]:
        run = CompiledReplay(name, capacity, slots=4)
        _feed(run, chunk_requests(trace, max_blocks=5000), _served_future(trace, capacity))
        assert run.result() == replay(trace, make_policy(name, capacity)), name
        # live sessions: each holds a resident block of its own (its new blocks), plus as
        # many ghosts of S3-FIFO's or ARC's; their paths are at most the longest request
        sessions, pool = run._sess.shape[1], len(run._pool)
        assert sessions < 8 * (3 * capacity + 2) / 3, name
        assert pool < 8 * (3 * capacity + 1) * (longest + 2) / 3, name
