"""Small drivers shared by the advanced-policy tests (not a test module).

``serve_single`` is demand paging with one block per request (the textbook setting in which
Belady is optimal); ``trace_of`` builds ``TraceRequest`` lists for the real serve loop.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from simulator.kvcache.policies.base import NEVER, EvictionPolicy, RequestContext
from simulator.workload.request import TraceRequest


def next_accesses(seq: Sequence[int]) -> list[int]:
    """1-based forward next-access vtime of every position of ``seq`` (``NEVER`` if none)."""
    out = [NEVER] * len(seq)
    last: dict[int, int] = {}
    for t in range(len(seq) - 1, -1, -1):
        out[t] = last.get(seq[t], NEVER)
        last[seq[t]] = t + 1
    return out


def serve_single(
    policy: EvictionPolicy, seq: Sequence[int], costs: Sequence[float] | None = None
) -> tuple[int, list[list[int]]]:
    """Serve one block per request; return (misses, victims of every request)."""
    nxt = next_accesses(seq)
    misses = 0
    victims: list[list[int]] = []
    for t, block in enumerate(seq):
        policy.set_request_ctx(RequestContext(index=t, timestamp_s=float(t), n_blocks=1))
        evicted: list[int] = []
        if not policy.find(block):
            misses += 1
            if len(policy) >= policy.capacity:
                evicted = policy.evict_n(1, {block})
        victims.append(evicted)
        policy.record_request([block])
        policy.access(block, 1.0 if costs is None else costs[t], nxt[t])
        assert len(policy) <= policy.capacity
    return misses, victims


def optimal_misses(seq: Sequence[int], capacity: int) -> int:
    """Minimum misses of demand paging over every eviction choice (exhaustive, tiny inputs)."""
    states: dict[frozenset[int], int] = {frozenset(): 0}
    for block in seq:
        nxt: dict[frozenset[int], int] = {}
        for state, misses in states.items():
            if block in state:
                options, cost = [state], 0
            elif len(state) < capacity:
                options, cost = [state | {block}], 1
            else:
                options, cost = [(state - {v}) | {block} for v in state], 1
            for option in options:
                if nxt.get(option, 1 << 30) > misses + cost:
                    nxt[option] = misses + cost
        states = nxt
    return min(states.values())


def trace_of(
    paths: Sequence[Sequence[int]],
    sessions: Sequence[int] | None = None,
    types: Sequence[int] | None = None,
) -> list[TraceRequest]:
    """``TraceRequest`` per block path (optional session ids and type ids)."""
    return [
        TraceRequest(
            index=i,
            timestamp_s=float(i),
            input_length=16 * len(path),
            output_length=1,
            block_ids=tuple(path),
            session_id=-1 if sessions is None else sessions[i],
            type_id=0 if types is None else types[i],
        )
        for i, path in enumerate(paths)
    ]


def random_prefix_trace(seed: int, n_requests: int, n_roots: int = 6) -> list[TraceRequest]:
    """Requests that share prefixes: a random root path extended by private or reused tails."""
    rng = np.random.default_rng(seed)
    paths: list[list[int]] = []
    next_id = 1
    for _ in range(n_requests):
        if paths and rng.random() < 0.6:
            base = paths[int(rng.integers(0, len(paths)))]
            keep = int(rng.integers(1, len(base) + 1))
            path = list(base[:keep])
        else:
            path = [int(rng.integers(1, n_roots + 1))]
        for _ in range(int(rng.integers(0, 4))):
            path.append(1000 + next_id)
            next_id += 1
        paths.append(path)
    return trace_of(paths)
