"""WorkloadAware (``policies/workload_aware.py``) on queues of slots: one LRU queue per request
category, a ghost FIFO, and per-category reuse counts.

Queues as in ``_queues`` (columns of ``nodes``, ``cls[slot]`` = the slot's queue): column
``Q_WA_GHOST`` is the ghost FIFO (the Python ``_ghost``, oldest first), column
``Q_WA_FIRST + c`` the LRU queue of category ``c`` (the Python ``_lru[category]``, LRU first).
Categories are dense indices the driver assigns in first-seen order (``engine``; the Python
policy keys its dicts by ``RequestContext.category`` itself); which index a category gets does
not matter, since the victim is the least ``(estimate, seq)`` over the categories and every
block's ``seq`` is unique. Per slot: ``links[0]`` = ``seq`` (the access tick of its last
access), ``links[1]`` = its category (resident or ghost). Per category ``c``:
``fs[F_COUNTS + 2c]`` = trials, ``fs[F_COUNTS + 2c + 1]`` = reuses (floats, halved every
``st[S_PERIOD]`` accesses as the Python dicts are). The access clock is ``st[S_SEQ]``.

Ghost and resident slots are kept by the sweep (``cls`` non-zero, ``_slots``). Not cached on
its own: only the entry points of ``_kernels`` are (see there).
"""

# ruff: noqa: PLR0917  (numba kernels take their state arrays positionally)

from __future__ import annotations

from numba import njit

from simulator.kvcache.compiled._layout import (
    COUNT,
    F64,
    HEAD,
    I64,
    N_FLOAT,
    S_PERIOD,
    S_SEQ,
    U8,
)
from simulator.kvcache.compiled._queues import q_pop, q_push, q_take

Q_WA_GHOST = 1  # the ghost FIFO's column of ``nodes``
Q_WA_FIRST = 2  # category c's LRU queue is column Q_WA_FIRST + c
F_COUNTS = N_FLOAT  # category c's trials at fs[F_COUNTS + 2c], its reuses just after


@njit()
def workload_replay(
    xs: I64, lo: int, hi: int, deepest_first: bool, size: int, category: int, res: U8,
    nxt: I64, prv: I64, cls: I64, nodes: I64, links: I64, st: I64, fs: F64,
) -> int:  # fmt: skip
    """``WorkloadAware.access`` for every block of α (slots ``xs``), all under ``category``;
    returns the resident count after."""
    period = st[S_PERIOD]
    clock = st[S_SEQ]
    for step in range(hi - lo):
        x = xs[hi - lo - 1 - step if deepest_first else step]
        clock += 1
        q = cls[x]
        if res[x] or q == Q_WA_GHOST:  # resident (remove) or a ghost (ghost.pop): a reuse
            fs[F_COUNTS + 2 * links[1, x] + 1] += 1.0
            q_take(nodes, x, nxt, prv, cls)
        fs[F_COUNTS + 2 * category] += 1.0
        links[1, x] = category
        links[0, x] = clock
        q_push(nodes, Q_WA_FIRST + category, x, nxt, prv, cls)
        if not res[x]:
            res[x] = 1
            size += 1
        if clock % period == 0:
            for i in range(F_COUNTS, fs.shape[0]):
                fs[i] = fs[i] / 2
    st[S_SEQ] = clock
    return size


@njit()
def workload_evict(
    k: int, pin: bool, cur: int, size: int, capacity: int, res: U8, nxt: I64, prv: I64,
    cls: I64, nodes: I64, links: I64, stamp: I64, fs: F64,
) -> tuple[int, int]:  # fmt: skip
    """``evict_n(k, pinned)`` (the default loop of ``WorkloadAware.evict``): per victim, the
    least (estimate, seq) over the first unpinned block of every category's queue; it goes to
    the ghost FIFO, whose oldest id is dropped past ``capacity``. Returns (freed, of which in
    α), freed -1 where the Python policy raises (every resident block pinned)."""
    got = inside = 0
    while got < k and size - got > 0:
        victim = 0
        best_p = 0.0
        best_seq = 0
        for q in range(Q_WA_FIRST, nodes.shape[1]):
            x = nodes[HEAD, q]
            while x and pin and stamp[x] == cur:
                x = nxt[x]
            if not x:
                continue
            c = q - Q_WA_FIRST
            p = (fs[F_COUNTS + 2 * c + 1] + 1.0) / (fs[F_COUNTS + 2 * c] + 2.0)
            seq = links[0, x]
            if not victim or p < best_p or (p == best_p and seq < best_seq):
                victim, best_p, best_seq = x, p, seq
        if not victim:
            return -1, inside
        q_take(nodes, victim, nxt, prv, cls)
        res[victim] = 0
        q_push(nodes, Q_WA_GHOST, victim, nxt, prv, cls)
        if nodes[COUNT, Q_WA_GHOST] > capacity:
            q_pop(nodes, Q_WA_GHOST, nxt, prv, cls)
        got += 1
        inside += stamp[victim] == cur
    return got, inside
