"""Sampling kernels: RandomCompute and RandomComputeSmallQueue (``policies.random_compute``).

The resident set is the dense list of ``ResidentSample`` (``_common``): ``heap[0:n]`` holds its
slots in the Python list's order (``n`` = ``st[S_HEAP_N]``; appended on insertion, the last one
moved into a removed block's place), ``cls[slot]`` the slot's index there, so a uniform draw
``u`` picks ``heap[int(u × n)]`` exactly as ``ResidentSample.pick`` does. Per slot: ``keys`` =
the cost of its last access, ``links[0]`` = its last-access stamp (the request's end on the
policy's clock of block accesses, ``st[S_SEQ]``). The draws come from the policy's own
``np.random.Generator``, passed in: numba's ``Generator.random`` continues NumPy's stream (one
shared state, the same doubles), and the kernels draw what the Python policy draws, in its
order (``n × n_sample`` doubles per ``evict_n`` call first, then ``n_sample`` per redraw).

The small-queue variant keeps its FIFO in ``nxt``/``prv`` (sentinel 0, oldest at the front)
and marks its members with ``aux`` = 1; ``st[S_SMALL_N]`` is its length.
"""

# ruff: noqa: PLR0917  (numba kernels take their state arrays positionally)

from __future__ import annotations

from typing import Any

from numba import njit

from simulator.kvcache.compiled._layout import (
    F64,
    I64,
    S_HEAP_N,
    S_LIMIT,
    S_SEQ,
    S_SMALL_N,
    S_SMALL_TARGET,
    U8,
)

#: ``_common._MAX_REDRAWS``: redraws before the scan fallback.
MAX_REDRAWS = 16


@njit()
def random_replay(
    slots: I64, lo: int, hi: int, deepest_first: bool, size: int, small: bool, uniform: bool,
    costs: F64, res: U8, aux: U8, nxt: I64, prv: I64, cls: I64, keys: F64, heap: I64,
    links: I64, st: I64,
) -> int:  # fmt: skip
    """``RandomCompute.access_request`` (with ``small``: ``RandomComputeSmallQueue``'s, which
    first queues the request's new blocks in S in prefix order and promotes its resident S
    blocks out of it). Returns the resident count after."""
    if small:
        for j in range(lo, hi):  # ``_enter``: first occurrences in prefix order
            x = slots[j - lo]
            if res[x]:
                if aux[x]:
                    _unqueue(x, aux, nxt, prv, st)
            elif not aux[x]:
                tail = prv[0]  # push x to the back of S
                nxt[tail] = x
                prv[x] = tail
                nxt[x] = 0
                prv[0] = x
                aux[x] = 1
                st[S_SMALL_N] += 1
    st[S_SEQ] += hi - lo
    end = st[S_SEQ]
    n = st[S_HEAP_N]
    for step in range(hi - lo):
        j = hi - 1 - step if deepest_first else lo + step
        x = slots[j - lo]
        if not res[x]:
            res[x] = 1
            cls[x] = n
            heap[n] = x
            n += 1
            size += 1
        keys[x] = 1.0 if uniform else costs[j - lo]
        links[0, x] = end
    st[S_HEAP_N] = n
    return size


@njit()
def _unqueue(x: int, aux: U8, nxt: I64, prv: I64, st: I64) -> None:
    """Take ``x`` out of the small queue."""
    before = prv[x]
    after = nxt[x]
    nxt[before] = after
    prv[after] = before
    aux[x] = 0
    st[S_SMALL_N] -= 1


@njit()
def _drop(x: int, res: U8, aux: U8, nxt: I64, prv: I64, cls: I64, heap: I64, st: I64) -> None:
    """``RandomCompute.remove`` (and the small queue's ``_drop``): out of S, out of the dense
    list (``ResidentSample.discard``: the last slot takes its place)."""
    if aux[x]:
        _unqueue(x, aux, nxt, prv, st)
    n = st[S_HEAP_N] - 1
    st[S_HEAP_N] = n
    last = heap[n]
    if last != x:
        i = cls[x]
        heap[i] = last
        cls[last] = i
    cls[x] = 0
    res[x] = 0


@njit(inline="always")
def tie_below(x: int, best: int, links: I64, ids: I64) -> bool:
    """Between slots of equal score: whether ``x``'s (last access ``links[0]``, -id) is below
    ``best``'s, in tuple order (the tie-break of the sampling policies, this module's and
    ``_lhd``'s). Called only on a tie: passing the arrays to it costs reference counts (an
    inlined helper taking the scores too ran random_compute's serve loop at 0.6×)."""
    return links[0, x] < links[0, best] or (  # type: ignore[no-any-return]
        links[0, x] == links[0, best] and ids[x] > ids[best]
    )


@njit()
def _lowest(
    sample: I64, m: int, clock: int, keys: F64, links: I64, ids: I64
) -> int:  # fmt: skip
    """``RandomCompute._lowest``: the sampled slot of lowest (cost / age, last, -id), the
    first of equal ones."""
    best = sample[0]
    best_score = keys[best] / (clock - links[0, best] + 1)
    for i in range(1, m):
        x = sample[i]
        score = keys[x] / (clock - links[0, x] + 1)
        if score < best_score or (score == best_score and tie_below(x, best, links, ids)):
            best = x
            best_score = score
    return best  # type: ignore[no-any-return]


@njit()
def _pick(
    uniforms: F64, at: int, k: int, sample: I64, pin: bool, cur: int, exclude_small: bool,
    aux: U8, heap: I64, stamp: I64, st: I64,
) -> int:  # fmt: skip
    """``ResidentSample.pick`` of ``uniforms[at:at + k]`` into ``sample``; pinned slots (and
    with ``exclude_small`` the small queue's) dropped. Returns how many were kept."""
    n = st[S_HEAP_N]
    m = 0
    for i in range(at, at + k):
        x = heap[int(uniforms[i] * n)]
        if (pin and stamp[x] == cur) or (exclude_small and aux[x]):
            continue
        sample[m] = x
        m += 1
    return m


@njit()
def _draw_unpinned(
    rng: Any, k: int, sample: I64, pin: bool, cur: int, exclude_small: bool, aux: U8,
    heap: I64, stamp: I64, st: I64,
) -> int:  # fmt: skip
    """``ResidentSample.draw_unpinned``: up to ``MAX_REDRAWS`` rounds of ``k`` draws, then the
    first allowed slot of the dense list; 0 if none is allowed."""
    for _ in range(MAX_REDRAWS):
        uniforms = rng.random(k)
        m = _pick(uniforms, 0, k, sample, pin, cur, exclude_small, aux, heap, stamp, st)
        if m:
            return m
    for i in range(st[S_HEAP_N]):
        x = heap[i]
        if not ((pin and stamp[x] == cur) or (exclude_small and aux[x])):
            sample[0] = x
            return 1
    return 0


@njit()
def _oldest_small(pin: bool, cur: int, nxt: I64, stamp: I64) -> int:
    """``pop_oldest(S, 1, pinned)``'s victim: the oldest unpinned slot of S (0 if none)."""
    x = nxt[0]
    while x != 0 and pin and stamp[x] == cur:
        x = nxt[x]
    return x  # type: ignore[no-any-return]


@njit()
def random_evict(
    want: int, small: bool, pin: bool, cur: int, rng: Any, res: U8, aux: U8, nxt: I64,
    prv: I64, cls: I64, keys: F64, heap: I64, scratch: I64, stamp: I64, links: I64, ids: I64,
    st: I64,
) -> tuple[int, int]:  # fmt: skip
    """``RandomCompute.evict_n`` (``small``: ``RandomComputeSmallQueue.evict_n``). Returns
    (freed, of which in α); freed = -1 where Python raises (nothing evictable). ``scratch``
    holds a sample (at least ``n_sample`` long: the driver sizes it)."""
    if small:
        return _evict_small(want, pin, cur, rng, res, aux, nxt, prv, cls, keys, heap, scratch,
            stamp, links, ids, st)  # fmt: skip
    k = st[S_LIMIT]
    got = inside = 0
    uniforms = rng.random(want * k)  # one generator call for all the samples
    for j in range(want):
        m = _pick(uniforms, j * k, k, scratch, pin, cur, False, aux, heap, stamp, st)
        if not m:
            m = _draw_unpinned(rng, k, scratch, pin, cur, False, aux, heap, stamp, st)
        if not m:
            if got:
                break
            return -1, 0
        x = _lowest(scratch, m, st[S_SEQ], keys, links, ids)
        inside += stamp[x] == cur
        _drop(x, res, aux, nxt, prv, cls, heap, st)
        got += 1
    return got, inside


@njit()
def _evict_small(
    want: int, pin: bool, cur: int, rng: Any, res: U8, aux: U8, nxt: I64, prv: I64, cls: I64,
    keys: F64, heap: I64, scratch: I64, stamp: I64, links: I64, ids: I64, st: I64,
) -> tuple[int, int]:  # fmt: skip
    """``RandomComputeSmallQueue.evict_n``: S's oldest unpinned block while S is at its
    target, else the lowest of a sample of the main part (``_sample_main``), else S's oldest."""
    got = inside = 0
    while got < want:
        x = 0
        if st[S_SMALL_N] >= st[S_SMALL_TARGET]:
            x = _oldest_small(pin, cur, nxt, stamp)
        if x == 0:
            m = 0
            if st[S_SMALL_N] < st[S_HEAP_N]:  # ``_sample_main``
                m = _draw_unpinned(rng, st[S_LIMIT], scratch, pin, cur, True, aux, heap, stamp,
                    st)  # fmt: skip
            x = _lowest(scratch, m, st[S_SEQ], keys, links, ids) if m else _oldest_small(
                pin, cur, nxt, stamp)  # fmt: skip
            if x == 0:
                break
        inside += stamp[x] == cur
        _drop(x, res, aux, nxt, prv, cls, heap, st)
        got += 1
    if not got and want > 0 and st[S_HEAP_N]:
        return -1, 0
    return got, inside
