"""Partial-node kernels: PartialNodeRandomCompute and PartialNodeRandomFreq
(``policies.partial_node``).

The resident set is the dense list of ``ResidentSample``, kept as ``_random`` keeps it
(``heap[0:n]``, ``cls[slot]`` = the slot's index there, ``n`` = ``st[S_HEAP_N]``), so the draws
from the policy's own generator pick the blocks the Python policy picks. Per slot: ``keys`` =
the cost of its last access, ``links[0]`` = its node (0: none; every non-resident slot has
none). A node is a column of ``nodes``: its blocks as a list in prefix order through
``prv``/``nxt`` (0 ends it; ``N_HEAD`` the shallowest, ``N_TAIL`` the deepest), ``N_FREQ``,
``N_LAST`` and ``N_REQUEST`` (the Python ``_Node``'s ``freq``, ``last``, ``last_request``) and
``N_MARK`` (the eviction round that last drew it: the Python ``dict.fromkeys`` de-duplication).
The Python node's list may keep stale entries only after an outside ``remove``, which the serve
loop never calls, so the list here holds exactly the node's members. A node whose last block
goes is freed: its id goes back on the stack ``nodes[N_FREE, :st[S_NODE_FREE_N]]``. Each live
node holds a resident block, and a new one is made only for a request with a miss, so
``capacity + 1`` ids are enough (``engine``). The request serial compared with ``N_REQUEST`` is
``st[S_REQ]`` (served requests; the Python policy counts hook calls, equal only in order);
``st[S_SEQ]`` is the policy's clock of block accesses.
"""

# ruff: noqa: PLR0917  (numba kernels take their state arrays positionally)

from __future__ import annotations

from typing import Any

import numpy as np
from numba import njit
from numpy.typing import NDArray

from simulator.kvcache.compiled._layout import (
    F64,
    I64,
    S_HEAP_N,
    S_LIMIT,
    S_MICRO,
    S_NODE_FREE_N,
    S_REQ,
    S_ROUND,
    S_SEQ,
    U8,
)
from simulator.kvcache.compiled._random import _draw_unpinned, _drop

#: Rows of the node table ``nodes``.
N_HEAD, N_TAIL, N_FREQ, N_LAST, N_REQUEST, N_MARK, N_FREE = 0, 1, 2, 3, 4, 5, 6
N_ROWS = 7


def new_node_table(capacity: int) -> NDArray[np.int64]:
    """The node table of an empty cache: ids 1 … capacity + 1 free (1 popped first); the
    driver sets ``st[S_NODE_FREE_N]`` = capacity + 1."""
    nodes = np.zeros((N_ROWS, capacity + 2), dtype=np.int64)
    nodes[N_FREE, : capacity + 1] = np.arange(capacity + 1, 0, -1)
    return nodes


@njit()
def partial_replay(
    xs: I64, lo: int, hi: int, deepest_first: bool, size: int, uniform: bool, costs: F64,
    res: U8, nxt: I64, prv: I64, cls: I64, keys: F64, heap: I64, links: I64, nodes: I64,
    st: I64,
) -> int:  # fmt: skip
    """``record_request`` then ``access`` per block: the request's blocks not resident now
    (first occurrences, prefix order) form a new node; every access stamps its block's cost,
    makes it resident and touches its node (``freq`` once per request, ``last`` = the clock).
    Returns the resident count after."""
    request = st[S_REQ]
    clock = st[S_SEQ]
    node = 0
    for j in range(lo, hi):  # ``record_request``
        x = xs[j - lo]
        if res[x] or links[0, x]:  # resident, or already in the new node
            continue
        if node == 0:
            n_free = st[S_NODE_FREE_N] - 1
            st[S_NODE_FREE_N] = n_free
            node = nodes[N_FREE, n_free]
            nodes[N_HEAD, node] = 0
            nodes[N_TAIL, node] = 0
            nodes[N_FREQ, node] = 1
            nodes[N_LAST, node] = clock
            nodes[N_REQUEST, node] = request
        tail = nodes[N_TAIL, node]  # append x at the node's deep end
        prv[x] = tail
        nxt[x] = 0
        if tail:
            nxt[tail] = x
        else:
            nodes[N_HEAD, node] = x
        nodes[N_TAIL, node] = x
        links[0, x] = node
    n = st[S_HEAP_N]
    for step in range(hi - lo):
        j = hi - 1 - step if deepest_first else lo + step
        x = xs[j - lo]
        clock += 1
        keys[x] = 1.0 if uniform else costs[j - lo]
        if not res[x]:
            res[x] = 1
            cls[x] = n
            heap[n] = x
            n += 1
            size += 1
        node = links[0, x]
        if nodes[N_REQUEST, node] != request:
            nodes[N_FREQ, node] += 1
            nodes[N_REQUEST, node] = request
        nodes[N_LAST, node] = clock
    st[S_HEAP_N] = n
    st[S_SEQ] = clock
    return size


@njit()
def _deepest_unpinned(node: int, pin: bool, cur: int, prv: I64, stamp: I64, nodes: I64) -> int:
    """``_deepest_unpinned``: the node's deepest block outside α (with pins)."""
    x = nodes[N_TAIL, node]
    while pin and stamp[x] == cur:
        x = prv[x]
    return x  # type: ignore[no-any-return]


@njit()
def _winner(
    m: int, freq_only: bool, pin: bool, cur: int, sample: I64, prv: I64, keys: F64,
    stamp: I64, links: I64, nodes: I64, ids: I64, st: I64,
) -> int:  # fmt: skip
    """``min(nodes, key=_rank)`` over the sampled blocks' nodes in first-drawn order: the
    lowest (score, last, -deepest id), compared as Python compares the tuples."""
    st[S_ROUND] += 1
    mark = st[S_ROUND]
    clock = st[S_SEQ]
    best = 0
    best_score = 0.0
    best_last = best_id = 0
    for i in range(m):
        node = links[0, sample[i]]
        if nodes[N_MARK, node] == mark:
            continue
        nodes[N_MARK, node] = mark
        deepest = _deepest_unpinned(node, pin, cur, prv, stamp, nodes)
        freq = nodes[N_FREQ, node]
        last = nodes[N_LAST, node]
        age = clock - last + 1
        score = freq / age if freq_only else keys[deepest] * freq / age
        if best:
            if score != best_score:
                less = score < best_score
            elif last != best_last:
                less = last < best_last
            else:
                less = ids[deepest] > best_id
            if not less:
                continue
        best = node
        best_score = score
        best_last = last
        best_id = ids[deepest]
    return best


@njit()
def partial_evict(
    want: int, freq_only: bool, pin: bool, cur: int, rng: Any, res: U8, aux: U8, nxt: I64,
    prv: I64, cls: I64, keys: F64, heap: I64, scratch: I64, stamp: I64, links: I64,
    nodes: I64, ids: I64, st: I64,
) -> tuple[int, int]:  # fmt: skip
    """``PartialNodeRandomCompute.evict_n`` (``freq_only``: the Freq sibling's score). Returns
    (freed, of which in α); freed = -1 where Python raises (nothing evictable). ``scratch``
    holds a sample (at least ``n_sample`` long)."""
    got = inside = 0
    micro = st[S_MICRO]
    while got < want:
        m = _draw_unpinned(rng, st[S_LIMIT], scratch, pin, cur, False, aux, heap, stamp, st)
        if not m:
            break
        node = _winner(m, freq_only, pin, cur, scratch, prv, keys, stamp, links, nodes, ids, st)
        left = want - got
        chunk = left if micro == 0 else min(left, micro)
        taken = 0
        x = nodes[N_TAIL, node]
        while x and taken < chunk:  # ``_take_tail``: the deepest unpinned blocks
            before = prv[x]
            if not (pin and stamp[x] == cur):
                after = nxt[x]  # unlink x from the node
                if before:
                    nxt[before] = after
                else:
                    nodes[N_HEAD, node] = after
                if after:
                    prv[after] = before
                else:
                    nodes[N_TAIL, node] = before
                links[0, x] = 0
                inside += stamp[x] == cur
                _drop(x, res, aux, nxt, prv, cls, heap, st)
                taken += 1
            x = before
        got += taken
        if nodes[N_HEAD, node] == 0:  # empty: its id back on the stack
            nodes[N_FREE, st[S_NODE_FREE_N]] = node
            st[S_NODE_FREE_N] += 1
    if not got and want > 0 and st[S_HEAP_N]:
        return -1, 0
    return got, inside
