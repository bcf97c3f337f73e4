"""The compiled serve loop (numba, ``cache=True``): phases 0-3 of ``simulator.kvcache.replay``
over arrays, for LRU, FIFO, CLOCK, SIEVE, LFU and S3-FIFO.

Everything is indexed by *slot* = block id + 1; slot 0 is the sentinel of one circular doubly
linked list (``nxt``/``prv``), front = ``nxt[0]`` (oldest), back = ``prv[0]`` (newest). Per slot:
``res`` (1 = resident), ``aux`` (CLOCK's counter, SIEVE's visited bit) and ``stamp``, the serial
number of the last request that touched the block: a block is in the request being served
(α) iff ``stamp[slot] == cur``, which is how α is pinned and how self-evictions are told apart
without building a set. Scalars that live across calls sit in ``st`` (int64, indices ``S_*``)
and ``fs`` (float64 cost sums). The Python policies in ``simulator/kvcache/policies`` are the
reference; each policy section below names the Python method it mirrors, step for step.

The kernels return 0, or an error code (``E_*``) with details in ``st[S_ERR_A]``/``S_ERR_B``
for the caller to raise the same ``RuntimeError`` the Python loop raises.
"""

# ruff: noqa: PLR0917  (numba kernels take their state arrays positionally)

from __future__ import annotations

import numpy as np
from numba import njit
from numpy.typing import NDArray

I64 = NDArray[np.int64]
U8 = NDArray[np.uint8]
F64 = NDArray[np.float64]

# Policy kinds.
K_LRU, K_FIFO, K_CLOCK, K_SIEVE, K_LFU, K_S3FIFO = 0, 1, 2, 3, 4, 5

# Indices into the int64 state vector ``st``.
S_SIZE = 0  # resident blocks
S_CUR = 1  # stamp of the request being served (requests seen so far, skipped ones included)
S_REQ = 2
S_SKIP = 3
S_BLOCKS = 4
S_HITS = 5
S_EVICT = 6
S_SELF = 7
S_UNEXP = 8
S_UNOBS = 9
S_SKIP_INDEX = 10  # first skipped request's index, -1 if none
S_SKIP_DISTINCT = 11
S_HAND = 12  # SIEVE's hand (a slot; 0 = start at the tail)
S_ERR_A = 13
S_ERR_B = 14
S_SMALL_TARGET = 15  # S3-FIFO's small-queue target (blocks)
S_GHOST_CAP = 16  # S3-FIFO's ghost-queue capacity (ids)
N_STATE = 17

# Error codes.
E_OK, E_NOTHING_FREED, E_OVER_CAPACITY, E_LOST, E_ALL_PINNED = 0, 1, 2, 3, 4


# The linked-list steps (unlink, push to the back or front) are written out where they are used
# instead of being small kernels: numba does not inline a call between kernels, and passing
# arrays to one per block costs a reference-count update per array and call (measured: the
# LRU serve loop ran at 6 M blocks/s through such helpers, over 60 M/s with them inline).


@njit(cache=True)
def _evict_oldest(
    k: int, pin: bool, cur: int, nxt: I64, prv: I64, res: U8,
    stamp: I64,
) -> tuple[int, int]:  # fmt: skip
    """LRU and FIFO (``_common.pop_oldest``): the first ``k`` unpinned blocks from the front;
    pinned ones keep their place. Returns (freed, of which in α)."""
    got = inside = 0
    x = nxt[0]
    while got < k and x != 0:
        after = nxt[x]
        in_alpha = stamp[x] == cur
        if not (pin and in_alpha):
            before = prv[x]  # unlink x
            nxt[before] = after
            prv[after] = before
            res[x] = 0
            got += 1
            inside += in_alpha
        x = after
    return got, inside


@njit(cache=True)
def _evict_clock(
    k: int, pin: bool, cur: int, nxt: I64, prv: I64, res: U8,
    aux: U8, stamp: I64, scratch: I64,
) -> tuple[int, int]:  # fmt: skip
    """CLOCK (``Clock.evict_n``): pop the hand (front); pinned blocks are set aside and put back
    at the front in their order afterwards, a non-zero counter is decremented and the block
    moved to the back, the first zero is the victim."""
    got = inside = passed = 0
    while got < k and nxt[0] != 0:
        x = nxt[0]
        after = nxt[x]  # unlink the front
        nxt[0] = after
        prv[after] = 0
        in_alpha = stamp[x] == cur
        if pin and in_alpha:
            scratch[passed] = x
            passed += 1
        elif aux[x] > 0:
            aux[x] -= 1
            tail = prv[0]  # push x to the back
            nxt[tail] = x
            prv[x] = tail
            nxt[x] = 0
            prv[0] = x
        else:
            res[x] = 0
            got += 1
            inside += in_alpha
    for i in range(passed - 1, -1, -1):
        x = scratch[i]
        head = nxt[0]  # push x to the front
        prv[head] = x
        nxt[x] = head
        prv[x] = 0
        nxt[0] = x
    return got, inside


@njit(cache=True)
def _evict_sieve(
    k: int, pin: bool, cur: int, size: int, nxt: I64, prv: I64,
    res: U8, aux: U8, stamp: I64, st: I64,
) -> tuple[int, int]:  # fmt: skip
    """SIEVE (``Sieve.evict_n``): the hand walks from the tail (front) toward the head, clears
    visited bits, passes pinned blocks untouched and evicts the first unvisited block, staying
    at the next newer one. The two-turn guard is the Python one."""
    got = inside = idle = 0
    hand = st[S_HAND]
    while got < k and idle <= 2 * (size - got) + 2:
        idle += 1
        if hand == 0:
            hand = nxt[0]
        elif pin and stamp[hand] == cur:
            hand = nxt[hand]
        elif aux[hand]:
            aux[hand] = 0
            hand = nxt[hand]
        else:
            victim = hand
            hand = nxt[hand]
            before = prv[victim]  # unlink the victim
            nxt[before] = hand
            prv[hand] = before
            res[victim] = 0
            got += 1
            inside += stamp[victim] == cur
            idle = 0
    st[S_HAND] = hand
    return got, inside


# LFU (``policies.lfu.LFU``): a block enters with count 1, a hit adds 1, eviction walks the
# counts upward, oldest first within a count, passing pinned blocks over. Each distinct count
# is a *node* in a list sorted by count (``UP`` = next higher); a node holds its blocks in a
# member list through the slots' ``nxt``/``prv`` (0 = none), so a hit moves its block to the
# next node up (or a new one put there): O(1), as in Python. ``nodes`` has shape
# (6, capacity + 2): rows ``COUNT``, ``HEAD``, ``TAIL``, ``UP``, ``DOWN`` per node id
# (1 … capacity + 1; 0 = none) and ``FREE``, a stack of unused ids. At most one node per
# resident block exists, plus one for a moment during an access. All kernels live in this one
# module on purpose: numba's on-disk cache is invalidated per source file, so a kernel calling
# into another file could run that file's stale code after an upgrade.
COUNT, HEAD, TAIL, UP, DOWN, FREE = 0, 1, 2, 3, 4, 5
# Scalars in the row ``FREE``'s column 0 and the row ``COUNT``'s column 0 (node 0 is never used):
# nodes[FREE, 0] = free ids on the stack, nodes[COUNT, 0] = the lowest node (0 = none).


@njit(cache=True)
def _append(nodes: I64, node: int, x: int, nxt: I64, prv: I64) -> None:
    tail = nodes[TAIL, node]
    prv[x] = tail
    nxt[x] = 0
    if tail:
        nxt[tail] = x
    else:
        nodes[HEAD, node] = x
    nodes[TAIL, node] = x


@njit(cache=True)
def _detach(nodes: I64, node: int, x: int, nxt: I64, prv: I64) -> None:
    before = prv[x]
    after = nxt[x]
    if before:
        nxt[before] = after
    else:
        nodes[HEAD, node] = after
    if after:
        prv[after] = before
    else:
        nodes[TAIL, node] = before


@njit(cache=True)
def _new_after(nodes: I64, below: int, count: int) -> int:
    """A fresh node of ``count`` just above ``below`` (0: at the bottom)."""
    top = nodes[FREE, 0]
    node = nodes[FREE, top]
    nodes[FREE, 0] = top - 1
    nodes[COUNT, node] = count
    nodes[HEAD, node] = 0
    nodes[TAIL, node] = 0
    above = nodes[COUNT, 0] if below == 0 else nodes[UP, below]
    if below == 0:
        nodes[COUNT, 0] = node
    else:
        nodes[UP, below] = node
    nodes[DOWN, node] = below
    nodes[UP, node] = above
    if above:
        nodes[DOWN, above] = node
    return node  # type: ignore[no-any-return]


@njit(cache=True)
def _drop_if_empty(nodes: I64, node: int) -> None:
    if nodes[HEAD, node]:
        return
    below = nodes[DOWN, node]
    above = nodes[UP, node]
    if below:
        nodes[UP, below] = above
    else:
        nodes[COUNT, 0] = above
    if above:
        nodes[DOWN, above] = below
    top = nodes[FREE, 0] + 1
    nodes[FREE, top] = node
    nodes[FREE, 0] = top


@njit(cache=True)
def lfu_access(x: int, res: U8, nxt: I64, prv: I64, cls: I64, nodes: I64) -> int:
    """``LFU.access`` for slot ``x``; returns 1 if it was inserted."""
    if res[x]:
        node = cls[x]
        count = nodes[COUNT, node] + 1
        above = nodes[UP, node]
        target = above if above and nodes[COUNT, above] == count else _new_after(nodes, node, count)
        _detach(nodes, node, x, nxt, prv)
        _drop_if_empty(nodes, node)
        _append(nodes, target, x, nxt, prv)
        cls[x] = target
        return 0
    low = nodes[COUNT, 0]
    target = low if low and nodes[COUNT, low] == 1 else _new_after(nodes, 0, 1)
    _append(nodes, target, x, nxt, prv)
    cls[x] = target
    res[x] = 1
    return 1


@njit(cache=True)
def lfu_evict(
    k: int, pin: bool, cur: int, res: U8, nxt: I64, prv: I64, nodes: I64, stamp: I64
) -> tuple[int, int]:
    """``LFU.evict_n``: up to ``k`` unpinned blocks, lowest count first, oldest first within a
    count. Returns (freed, of which in α)."""
    got = inside = 0
    node = nodes[COUNT, 0]
    while got < k and node:
        above = nodes[UP, node]
        x = nodes[HEAD, node]
        while got < k and x:
            after = nxt[x]
            in_alpha = stamp[x] == cur
            if not (pin and in_alpha):
                _detach(nodes, node, x, nxt, prv)
                res[x] = 0
                got += 1
                inside += in_alpha
            x = after
        _drop_if_empty(nodes, node)
        node = above
    return got, inside


# S3-FIFO (``policies.s3fifo.S3Fifo``): three FIFO queues as member lists of ``nodes`` columns
# ``Q_SMALL``, ``Q_MAIN``, ``Q_GHOST`` (the LFU helpers ``_append``/``_detach`` keep them, head =
# oldest), the queue's length in row ``COUNT``; per slot ``cls`` = the queue it is in (0: none)
# and ``aux`` = its frequency (capped at ``S3_FREQ_CAP``). A block is in at most one queue: the
# ghost holds ids that left the small queue, and a ghost id that returns moves to the main queue.
Q_SMALL, Q_MAIN, Q_GHOST = 1, 2, 3
S3_FREQ_CAP = 3


@njit(cache=True)
def _s3_move(nodes: I64, q: int, x: int, nxt: I64, prv: I64, cls: I64) -> None:
    """Put slot ``x`` (in no queue) at the newest end of queue ``q``."""
    _append(nodes, q, x, nxt, prv)
    nodes[COUNT, q] += 1
    cls[x] = q


@njit(cache=True)
def _s3_pop(nodes: I64, q: int, nxt: I64, prv: I64, cls: I64) -> int:
    """Take the oldest slot out of queue ``q`` (not empty)."""
    x = nodes[HEAD, q]
    _detach(nodes, q, x, nxt, prv)
    nodes[COUNT, q] -= 1
    cls[x] = 0
    return x  # type: ignore[no-any-return]


@njit(cache=True)
def s3fifo_insert(x: int, res: U8, aux: U8, nxt: I64, prv: I64, cls: I64, nodes: I64) -> None:
    """``S3Fifo.access`` for a slot ``x`` not resident (a hit only counts, in the serve loop):
    a ghost id goes to the main queue, any other to the small queue, with no hits."""
    if cls[x] == Q_GHOST:
        _detach(nodes, Q_GHOST, x, nxt, prv)
        nodes[COUNT, Q_GHOST] -= 1
        cls[x] = 0
        _s3_move(nodes, Q_MAIN, x, nxt, prv, cls)
    else:
        _s3_move(nodes, Q_SMALL, x, nxt, prv, cls)
    aux[x] = 0
    res[x] = 1


@njit(cache=True)
def _evict_s3fifo(
    k: int, pin: bool, cur: int, size: int, res: U8, aux: U8, nxt: I64, prv: I64, cls: I64,
    nodes: I64, stamp: I64, st: I64,
) -> tuple[int, int]:  # fmt: skip
    """``EvictionPolicy.evict_n`` over ``S3Fifo.evict``: up to ``k`` victims while blocks are
    resident. Returns (freed, of which in α), freed = -1 where ``evict`` would raise (no
    queue has an unpinned block).

    Per victim (``S3Fifo.evict``): pinned blocks go back to the newest end of their queue, a
    small-queue block with hits is promoted to the main queue, a main-queue block with hits
    is reinserted with one hit less; ``stuck_*`` count consecutive pinned blocks met at each
    queue's oldest end."""
    got = inside = 0
    while got < k and size - got > 0:
        stuck_small = stuck_main = 0
        while True:
            small_ok = stuck_small < nodes[COUNT, Q_SMALL]
            main_ok = stuck_main < nodes[COUNT, Q_MAIN]
            if not (small_ok or main_ok):
                return -1, inside
            small = small_ok and (nodes[COUNT, Q_SMALL] >= st[S_SMALL_TARGET] or not main_ok)
            q = Q_SMALL if small else Q_MAIN
            x = _s3_pop(nodes, q, nxt, prv, cls)
            if pin and stamp[x] == cur:
                _s3_move(nodes, q, x, nxt, prv, cls)
                if small:
                    stuck_small += 1
                else:
                    stuck_main += 1
                continue
            if small:
                stuck_small = 0
                if aux[x] > 0:
                    aux[x] = 0
                    _s3_move(nodes, Q_MAIN, x, nxt, prv, cls)
                    stuck_main = 0  # the main queue changed; its pinned count no longer holds
                    continue
                _s3_move(nodes, Q_GHOST, x, nxt, prv, cls)
                if nodes[COUNT, Q_GHOST] > st[S_GHOST_CAP]:
                    _s3_pop(nodes, Q_GHOST, nxt, prv, cls)
                break
            stuck_main = 0
            if aux[x] > 0:
                aux[x] -= 1
                _s3_move(nodes, Q_MAIN, x, nxt, prv, cls)
                continue
            break
        res[x] = 0
        got += 1
        inside += stamp[x] == cur
    return got, inside


@njit(cache=True)
def _probe(
    blocks: I64, lo: int, hi: int, cur: int, res: U8, stamp: I64, plain: bool, costs: F64
) -> tuple[int, int, int, int, float]:
    """Phases 0 and 1 in one read-only pass: (distinct blocks, distinct resident blocks, hits
    at every position with repeats, position of the first miss or ``hi - lo``, summed cost of
    the hits). α is stamped with ``cur`` on the way. ``plain``: skip the cost sum (uniform
    costs, or stop-at-first-miss, which sums its counted prefix itself)."""
    distinct = resident = hits = 0
    first_miss = hi - lo
    saved = 0.0
    for j in range(lo, hi):
        x = blocks[j] + 1
        here = res[x]
        if stamp[x] != cur:
            stamp[x] = cur
            distinct += 1
            resident += here
        if here:
            hits += 1
            if not plain:
                saved += costs[j - lo]
        elif first_miss == hi - lo:
            first_miss = j - lo
    return distinct, resident, hits, first_miss, saved


@njit(cache=True)
def _allocate(
    kind: int, needed: int, pin: bool, cur: int, size: int, nxt: I64, prv: I64, res: U8, aux: U8,
    stamp: I64, scratch: I64, cls: I64, nodes: I64, st: I64,
) -> tuple[int, int, int]:  # fmt: skip
    """Phase 2 (``replay._ServeLoop._allocate``): evict until ``needed`` victims outside α are
    gone. Returns (error code, resident blocks after, self-evictions)."""
    self_evicted = progress = 0
    while progress < needed:
        want = needed - progress
        if kind == K_CLOCK:
            freed, inside = _evict_clock(want, pin, cur, nxt, prv, res, aux, stamp, scratch)
        elif kind == K_SIEVE:
            freed, inside = _evict_sieve(want, pin, cur, size, nxt, prv, res, aux, stamp, st)
        elif kind == K_LFU:
            freed, inside = lfu_evict(want, pin, cur, res, nxt, prv, nodes, stamp)
        elif kind == K_S3FIFO:
            freed, inside = _evict_s3fifo(want, pin, cur, size, res, aux, nxt, prv, cls, nodes,
                stamp, st)  # fmt: skip
            if freed < 0:
                return E_ALL_PINNED, size, self_evicted
        else:
            freed, inside = _evict_oldest(want, pin, cur, nxt, prv, res, stamp)
        if freed <= 0:
            st[S_ERR_A] = size
            st[S_ERR_B] = want
            return E_NOTHING_FREED, size, self_evicted
        size -= freed
        st[S_EVICT] += freed
        self_evicted += inside
        progress += freed - inside
    return E_OK, size, self_evicted


@njit(cache=True)
def _cost_sums(
    n: int, counted: int, saved: float, stop_at_miss: bool, costs: F64, cumulative: F64,
    fs: F64,
) -> None:  # fmt: skip
    """Add one served request's costs under a non-uniform model; ``counted`` = hits the match
    mode counts, ``saved`` = the summed cost of its hits (unless ``stop_at_miss``)."""
    fs[0] += cumulative[n]
    if stop_at_miss:  # the counted prefix, summed left to right as Python's sum() does
        for p in range(counted):
            saved += costs[p]
    fs[1] += saved


@njit(cache=True)
def _replay_request(  # noqa: C901, PLR0912  (the policies' access steps inline: see above)
    kind: int, top: int, capacity: int, blocks: I64, lo: int, hi: int, deepest_first: bool,
    verify: bool, size: int, inserts: int, nxt: I64, prv: I64, res: U8, aux: U8, cls: I64,
    nodes: I64, st: I64,
) -> tuple[int, int]:  # fmt: skip
    """Phase 3 (``replay._ServeLoop._access``, each policy's ``_replay`` body per block):
    replay α; ``inserts`` = its distinct blocks not resident before. Returns (error code,
    resident blocks after)."""
    before = size
    for step in range(hi - lo):
        x = blocks[hi - 1 - step if deepest_first else lo + step] + 1
        if kind == K_LFU:
            size += lfu_access(x, res, nxt, prv, cls, nodes)
            continue
        if kind == K_S3FIFO:
            if res[x]:  # in the small or the main queue: one more hit, capped
                aux[x] = min(aux[x] + 1, S3_FREQ_CAP)
            else:
                s3fifo_insert(x, res, aux, nxt, prv, cls, nodes)
                size += 1
            continue
        if res[x]:
            if kind == K_CLOCK:
                if aux[x] < top:
                    aux[x] += 1
                continue
            if kind == K_SIEVE:
                aux[x] = 1
                continue
            if kind != K_LRU:  # FIFO: a hit changes nothing
                continue
            p = prv[x]  # LRU's move_to_end: unlink, then push to the back below
            after = nxt[x]
            nxt[p] = after
            prv[after] = p
        else:
            res[x] = 1
            aux[x] = 0
            size += 1
        tail = prv[0]  # push x to the back
        nxt[tail] = x
        prv[x] = tail
        nxt[x] = 0
        prv[0] = x
    if size > capacity:
        st[S_ERR_A] = size
        return E_OVER_CAPACITY, size
    if size < before + inserts:
        st[S_UNEXP] += before + inserts - size
    if verify:
        for j in range(lo, hi):
            if not res[blocks[j] + 1]:
                st[S_ERR_A] = blocks[j]
                return E_LOST, size
    return E_OK, size


@njit(cache=True)
def serve(
    kind: int, top: int, capacity: int, blocks: I64, offsets: I64, first_index: int,
    uniform: bool, costs: F64, cumulative: F64, stop_at_miss: bool, deepest_first: bool,
    pin: bool, verify: bool, nxt: I64, prv: I64, res: U8, aux: U8, stamp: I64, scratch: I64,
    cls: I64, nodes: I64, st: I64, fs: F64,
) -> int:  # fmt: skip
    """Serve requests ``offsets[r]:offsets[r+1]`` of ``blocks`` (ids in prefix order) in order.

    ``first_index`` is the workload index of the first one; ``top`` is CLOCK's counter
    ceiling. With ``uniform`` False, ``costs[p]`` is the cost of position p and
    ``cumulative[n]`` the cost of an n-block request (both at least as long as the longest
    request). Returns ``E_OK`` or an ``E_*`` code (the state is then not to be used again).
    """
    size = st[S_SIZE]
    cur = st[S_CUR]
    plain = uniform or stop_at_miss
    for r in range(offsets.shape[0] - 1):
        lo = offsets[r]
        hi = offsets[r + 1]
        n = hi - lo
        cur += 1
        distinct, resident, hits, first_miss, saved = _probe(
            blocks, lo, hi, cur, res, stamp, plain, costs
        )
        if distinct > capacity:
            st[S_SKIP] += 1
            if st[S_SKIP_INDEX] < 0:
                st[S_SKIP_INDEX] = first_index + r
                st[S_SKIP_DISTINCT] = distinct
            continue
        counted = first_miss if stop_at_miss else hits  # hits the match mode counts
        st[S_REQ] += 1
        st[S_BLOCKS] += n
        st[S_HITS] += counted
        if uniform:
            fs[0] += n
            fs[1] += counted
        else:
            _cost_sums(n, counted, saved, stop_at_miss, costs, cumulative, fs)
        missing = distinct - resident
        needed = missing - (capacity - size)
        self_evicted = 0
        if needed > 0:  # a call passing arrays costs reference counts: only when it has work
            code, size, self_evicted = _allocate(kind, needed, pin, cur, size, nxt, prv, res,
                aux, stamp, scratch, cls, nodes, st)  # fmt: skip
            if code != E_OK:
                return code
            st[S_SELF] += self_evicted
        code, size = _replay_request(kind, top, capacity, blocks, lo, hi, deepest_first, verify,
            size, missing + self_evicted, nxt, prv, res, aux, cls, nodes, st)  # fmt: skip
        if code != E_OK:
            return code
    st[S_SIZE] = size
    st[S_CUR] = cur
    return E_OK
