"""BeladyCompute (``policies.belady.BeladyCompute``): cost buckets of pairing heaps.

The Python policy keeps one ``KeyedHeap`` per distinct cost (its dict of buckets), each ordered
by ``(-next access, -block id)``, and per ``evict_n`` call compares the buckets' heads (the
lowest non-pinned entry of each) by ``(worth, -next access, -block id)``, worth = ``cost /
max(next - now, 1)`` (a float division, done here as there: float64 cost over an int64
distance), popping the smallest head and replacing it with its bucket's next head. Priorities
are unique (block ids are), so each bucket's head never depends on the heap's layout: here a
bucket is a pairing heap of slots (``links`` rows ``L_CHILD``, ``L_SIB``, ``L_PREV``: first
child, next sibling, and the parent of a first child or the previous sibling), its root in
``nodes[0, bucket]``. Buckets are numbered by ``engine`` in the order their costs first appear
in the cost table (``nodes[1, p]`` = the bucket of position p, ``fs[N_FLOAT + bucket]`` its
cost; a uniform model has the one bucket 0, cost 1.0); ``st[S_BUCKETS]`` counts them. Per
slot: ``prv`` = the next access, ``cls`` = the bucket (while resident).

The request clock ``now`` (``st[S_CLOCK]``, the Python ``_base + _count``) is re-synchronised
before each served request's accesses exactly as ``record_request`` does, from the stored next
accesses of α's resident blocks, and moves on by the request's length. It never goes back.

**The lazy bucket heap** (every cost ≥ 0, ``st[S_SIGNED]`` = 0). Python builds the heap of
bucket heads afresh per ``evict_n`` call, O(distinct costs) per call: with a cost per position
that was half the compiled loop's time. With a cost c ≥ 0 a block's key ``(c / max(next -
now, 1), -next, -block)`` never decreases as ``now`` moves on (the division is correctly
rounded, hence monotone), and within a bucket the root has the smallest key (its next access
is the furthest). So each bucket keeps a *stored key*, a lower bound on the key of every block
in it at the current clock and at any later one, in a binary heap of buckets that persists
across calls (``nodes`` rows ``H_HEAP``, ``H_POS``, ``H_NEXT``, ``H_BLOCK`` and the float
``keys[bucket]``; an empty bucket stores worth +inf). Inserting a block that becomes its
bucket's root lowers the stored key to the block's key if that is smaller (removals never
break the bound). ``evict_n`` refreshes the top bucket: its stored key becomes its unpinned
head's exact key at ``now``; if the bucket is still on top, that head is below every other
stored key, so below every other head's exact key, and it is the Python victim (keys are
unique: block ids are). A call thus touches the buckets it takes victims from and the few
whose bound lags, not all of them. Negative costs (no shipped model has one) break the monotony:
once one appears the engine sets ``st[S_SIGNED]`` and ``evict_n`` builds the heads' heap per
call, as Python does.
"""

# ruff: noqa: PLR0917  (numba kernels take their state arrays positionally)

from __future__ import annotations

import numpy as np
from numba import njit

from simulator.kvcache.compiled._layout import (
    F64,
    I64,
    N_FLOAT,
    S_BUCKETS,
    S_CLOCK,
    S_SIGNED,
    U8,
)
from simulator.workload.future import NEVER

L_CHILD, L_SIB, L_PREV = 0, 1, 2  # rows of ``links``
# Rows of ``nodes`` (row 0: the buckets' roots, row 1: each position's bucket) for the lazy
# bucket heap: the heap of buckets (1-based), each bucket's place in it, and the next access
# and block id of its stored key (its worth: ``keys[bucket]``).
H_HEAP, H_POS, H_NEXT, H_BLOCK = 2, 3, 4, 5

# The small helpers are inlined into their callers at numba's IR level: a call between kernels
# passes each array with a reference-count update, and with a call per block and per bucket
# that was a fifth of the loop's time (measured with Python's per-call heads heap: position
# costs 2.05 -> 2.56 M blocks/s). ``_remove`` and ``_combine`` stay calls: inlined at every
# site (six and twelve) they took the family's first compile from 5.4 to 22 s CPU for a few
# per cent.


@njit(inline="always")
def _less(a: int, b: int, prv: I64, ids: I64) -> bool:
    """Slot ``a`` before ``b`` in a bucket: (-next access, -block id) in tuple order."""
    return prv[a] > prv[b] or (prv[a] == prv[b] and ids[a] > ids[b])  # type: ignore[no-any-return]


@njit(inline="always")
def _link(a: int, b: int, prv: I64, ids: I64, links: I64) -> int:
    """Meld two pairing-heap roots (their sibling and prev links are 0); returns the root."""
    if _less(b, a, prv, ids):
        a, b = b, a
    c = links[L_CHILD, a]
    links[L_SIB, b] = c
    if c:
        links[L_PREV, c] = b
    links[L_PREV, b] = a
    links[L_CHILD, a] = b
    return a


@njit()
def _combine(first: int, prv: I64, ids: I64, links: I64) -> int:
    """Two-pass pairing of the sibling list from ``first``; returns the new root (or 0)."""
    acc = 0  # the pass-one results, last first, chained through L_SIB
    x = first
    while x:
        y = links[L_SIB, x]
        nx = links[L_SIB, y] if y else 0
        links[L_SIB, x] = 0
        links[L_PREV, x] = 0
        w = x
        if y:
            links[L_SIB, y] = 0
            links[L_PREV, y] = 0
            w = _link(x, y, prv, ids, links)
        links[L_SIB, w] = acc
        acc = w
        x = nx
    if not acc:
        return 0
    root = acc
    x = links[L_SIB, root]
    links[L_SIB, root] = 0
    while x:
        nx = links[L_SIB, x]
        links[L_SIB, x] = 0
        root = _link(root, x, prv, ids, links)
        x = nx
    return root


@njit()
def _remove(x: int, q: int, roots: I64, prv: I64, ids: I64, links: I64) -> None:
    """Take slot ``x`` out of bucket ``q``'s heap (its links end at 0)."""
    if roots[q] == x:
        roots[q] = _combine(links[L_CHILD, x], prv, ids, links)
    else:
        p = links[L_PREV, x]
        s = links[L_SIB, x]
        if links[L_CHILD, p] == x:
            links[L_CHILD, p] = s
        else:
            links[L_SIB, p] = s
        if s:
            links[L_PREV, s] = p
        h = _combine(links[L_CHILD, x], prv, ids, links)
        if h:
            roots[q] = _link(roots[q], h, prv, ids, links)
    links[L_CHILD, x] = 0
    links[L_SIB, x] = 0
    links[L_PREV, x] = 0


@njit(inline="always")
def _insert(x: int, q: int, roots: I64, prv: I64, ids: I64, links: I64) -> None:
    root = roots[q]
    roots[q] = _link(root, x, prv, ids, links) if root else x


@njit(inline="always")
def _worth(x: int, q: int, now: int, prv: I64, fs: F64) -> float:
    distance = max(prv[x] - now, 1)
    return fs[N_FLOAT + q] / distance  # type: ignore[no-any-return]


@njit(inline="always")
def _key_less(a: int, b: int, keys: F64, nodes: I64) -> bool:
    """Bucket ``a``'s stored key before bucket ``b``'s: (worth, -next, -block)."""
    if keys[a] != keys[b]:
        return keys[a] < keys[b]  # type: ignore[no-any-return]
    if nodes[H_NEXT, a] != nodes[H_NEXT, b]:
        return nodes[H_NEXT, a] > nodes[H_NEXT, b]  # type: ignore[no-any-return]
    return nodes[H_BLOCK, a] > nodes[H_BLOCK, b]  # type: ignore[no-any-return]


@njit(inline="always")
def _sift_up(q: int, keys: F64, nodes: I64) -> None:
    """Move bucket ``q`` up the bucket heap after its stored key went down."""
    i = nodes[H_POS, q]
    while i > 1:
        b = nodes[H_HEAP, i >> 1]
        if not _key_less(q, b, keys, nodes):
            break
        nodes[H_HEAP, i] = b
        nodes[H_POS, b] = i
        i >>= 1
    nodes[H_HEAP, i] = q
    nodes[H_POS, q] = i


@njit(inline="always")
def _sift_down(q: int, n: int, keys: F64, nodes: I64) -> None:
    """Move bucket ``q`` down the bucket heap (of ``n`` buckets) after its stored key rose."""
    i = nodes[H_POS, q]
    while 2 * i <= n:
        c = 2 * i
        if c < n and _key_less(nodes[H_HEAP, c + 1], nodes[H_HEAP, c], keys, nodes):
            c += 1
        b = nodes[H_HEAP, c]
        if not _key_less(b, q, keys, nodes):
            break
        nodes[H_HEAP, i] = b
        nodes[H_POS, b] = i
        i = c
    nodes[H_HEAP, i] = q
    nodes[H_POS, q] = i


@njit(inline="always")
def _bound(x: int, q: int, now: int, prv: I64, ids: I64, nodes: I64, keys: F64, fs: F64) -> None:
    """Slot ``x`` just became bucket ``q``'s root: lower the bucket's stored key to ``x``'s key
    at ``now`` (the current clock, so at most its key at any later one) if that is smaller."""
    w = _worth(x, q, now, prv, fs)
    nx = prv[x]
    if w < keys[q] or (
        w == keys[q]
        and (nx > nodes[H_NEXT, q] or (nx == nodes[H_NEXT, q] and ids[x] > nodes[H_BLOCK, q]))
    ):
        keys[q] = w
        nodes[H_NEXT, q] = nx
        nodes[H_BLOCK, q] = ids[x]
        _sift_up(q, keys, nodes)


@njit()
def bc_replay(
    slots: I64, future: I64, lo: int, hi: int, deepest_first: bool, size: int, uniform: bool,
    res: U8, prv: I64, cls: I64, links: I64, nodes: I64, ids: I64, keys: F64, st: I64,
    fs: F64,
) -> int:  # fmt: skip
    """``record_request`` then ``BeladyCompute.access`` per block (its bucket: its position's
    cost's; its priority: its next access ``future[j]``); a miss is inserted, and a block that
    becomes its bucket's root bounds the bucket's stored key (lazy heap). Returns the resident
    count after."""
    n = hi - lo
    base = st[S_CLOCK]
    for i in range(n):  # record_request: prefix order, every position
        x = slots[i]
        if res[x]:
            stored = prv[x]
            if stored != NEVER and stored - i > base:
                base = stored - i
    now = base + n  # no eviction comes before the next request's, at this clock or later
    st[S_CLOCK] = now
    lazy = not st[S_SIGNED]
    roots = nodes[0]
    for step in range(n):
        i = n - 1 - step if deepest_first else step
        x = slots[i]
        q = 0 if uniform else nodes[1, i]
        if res[x]:
            _remove(x, cls[x], roots, prv, ids, links)
        else:
            res[x] = 1
            size += 1
        prv[x] = future[lo + i]
        cls[x] = q
        _insert(x, q, roots, prv, ids, links)
        if lazy and roots[q] == x:
            _bound(x, q, now, prv, ids, nodes, keys, fs)
    return size


@njit(inline="always")
def _first(a: int, b: int, wv: F64, roots: I64, prv: I64, ids: I64) -> bool:
    """Bucket ``a``'s head before bucket ``b``'s: (worth, -next access, -block id)."""
    if wv[a] != wv[b]:
        return wv[a] < wv[b]  # type: ignore[no-any-return]
    return _less(roots[a], roots[b], prv, ids)


@njit(inline="always")
def _down(i: int, n: int, hh: I64, wv: F64, roots: I64, prv: I64, ids: I64) -> None:
    b = hh[i]
    while 2 * i <= n:
        c = 2 * i
        if c < n and _first(hh[c + 1], hh[c], wv, roots, prv, ids):
            c += 1
        if not _first(hh[c], b, wv, roots, prv, ids):
            break
        hh[i] = hh[c]
        i = c
    hh[i] = b


@njit(inline="always")
def _unpinned_head(
    q: int, pin: bool, cur: int, stashed: int, roots: I64, prv: I64, ids: I64, links: I64,
    stamp: I64, scratch: I64,
) -> int:  # fmt: skip
    """Set bucket ``q``'s pinned heads aside (``scratch[stashed:]``), as ``KeyedHeap.peek``
    pops them, so its root is its lowest unpinned block (or 0); returns the new ``stashed``."""
    while roots[q] and pin and stamp[roots[q]] == cur:
        x = roots[q]
        _remove(x, q, roots, prv, ids, links)
        scratch[stashed] = x
        stashed += 1
    return stashed


@njit(inline="always")
def _evict_lazy(
    k: int, pin: bool, cur: int, prv: I64, res: U8, links: I64, nodes: I64, ids: I64,
    stamp: I64, scratch: I64, keys: F64, st: I64, fs: F64,
) -> tuple[int, int, int]:  # fmt: skip
    """``bc_evict`` through the lazy bucket heap (module docstring): refresh the top bucket's
    stored key to its unpinned head's key at ``now`` until the top is exact, then that head is
    the victim. Returns (freed, of which in α, pinned blocks set aside in ``scratch``)."""
    nb = st[S_BUCKETS]
    now = st[S_CLOCK]
    roots = nodes[0]
    got = inside = stashed = 0
    while got < k:
        q = nodes[H_HEAP, 1]
        if keys[q] == np.inf:  # every bucket's bound is +inf: no unpinned block is left
            break
        stashed = _unpinned_head(q, pin, cur, stashed, roots, prv, ids, links, stamp, scratch)
        x = roots[q]
        if not x:
            w = np.inf
            nx = bid = 0
        else:
            w = _worth(x, q, now, prv, fs)
            nx = prv[x]
            bid = ids[x]
        if w != keys[q] or nx != nodes[H_NEXT, q] or bid != nodes[H_BLOCK, q]:
            keys[q] = w  # the bound only rises here (invariant): the exact key
            nodes[H_NEXT, q] = nx
            nodes[H_BLOCK, q] = bid
            _sift_down(q, nb, keys, nodes)
            if nodes[H_HEAP, 1] != q or not x:
                continue
        # q's head is below every other bucket's bound: the smallest head. Its bucket's next
        # root has a larger key, so the stored key stays a bound.
        _remove(x, q, roots, prv, ids, links)
        res[x] = 0
        got += 1
        inside += stamp[x] == cur
    return got, inside, stashed


@njit(inline="always")
def _evict_eager(
    k: int, pin: bool, cur: int, prv: I64, res: U8, links: I64, nodes: I64, ids: I64,
    stamp: I64, scratch: I64, st: I64, fs: F64,
) -> tuple[int, int, int]:  # fmt: skip
    """``bc_evict`` as Python does it (some cost is negative): every bucket's unpinned head
    into a binary heap by (worth, -next, -block), the smallest evicted and replaced by its
    bucket's next head. Returns (freed, of which in α, pinned blocks set aside)."""
    nb = st[S_BUCKETS]
    now = st[S_CLOCK]
    roots = nodes[0]
    wv = np.empty(nb, dtype=np.float64)
    hh = np.empty(nb + 1, dtype=np.int64)  # a binary min-heap of buckets by their heads, 1-based
    n = stashed = 0
    for q in range(nb):
        stashed = _unpinned_head(q, pin, cur, stashed, roots, prv, ids, links, stamp, scratch)
        if roots[q]:
            wv[q] = _worth(roots[q], q, now, prv, fs)
            n += 1
            hh[n] = q
    for i in range(n // 2, 0, -1):
        _down(i, n, hh, wv, roots, prv, ids)
    got = inside = 0
    while got < k and n:
        q = hh[1]
        x = roots[q]
        _remove(x, q, roots, prv, ids, links)
        res[x] = 0
        got += 1
        inside += stamp[x] == cur
        stashed = _unpinned_head(q, pin, cur, stashed, roots, prv, ids, links, stamp, scratch)
        if roots[q]:
            wv[q] = _worth(roots[q], q, now, prv, fs)
        else:
            hh[1] = hh[n]
            n -= 1
        if n:
            _down(1, n, hh, wv, roots, prv, ids)
    return got, inside, stashed


@njit()
def bc_evict(
    k: int, pin: bool, cur: int, size: int, res: U8, prv: I64, cls: I64, links: I64,
    nodes: I64, ids: I64, stamp: I64, scratch: I64, keys: F64, st: I64, fs: F64,
) -> tuple[int, int]:  # fmt: skip
    """``BeladyCompute.evict_n``: the ``k`` smallest bucket heads in turn, pinned blocks set
    aside (``KeyedHeap.peek``) and put back after. Returns (freed, of which in α), freed = -1
    where Python raises (every resident block pinned)."""
    if st[S_SIGNED]:
        got, inside, stashed = _evict_eager(k, pin, cur, prv, res, links, nodes, ids, stamp,
                                            scratch, st, fs)  # fmt: skip
    else:
        got, inside, stashed = _evict_lazy(k, pin, cur, prv, res, links, nodes, ids, stamp,
                                           scratch, keys, st, fs)  # fmt: skip
    lazy = not st[S_SIGNED]
    now = st[S_CLOCK]
    roots = nodes[0]
    for i in range(stashed):  # the pinned heads go back (they may lower their bucket's bound)
        x = scratch[i]
        q = cls[x]
        _insert(x, q, roots, prv, ids, links)
        if lazy and roots[q] == x:
            _bound(x, q, now, prv, ids, nodes, keys, fs)
    if not got and k > 0 and size:
        return -1, inside
    return got, inside
