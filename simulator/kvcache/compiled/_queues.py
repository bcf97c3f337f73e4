"""Queue kernels: doubly linked FIFO/LRU queues over slots, and S3-FIFO / S3-FIFO-D on them.

A queue is a column ``q`` of the node table ``nodes`` (``_layout``): ``nodes[HEAD, q]`` is its
oldest slot, ``nodes[TAIL, q]`` its newest, ``nodes[COUNT, q]`` its length; its members are
chained through the slots' ``nxt`` (toward newer) and ``prv`` (toward older), 0 = none, and
``cls[slot]`` names the one queue a slot is in (0: none). Ghost queues (ids of blocks that
left) use the same slots: a block is never in a ghost and resident at once, so one link pair
per slot is enough. This is an ``OrderedDict`` queue of the Python policies, oldest first:
``q_push`` = ``d[x] = ...`` (append), ``q_take`` = ``del d[x]``, ``q_pop`` =
``d.popitem(last=False)``.

The primitives are inlined into their callers at numba's IR level (``inline="always"``): a
call between kernels is not inlined otherwise and costs reference counting per array argument,
which dominated the per-block loops (see ``_kernels``). No kernel here is cached on its own:
only the entry points of ``_kernels`` are, keyed on the source of every kernel module (see
there).
"""

# ruff: noqa: PLR0917  (numba kernels take their state arrays positionally)

from __future__ import annotations

from numba import njit

from simulator.kvcache.compiled._layout import (
    COUNT,
    HEAD,
    I64,
    Q_GHOST,
    Q_MAIN,
    Q_MAIN_GHOST,
    Q_SMALL,
    S_GHOST_CAP,
    S_SMALL_TARGET,
    TAIL,
    U8,
)

S3_FREQ_CAP = 3  # S3-FIFO's per-block frequency cap (``s3fifo._FREQ_CAP``)


@njit(inline="always")
def q_push(nodes: I64, q: int, x: int, nxt: I64, prv: I64, cls: I64) -> None:
    """Put slot ``x`` (in no queue) at the newest end of queue ``q``."""
    tail = nodes[TAIL, q]
    prv[x] = tail
    nxt[x] = 0
    if tail:
        nxt[tail] = x
    else:
        nodes[HEAD, q] = x
    nodes[TAIL, q] = x
    nodes[COUNT, q] += 1
    cls[x] = q


@njit(inline="always")
def q_take(nodes: I64, x: int, nxt: I64, prv: I64, cls: I64) -> None:
    """Unlink slot ``x`` from the queue it is in."""
    q = cls[x]
    before = prv[x]
    after = nxt[x]
    if before:
        nxt[before] = after
    else:
        nodes[HEAD, q] = after
    if after:
        prv[after] = before
    else:
        nodes[TAIL, q] = before
    nodes[COUNT, q] -= 1
    cls[x] = 0


@njit(inline="always")
def q_pop(nodes: I64, q: int, nxt: I64, prv: I64, cls: I64) -> int:
    """Take the oldest slot out of queue ``q`` (not empty) and return it."""
    x = nodes[HEAD, q]
    q_take(nodes, x, nxt, prv, cls)
    return x  # type: ignore[no-any-return]


@njit(inline="always")
def q_first_unpinned(nodes: I64, q: int, pin: bool, cur: int, nxt: I64, stamp: I64) -> int:
    """``_common.first_unpinned``: the oldest slot of ``q`` outside α (pinned), 0 if none."""
    x = nodes[HEAD, q]
    if pin:
        while x and stamp[x] == cur:
            x = nxt[x]
    return x  # type: ignore[no-any-return]


@njit()
def s3fifo_insert(
    x: int, dual: bool, capacity: int, res: U8, aux: U8, nxt: I64, prv: I64, cls: I64,
    nodes: I64, st: I64,
) -> None:  # fmt: skip
    """``S3Fifo.access`` (``dual``: ``S3FifoD.access``) for a slot ``x`` not resident (a hit
    only counts, in the serve loop). A ghost id goes to the main queue, any other to the small
    queue, with no hits. S3-FIFO-D moves its small target: +1 for a small-queue ghost (the small
    queue let it go too early), -1 for a main-queue ghost (bounds 1 .. capacity - 1)."""
    q = cls[x]
    if q == Q_GHOST:
        if dual:
            st[S_SMALL_TARGET] = min(st[S_SMALL_TARGET] + 1, max(1, capacity - 1))
        q_take(nodes, x, nxt, prv, cls)
        q_push(nodes, Q_MAIN, x, nxt, prv, cls)
    elif q == Q_MAIN_GHOST:  # only S3-FIFO-D fills it
        st[S_SMALL_TARGET] = max(1, st[S_SMALL_TARGET] - 1)
        q_take(nodes, x, nxt, prv, cls)
        q_push(nodes, Q_MAIN, x, nxt, prv, cls)
    else:
        q_push(nodes, Q_SMALL, x, nxt, prv, cls)
    aux[x] = 0
    res[x] = 1


@njit()
def s3fifo_evict(
    k: int, dual: bool, pin: bool, cur: int, size: int, res: U8, aux: U8, nxt: I64, prv: I64,
    cls: I64, nodes: I64, stamp: I64, st: I64,
) -> tuple[int, int]:  # fmt: skip
    """``EvictionPolicy.evict_n`` over ``S3Fifo.evict`` (``dual``: ``S3FifoD.evict``): up to
    ``k`` victims while blocks are resident. Returns (freed, of which in α), freed = -1 where
    ``evict`` would raise (no queue has an unpinned block).

    Per victim (``S3Fifo.evict``): pinned blocks go back to the newest end of their queue, a
    small-queue block with hits is promoted to the main queue, a main-queue block with hits
    is reinserted with one hit less; ``stuck_*`` count consecutive pinned blocks met at each
    queue's oldest end. S3-FIFO-D remembers main-queue victims in its second ghost."""
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
            x = q_pop(nodes, q, nxt, prv, cls)
            if pin and stamp[x] == cur:
                q_push(nodes, q, x, nxt, prv, cls)
                if small:
                    stuck_small += 1
                else:
                    stuck_main += 1
                continue
            if small:
                stuck_small = 0
                if aux[x] > 0:
                    aux[x] = 0
                    q_push(nodes, Q_MAIN, x, nxt, prv, cls)
                    stuck_main = 0  # the main queue changed; its pinned count no longer holds
                    continue
                q_push(nodes, Q_GHOST, x, nxt, prv, cls)
                if nodes[COUNT, Q_GHOST] > st[S_GHOST_CAP]:
                    q_pop(nodes, Q_GHOST, nxt, prv, cls)
                break
            stuck_main = 0
            if aux[x] > 0:
                aux[x] -= 1
                q_push(nodes, Q_MAIN, x, nxt, prv, cls)
                continue
            if dual:  # S3FifoD.evict: a victim not in the small ghost left from the main queue
                q_push(nodes, Q_MAIN_GHOST, x, nxt, prv, cls)
                if nodes[COUNT, Q_MAIN_GHOST] > st[S_GHOST_CAP]:
                    q_pop(nodes, Q_MAIN_GHOST, nxt, prv, cls)
            break
        res[x] = 0
        got += 1
        inside += stamp[x] == cur
    return got, inside
