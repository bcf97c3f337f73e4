"""Kernels of the segmented queue policies: SLRU, 2Q and ARC (``policies.slru``, ``.twoq``,
``.arc``), over the queues of ``_queues`` (columns ``Q_*`` of ``_layout``).

Each policy has a ``*_replay`` kernel (phase 3 for one request, blocks ``lo:hi`` of the chunk:
every block accessed in replay order, one call per request; ``slots[j - lo]`` is block j's
slot, from ``_kernels._probe``) and a ``*_evict`` kernel (``evict_n``: up to ``k``
victims, returning (freed, of which in α), freed = -1 where the Python ``evict`` raises
because every resident block is pinned). α (the request being served) is the slots whose
``stamp`` is ``cur``; it is pinned iff ``pin``. ``res[slot]`` is 1 for a resident block,
``cls[slot]`` its queue (ghost ids keep theirs with ``res`` 0).
"""

# ruff: noqa: PLR0917  (numba kernels take their state arrays positionally)

from __future__ import annotations

from numba import njit

from simulator.kvcache.compiled._layout import (
    COUNT,
    F64,
    HEAD,
    I64,
    Q_A1IN,
    Q_A1OUT,
    Q_AM,
    Q_B1,
    Q_B2,
    Q_PROBATION,
    Q_PROTECTED,
    Q_T1,
    Q_T2,
    U8,
)
from simulator.kvcache.compiled._queues import q_first_unpinned, q_pop, q_push, q_take


@njit(inline="always")
def slru_promote(x: int, limit: int, nodes: I64, nxt: I64, prv: I64, cls: I64) -> None:
    """A probationary hit (SLRU's, and W-TinyLFU's main cache): slot ``x`` moves to the
    protected MRU end, demoting the protected LRU block to the probationary MRU end when the
    protected segment then holds more than ``limit``."""
    q_take(nodes, x, nxt, prv, cls)
    q_push(nodes, Q_PROTECTED, x, nxt, prv, cls)
    if nodes[COUNT, Q_PROTECTED] > limit:
        demoted = q_pop(nodes, Q_PROTECTED, nxt, prv, cls)
        q_push(nodes, Q_PROBATION, demoted, nxt, prv, cls)


@njit()
def slru_replay(
    slots: I64, lo: int, hi: int, deepest_first: bool, size: int, limit: int, res: U8,
    nxt: I64, prv: I64, cls: I64, nodes: I64,
) -> int:  # fmt: skip
    """``SLRU._replay``: a protected hit moves to the protected MRU end, a probationary hit is
    promoted there (demoting the protected LRU block to the probationary MRU end when the
    protected segment then holds more than ``limit``), a miss enters the probationary MRU end.
    Returns the resident count after."""
    for step in range(hi - lo):
        x = slots[hi - lo - 1 - step if deepest_first else step]
        q = cls[x]
        if q == Q_PROTECTED:
            q_take(nodes, x, nxt, prv, cls)
            q_push(nodes, Q_PROTECTED, x, nxt, prv, cls)
        elif q == Q_PROBATION:
            slru_promote(x, limit, nodes, nxt, prv, cls)
        else:
            q_push(nodes, Q_PROBATION, x, nxt, prv, cls)
            res[x] = 1
            size += 1
    return size


@njit()
def _take_oldest(
    q: int, k: int, pin: bool, cur: int, res: U8, nxt: I64, prv: I64, cls: I64, nodes: I64,
    stamp: I64,
) -> tuple[int, int]:  # fmt: skip
    """``_common.pop_oldest`` on queue ``q``: its first ``k`` unpinned slots, oldest first;
    pinned ones keep their place. Returns (freed, of which in α)."""
    got = inside = 0
    x = nodes[HEAD, q]  # the oldest slot
    while got < k and x:
        after = nxt[x]
        in_alpha = stamp[x] == cur
        if not (pin and in_alpha):
            q_take(nodes, x, nxt, prv, cls)
            res[x] = 0
            got += 1
            inside += in_alpha
        x = after
    return got, inside


@njit()
def slru_evict(
    k: int, pin: bool, cur: int, res: U8, nxt: I64, prv: I64, cls: I64, nodes: I64,
    stamp: I64,
) -> tuple[int, int]:  # fmt: skip
    """``SLRU.evict_n``: the probationary LRU blocks first, then the protected ones."""
    got, inside = _take_oldest(Q_PROBATION, k, pin, cur, res, nxt, prv, cls, nodes, stamp)
    if got < k:
        more, more_inside = _take_oldest(Q_PROTECTED, k - got, pin, cur, res, nxt, prv, cls,
            nodes, stamp)  # fmt: skip
        got += more
        inside += more_inside
    return got, inside


@njit()
def twoq_replay(
    slots: I64, lo: int, hi: int, deepest_first: bool, size: int, res: U8, nxt: I64,
    prv: I64, cls: I64, nodes: I64,
) -> int:  # fmt: skip
    """``TwoQ.access`` per block: an Am hit refreshes recency, an A1in hit changes nothing,
    a miss found in A1out enters Am, any other miss enters A1in. Returns the resident count."""
    for step in range(hi - lo):
        x = slots[hi - lo - 1 - step if deepest_first else step]
        q = cls[x]
        if q == Q_A1IN:
            continue  # a correlated reference
        if q in (Q_AM, Q_A1OUT):
            q_take(nodes, x, nxt, prv, cls)
            q_push(nodes, Q_AM, x, nxt, prv, cls)
        else:
            q_push(nodes, Q_A1IN, x, nxt, prv, cls)
        if not res[x]:
            res[x] = 1
            size += 1
    return size


@njit()
def twoq_evict(
    k: int, pin: bool, cur: int, size: int, kin: int, kout: int, res: U8, nxt: I64, prv: I64,
    cls: I64, nodes: I64, stamp: I64,
) -> tuple[int, int]:  # fmt: skip
    """``evict_n`` over ``TwoQ.evict``: from A1in (its id then enters A1out, bounded by
    ``kout``) while it holds more than ``kin`` blocks or Am has no unpinned block, else
    Am's LRU block."""
    got = inside = 0
    while got < k and size - got > 0:
        x = q_first_unpinned(nodes, Q_A1IN, pin, cur, nxt, stamp)
        # Am's candidate matters only when A1in's cannot be taken (Python scans both; the
        # outcome is the same).
        if not (x and nodes[COUNT, Q_A1IN] > kin):
            from_am = q_first_unpinned(nodes, Q_AM, pin, cur, nxt, stamp)
            if from_am:
                x = from_am
        if not x:
            return -1, inside
        if cls[x] == Q_A1IN:
            q_take(nodes, x, nxt, prv, cls)
            q_push(nodes, Q_A1OUT, x, nxt, prv, cls)
            if nodes[COUNT, Q_A1OUT] > kout:
                q_pop(nodes, Q_A1OUT, nxt, prv, cls)
        else:
            q_take(nodes, x, nxt, prv, cls)
        res[x] = 0
        got += 1
        inside += stamp[x] == cur
    return got, inside


@njit()
def arc_replay(
    slots: I64, lo: int, hi: int, deepest_first: bool, size: int, capacity: int, res: U8,
    nxt: I64, prv: I64, cls: I64, nodes: I64, fs: F64, fp: int,
) -> int:  # fmt: skip
    """``Arc.access`` per block; ``fs[fp]`` is the adaptive target p. A T1 hit moves to T2, a
    T2 hit to T2's MRU end; a miss found in B1 (B2) grows (shrinks) p by max(|B2|/|B1|, 1)
    (max(|B1|/|B2|, 1)) and enters T2; any other miss enters T1, then the ghosts are trimmed
    to |T1| + |B1| ≤ c and |T1| + |T2| + |B1| + |B2| ≤ 2c. Returns the resident count."""
    c = capacity
    for step in range(hi - lo):
        x = slots[hi - lo - 1 - step if deepest_first else step]
        q = cls[x]
        if q in (Q_T1, Q_T2):
            q_take(nodes, x, nxt, prv, cls)
            q_push(nodes, Q_T2, x, nxt, prv, cls)
            continue
        if q == Q_B1:
            grow = max(nodes[COUNT, Q_B2] / nodes[COUNT, Q_B1], 1.0)
            fs[fp] = min(float(c), fs[fp] + grow)
            q_take(nodes, x, nxt, prv, cls)
            q_push(nodes, Q_T2, x, nxt, prv, cls)
        elif q == Q_B2:
            shrink = max(nodes[COUNT, Q_B1] / nodes[COUNT, Q_B2], 1.0)
            fs[fp] = max(0.0, fs[fp] - shrink)
            q_take(nodes, x, nxt, prv, cls)
            q_push(nodes, Q_T2, x, nxt, prv, cls)
        else:
            q_push(nodes, Q_T1, x, nxt, prv, cls)
            while nodes[COUNT, Q_T1] + nodes[COUNT, Q_B1] > c and nodes[COUNT, Q_B1]:
                q_pop(nodes, Q_B1, nxt, prv, cls)
            while (nodes[COUNT, Q_T1] + nodes[COUNT, Q_T2] + nodes[COUNT, Q_B1]
                   + nodes[COUNT, Q_B2] > 2 * c):  # fmt: skip
                if nodes[COUNT, Q_B2]:
                    q_pop(nodes, Q_B2, nxt, prv, cls)
                elif nodes[COUNT, Q_B1]:
                    q_pop(nodes, Q_B1, nxt, prv, cls)
                else:  # over 2c resident: the serve loop reports the overflow after the request
                    break
        res[x] = 1
        size += 1
    return size


@njit()
def arc_evict(
    k: int, pin: bool, cur: int, size: int, res: U8, nxt: I64, prv: I64, cls: I64,
    nodes: I64, stamp: I64, fs: F64, fp: int,
) -> tuple[int, int]:  # fmt: skip
    """``evict_n`` over ``Arc.evict``: T1's LRU unpinned block (its id enters B1) when |T1| > p
    or T2 has no unpinned block, else T2's (its id enters B2)."""
    got = inside = 0
    while got < k and size - got > 0:
        x = q_first_unpinned(nodes, Q_T1, pin, cur, nxt, stamp)
        if not (x and nodes[COUNT, Q_T1] > fs[fp]):
            from_t2 = q_first_unpinned(nodes, Q_T2, pin, cur, nxt, stamp)
            if from_t2:
                x = from_t2
        if not x:
            return -1, inside
        ghost = Q_B1 if cls[x] == Q_T1 else Q_B2
        q_take(nodes, x, nxt, prv, cls)
        q_push(nodes, ghost, x, nxt, prv, cls)
        res[x] = 0
        got += 1
        inside += stamp[x] == cur
    return got, inside
