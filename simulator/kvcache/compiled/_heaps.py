"""Priority kernels: GDSF (``policies.gdsf``), Belady (``policies.belady.Belady``) and
AsymCache (``policies.asym_cache``) over an indexed binary min-heap of slots.

The Python policy keeps a ``KeyedHeap`` with lazy deletion (superseded entries stay until they
surface). Its priorities ``(H, access sequence number)`` are unique, so which block is the
minimum never depends on the heap's layout: an indexed heap (each slot knows its position and
is re-sifted in place when its priority changes) evicts the same blocks in the same order
without stale entries. Per slot: ``keys`` = H (float64, computed with the same float operations
as Python, so ties and orders agree bit for bit), ``prv`` = the sequence number, ``nxt`` = the
position in ``heap`` (1-based; the heap's size is ``st[S_HEAP_N]``), ``cls`` = the frequency
(accesses since insertion, forgotten on eviction).

The ``*_replay`` kernels serve one request, blocks ``lo:hi`` of the chunk (``slots[j - lo]``
is block j's slot, from ``_kernels._probe``).

AsymCache orders as GDSF does, by (key, sequence number), its key ``log2 cost + t / half_life``
(``keys``), with ``t`` the request's timestamp: the caller passes ``t / half_life`` per request
and ``log2 cost`` per position, both computed by NumPy/Python as the policy computes them; its
evictions move GDSF's L (``fs[F_POLICY]``), which it never reads.

Belady (``oracle``) orders by ``(-next access, -block id)`` instead: ``prv`` holds the block's
next access (from the annotation the caller passes with each chunk) and the block id
(``ids[slot]``, ``_slots``) breaks ties, so the furthest next access, then the largest id,
leaves first; ``keys`` and ``cls`` are unused.
"""

# ruff: noqa: PLR0917  (numba kernels take their state arrays positionally)

from __future__ import annotations

from numba import njit

from simulator.kvcache.compiled._layout import F64, F_POLICY, I64, S_HEAP_N, S_SEQ, U8


@njit(inline="always")
def _before(a: int, b: int, keys: F64, seq: I64, ids: I64, oracle: bool) -> bool:
    """Whether slot ``a``'s priority is below slot ``b``'s (tuple order): GDSF's (H, seq), or
    with ``oracle`` Belady's (-next access, -block id), ``seq`` then holding the next access."""
    if oracle:
        return seq[a] > seq[b] or (seq[a] == seq[b] and ids[a] > ids[b])  # type: ignore[no-any-return]
    return keys[a] < keys[b] or (keys[a] == keys[b] and seq[a] < seq[b])  # type: ignore[no-any-return]


@njit()
def _sift(i: int, n: int, heap: I64, pos: I64, keys: F64, seq: I64, ids: I64, oracle: bool) -> None:
    """Restore the heap order around position ``i`` (its slot's priority changed).

    Down, bottom-up (Floyd): the hole goes to a leaf along the smaller children, one
    comparison a level, and ``x`` climbs back from there (a raised priority, as GDSF's and
    AsymCache's accesses give, mostly belongs near the leaves: measured 2.2× the classic sift's
    serve loop for them, 1.5× for Belady). Priorities are unique, so the layout never changes
    which slot is the minimum, only how fast it is found."""
    x = heap[i]
    start = 1  # x climbs from i to at most here: the root, or where a move down began
    if not (i > 1 and _before(x, heap[i >> 1], keys, seq, ids, oracle)):
        start = i
        while 2 * i <= n:  # the hole down to a leaf
            child = 2 * i
            if child < n and _before(heap[child + 1], heap[child], keys, seq, ids, oracle):
                child += 1
            heap[i] = heap[child]
            pos[heap[i]] = i
            i = child
    while i > start and _before(x, heap[i >> 1], keys, seq, ids, oracle):  # up
        parent = heap[i >> 1]
        heap[i] = parent
        pos[parent] = i
        i >>= 1
    heap[i] = x
    pos[x] = i


@njit()
def _heap_pop(heap: I64, pos: I64, keys: F64, seq: I64, ids: I64, oracle: bool, st: I64) -> int:
    """Remove and return the minimum slot (the heap is not empty)."""
    n = st[S_HEAP_N]
    top = heap[1]
    last = heap[n]
    n -= 1
    st[S_HEAP_N] = n
    pos[top] = 0
    if n:
        heap[1] = last
        pos[last] = 1
        _sift(1, n, heap, pos, keys, seq, ids, oracle)
    return top  # type: ignore[no-any-return]


@njit()
def _heap_push(
    x: int, heap: I64, pos: I64, keys: F64, seq: I64, ids: I64, oracle: bool, st: I64
) -> None:
    n = st[S_HEAP_N] + 1
    st[S_HEAP_N] = n
    heap[n] = x
    pos[x] = n
    _sift(n, n, heap, pos, keys, seq, ids, oracle)


@njit(inline="always")
def _place(
    x: int, res: U8, nxt: I64, prv: I64, keys: F64, heap: I64, ids: I64, oracle: bool, st: I64
) -> int:
    """Slot ``x``'s priority was just set: re-sift it if resident, else insert it (resident
    now). Returns 1 for an insertion, else 0."""
    if res[x]:
        _sift(nxt[x], st[S_HEAP_N], heap, nxt, keys, prv, ids, oracle)
        return 0
    _heap_push(x, heap, nxt, keys, prv, ids, oracle, st)
    res[x] = 1
    return 1


@njit()
def gdsf_replay(
    slots: I64, lo: int, hi: int, deepest_first: bool, size: int, use_cost: bool,
    costs: F64, res: U8, nxt: I64, prv: I64, cls: I64, keys: F64, heap: I64, ids: I64,
    st: I64, fs: F64,
) -> int:  # fmt: skip
    """``Gdsf.access`` per block: one more access, ``H = L + freq × weight`` (weight 1, or the
    position's cost for ``gdsf_compute``: ``use_cost`` with a non-uniform ``costs`` table),
    sequence number as the tie-break; a miss is inserted. Returns the resident count."""
    for step in range(hi - lo):
        j = hi - 1 - step if deepest_first else lo + step
        x = slots[j - lo]
        st[S_SEQ] += 1
        freq = cls[x] + 1
        cls[x] = freq
        weight = costs[j - lo] if use_cost else 1.0
        keys[x] = fs[F_POLICY] + freq * weight
        prv[x] = st[S_SEQ]
        size += _place(x, res, nxt, prv, keys, heap, ids, False, st)
    return size


@njit()
def asym_replay(
    slots: I64, lo: int, hi: int, deepest_first: bool, size: int, uniform: bool, stamp: float,
    logcosts: F64, res: U8, nxt: I64, prv: I64, keys: F64, heap: I64, ids: I64, st: I64,
) -> int:  # fmt: skip
    """``AsymCache.access_request``: each block's key becomes ``log2 cost + stamp`` (``stamp``
    = the request's timestamp / half_life; ``log2 cost`` 0 under a uniform model) with the next
    sequence number; a miss is inserted. Returns the resident count after."""
    for step in range(hi - lo):
        j = hi - 1 - step if deepest_first else lo + step
        x = slots[j - lo]
        st[S_SEQ] += 1
        keys[x] = (0.0 if uniform else logcosts[j - lo]) + stamp
        prv[x] = st[S_SEQ]
        size += _place(x, res, nxt, prv, keys, heap, ids, False, st)
    return size


@njit()
def belady_replay(
    slots: I64, future: I64, lo: int, hi: int, deepest_first: bool, size: int, res: U8,
    nxt: I64, prv: I64, keys: F64, heap: I64, ids: I64, st: I64,
) -> int:  # fmt: skip
    """``Belady.access`` per block: its priority becomes its next access ``future[j]``; a miss
    is inserted. Returns the resident count after."""
    for step in range(hi - lo):
        j = hi - 1 - step if deepest_first else lo + step
        x = slots[j - lo]
        prv[x] = future[j]
        size += _place(x, res, nxt, prv, keys, heap, ids, True, st)
    return size


@njit()
def heap_evict(
    k: int, oracle: bool, pin: bool, cur: int, res: U8, nxt: I64, prv: I64, cls: I64,
    keys: F64, heap: I64, scratch: I64, stamp: I64, ids: I64, st: I64, fs: F64,
) -> tuple[int, int]:  # fmt: skip
    """``Gdsf.evict_n`` / ``KeyedHeapPolicy.evict_n`` (``oracle``: Belady; AsymCache as GDSF) over
    ``KeyedHeap.pop_n``: the ``k`` lowest priorities outside α, pinned ones popped aside and
    pushed back; GDSF's L rises to the last (largest) victim's H. Returns (freed, of which in
    α), freed = -1 where Python raises (all resident blocks pinned)."""
    got = inside = stashed = 0
    resident = st[S_HEAP_N]
    last = 0.0
    while got < k and st[S_HEAP_N]:
        x = _heap_pop(heap, nxt, keys, prv, ids, oracle, st)
        if pin and stamp[x] == cur:
            scratch[stashed] = x
            stashed += 1
            continue
        res[x] = 0
        cls[x] = 0
        last = keys[x]
        got += 1
        inside += stamp[x] == cur
    for i in range(stashed):
        _heap_push(scratch[i], heap, nxt, keys, prv, ids, oracle, st)
    if not got:
        return (-1 if resident else 0), inside
    if not oracle:
        fs[F_POLICY] = max(fs[F_POLICY], last)
    return got, inside
