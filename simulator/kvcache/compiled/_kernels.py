"""The compiled serve loop (numba): phases 0-3 of ``simulator.kvcache.replay`` over arrays,
for every policy of ``engine.COMPILED``; LRU, FIFO, CLOCK and SIEVE live here, the other
policies' structures in ``_lfu``, ``_queues``, ``_segmented``, ``_heaps``, ``_lirs``,
``_tinylfu``, ``_random``, ``_workload``, ``_partial``, ``_belady``, ``_lhd`` and ``_session``.

Everything is indexed by *slot* (``_slots``: a hash table maps each block id to a slot while
the policy remembers the block, and ``serve`` recycles slots between requests, so the arrays
follow the cache size and the ghosts, not the largest id); slot 0 is the sentinel of one
circular doubly linked list (``nxt``/``prv``), front = ``nxt[0]`` (oldest), back = ``prv[0]``
(newest). Per slot: ``res`` (1 = resident), ``aux`` (CLOCK's counter, SIEVE's visited bit)
and ``stamp``, the serial number of the last request that touched the block: a block is in the
request being served (α) iff ``stamp[slot] == cur``, which is how α is pinned and how
self-evictions are told apart without building a set. Scalars that live across calls sit in
``st`` (int64, indices ``S_*``) and ``fs`` (float64: cost sums and one policy scalar), laid out
in ``_layout``. The Python policies in ``simulator/kvcache/policies`` are the reference; each
policy kernel names the Python method it mirrors, step for step.

The kernels return 0, or an error code (``E_*``) with details in ``st[S_ERR_A]``/``S_ERR_B``
for the caller to raise the same ``RuntimeError`` the Python loop raises.

Entry points: one per policy family (``FAMILIES``: the policies of one kernel module), so that
a first run compiles only the kernels of the policies it uses (numba compiles a function with
every function it may call: one entry point over all policies made a user's first replay
compile them all, about 40 s of CPU). ``serve_for(kind)`` is the family's ``serve``, built in a
closure over the family's number (``FAM_*``): ``_allocate``, ``_evict``, ``_replay_other`` and
``_replay_blocks`` are inlined into it at numba's IR level (``inline="always"``), so ``family``
is a constant in their ``if family == FAM_...`` branches too, and numba drops the branches of
the other families before typing them. (A call numba inlines takes at most 30 arguments: Python
compiles a longer one as ``f(*args)``, which numba refuses to inline.)

Caching: only the entry points are cached on disk (``cache=True``); the kernels they call are
compiled into them. numba keys a cached function on its own source file only, so a change to a
kernel in another module would leave a stale entry point in the cache; each is therefore built
in a closure over ``SOURCE_KEY`` too, a hash of every kernel module's source, which numba's
cache index includes (it hashes a closure's cell contents). Edit any kernel module and the next
run of each family recompiles it. They are loaded through ``simulator.core.jit.cached_njit``,
which skips numba's registry refresh on a cache hit (about 0.1 s of every process's start).
"""

# ruff: noqa: PLR0917  (numba kernels take their state arrays positionally)

from __future__ import annotations

import functools
import hashlib
from pathlib import Path
from typing import Any

from numba import njit

from simulator.core.jit import cached_njit
from simulator.kvcache.compiled._belady import bc_evict, bc_replay
from simulator.kvcache.compiled._heaps import asym_replay, belady_replay, gdsf_replay, heap_evict
from simulator.kvcache.compiled._layout import (
    E_ALL_PINNED,
    E_GROW,
    E_KEY,
    E_LOST,
    E_NOTHING_FREED,
    E_OK,
    E_OVER_CAPACITY,
    F64,
    F_POLICY,
    F_SAVED,
    F_TOTAL,
    FAM_BELADY_COMPUTE,
    FAM_HEAPS,
    FAM_LFU,
    FAM_LHD,
    FAM_LIRS,
    FAM_LISTS,
    FAM_PARTIAL,
    FAM_QUEUES,
    FAM_RANDOM,
    FAM_SEGMENTED,
    FAM_SESSION,
    FAM_TINYLFU,
    FAM_WORKLOAD,
    I64,
    K_ARC,
    K_ASYM,
    K_BELADY,
    K_BELADY_COMPUTE,
    K_CLOCK,
    K_FIFO,
    K_GDSF,
    K_GDSF_COMPUTE,
    K_LFU,
    K_LHD,
    K_LHD_COMPUTE,
    K_LIRS,
    K_LRU,
    K_PARTIAL,
    K_PARTIAL_FREQ,
    K_RANDOM,
    K_RANDOM_SMALL,
    K_S3FIFO,
    K_S3FIFOD,
    K_SESSION_ARC,
    K_SESSION_BELADY,
    K_SESSION_LRU,
    K_SESSION_RANDOM,
    K_SESSION_S3FIFO,
    K_SIEVE,
    K_SLRU,
    K_TWOQ,
    K_WORKLOAD,
    K_WTINYLFU,
    S_BLOCKS,
    S_CUR,
    S_ERR_A,
    S_ERR_B,
    S_EVICT,
    S_FREE_N,
    S_GHOST_LIMIT,
    S_HAND,
    S_HITS,
    S_LIMIT,
    S_REQ,
    S_RESUME,
    S_SELF,
    S_SHIFT,
    S_SIZE,
    S_SKIP,
    S_SKIP_DISTINCT,
    S_SKIP_INDEX,
    S_UNEXP,
    U8,
)
from simulator.kvcache.compiled._lfu import lfu_access, lfu_evict
from simulator.kvcache.compiled._lhd import lhd_evict, lhd_replay
from simulator.kvcache.compiled._lirs import lirs_evict, lirs_replay
from simulator.kvcache.compiled._partial import partial_evict, partial_replay
from simulator.kvcache.compiled._queues import S3_FREQ_CAP, s3fifo_evict, s3fifo_insert
from simulator.kvcache.compiled._random import random_evict, random_replay
from simulator.kvcache.compiled._segmented import (
    arc_evict,
    arc_replay,
    slru_evict,
    slru_replay,
    twoq_evict,
    twoq_replay,
)
from simulator.kvcache.compiled._session import (
    session_begin,
    session_evict,
    session_replay,
    session_room,
)
from simulator.kvcache.compiled._slots import FIBONACCI, make_room
from simulator.kvcache.compiled._tinylfu import wtinylfu_evict, wtinylfu_replay
from simulator.kvcache.compiled._workload import workload_evict, workload_replay

#: The kernel modules whose source ``serve`` is compiled from (see the module docstring).
KERNEL_MODULES = (
    "_layout", "_kernels", "_lfu", "_queues", "_segmented", "_heaps", "_slots", "_lirs",
    "_tinylfu", "_random", "_workload", "_partial", "_belady", "_lhd", "_session",
)  # fmt: skip
#: Python policy modules whose constants a kernel module imports (frozen into ``serve`` too).
CONSTANT_MODULES = ("wtinylfu", "lhd")

# The linked-list steps (unlink, push to the back or front) are written out where they are used
# instead of being small kernels: numba does not inline a call between kernels, and passing
# arrays to one per block costs a reference-count update per array and call (measured: the
# LRU serve loop ran at 6 M blocks/s through such helpers, over 60 M/s with them inline).


@njit()
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


@njit()
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


@njit()
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


@njit()
def _probe(
    blocks: I64, xs: I64, lo: int, hi: int, cur: int, res: U8, stamp: I64, plain: bool,
    costs: F64, ids: I64, table: I64, free: I64, st: I64,
) -> tuple[int, int, int, int, float]:  # fmt: skip
    """Phases 0 and 1 in one pass that changes no policy state: (distinct blocks, distinct
    resident blocks, hits at every position with repeats, position of the first miss or
    ``hi - lo``, summed cost of the hits). Each block's slot is looked up (taken if new) into
    ``xs[j - lo]`` and α is stamped with ``cur`` on the way. ``plain``: skip the cost sum (uniform
    costs, or stop-at-first-miss, which sums its counted prefix itself)."""
    distinct = resident = hits = 0
    first_miss = hi - lo
    saved = 0.0
    shift = st[S_SHIFT]
    mask = table.shape[0] - 1
    n_free = st[S_FREE_N]
    for j in range(lo, hi):
        # ``_slots``' lookup, written out: through a kernel (inlined or not) it took 40-50 ns
        # a block instead of 3 (measured on 10 M lookups in a 64 k-bucket table).
        block = blocks[j]
        h = ((block * FIBONACCI) >> shift) & mask
        x = table[h]
        while x and ids[x] != block:
            h = (h + 1) & mask
            x = table[h]
        if not x:  # first access since the block was forgotten: a free slot (serve keeps n)
            n_free -= 1
            x = free[n_free]
            ids[x] = block
            table[h] = x
        xs[j - lo] = x
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
    st[S_FREE_N] = n_free
    return distinct, resident, hits, first_miss, saved


@njit(inline="always")
def _evict(  # noqa: C901, PLR0911, PLR0912  (one return per policy)
    family: int, kind: int, want: int, pin: bool, cur: int, size: int, capacity: int, nxt: I64,
    prv: I64, res: U8, aux: U8, stamp: I64, scratch: I64, cls: I64, nodes: I64, keys: F64,
    heap: I64, ids: I64, links: I64, sketch: I64, sess: I64, stable: I64, pool: I64, st: I64,
    fs: F64, rng: Any,
) -> tuple[int, int]:  # fmt: skip
    """One ``evict_n(want, pinned)`` call of policy ``kind`` (of ``family``, a constant of the
    entry point this is inlined into: see the module docstring): (freed, of which in α); freed
    is -1 where the Python policy raises because every resident block is pinned, -2 where it
    raises ``KeyError`` (``E_KEY``)."""
    if family == FAM_SESSION:
        return session_evict(want, kind, pin, cur, size, rng, res, aux, nxt, prv, cls, keys,
            stamp, sess, stable, pool, nodes, st, fs)  # fmt: skip
    if family == FAM_LFU:
        return lfu_evict(want, pin, cur, res, nxt, prv, nodes, stamp)
    if family == FAM_QUEUES:
        return s3fifo_evict(want, kind == K_S3FIFOD, pin, cur, size, res, aux, nxt, prv, cls,
            nodes, stamp, st)  # fmt: skip
    if family == FAM_SEGMENTED:
        if kind == K_SLRU:
            return slru_evict(want, pin, cur, res, nxt, prv, cls, nodes, stamp)
        if kind == K_TWOQ:
            return twoq_evict(want, pin, cur, size, st[S_LIMIT], st[S_GHOST_LIMIT], res, nxt,
                prv, cls, nodes, stamp)  # fmt: skip
        return arc_evict(want, pin, cur, size, res, nxt, prv, cls, nodes, stamp, fs, F_POLICY)
    if family == FAM_LIRS:
        return lirs_evict(want, pin, cur, size, capacity, res, aux, links, nxt, prv, cls,
            nodes, stamp, ids, st)  # fmt: skip
    if family == FAM_TINYLFU:
        return wtinylfu_evict(want, pin, cur, res, nxt, prv, cls, nodes, stamp, sketch, links,
            ids, st)  # fmt: skip
    if family == FAM_RANDOM:
        return random_evict(want, kind == K_RANDOM_SMALL, pin, cur, rng, res, aux, nxt, prv,
            cls, keys, heap, scratch, stamp, links, ids, st)  # fmt: skip
    if family == FAM_LHD:
        return lhd_evict(want, kind == K_LHD_COMPUTE, pin, cur, rng, res, aux, nxt, prv, cls,
            keys, heap, scratch, stamp, links, ids, st, fs)  # fmt: skip
    if family == FAM_PARTIAL:
        return partial_evict(want, kind == K_PARTIAL_FREQ, pin, cur, rng, res, aux, nxt, prv,
            cls, keys, heap, scratch, stamp, links, nodes, ids, st)  # fmt: skip
    if family == FAM_WORKLOAD:
        return workload_evict(want, pin, cur, size, capacity, res, nxt, prv, cls, nodes, links,
            stamp, fs)  # fmt: skip
    if family == FAM_BELADY_COMPUTE:
        return bc_evict(want, pin, cur, size, res, prv, cls, links, nodes, ids, stamp, scratch,
            keys, st, fs)  # fmt: skip
    if family == FAM_HEAPS:
        return heap_evict(want, kind == K_BELADY, pin, cur, res, nxt, prv, cls, keys, heap,
            scratch, stamp, ids, st, fs)  # fmt: skip
    if kind == K_CLOCK:  # FAM_LISTS
        return _evict_clock(want, pin, cur, nxt, prv, res, aux, stamp, scratch)
    if kind == K_SIEVE:
        return _evict_sieve(want, pin, cur, size, nxt, prv, res, aux, stamp, st)
    return _evict_oldest(want, pin, cur, nxt, prv, res, stamp)


@njit(inline="always")
def _allocate(
    family: int, kind: int, needed: int, pin: bool, cur: int, size: int, capacity: int, nxt: I64,
    prv: I64, res: U8, aux: U8, stamp: I64, scratch: I64, cls: I64, nodes: I64, keys: F64,
    heap: I64, ids: I64, links: I64, sketch: I64, sess: I64, stable: I64, pool: I64, st: I64,
    fs: F64, rng: Any,
) -> tuple[int, int, int]:  # fmt: skip
    """Phase 2 (``replay._ServeLoop._allocate``): evict until ``needed`` victims outside α are
    gone. Returns (error code, resident blocks after, self-evictions). Every compiled policy
    reports exactly the victims it frees, so no round is an *unobserved* one."""
    self_evicted = progress = 0
    while progress < needed:
        want = needed - progress
        freed, inside = _evict(family, kind, want, pin, cur, size, capacity, nxt, prv, res, aux,
            stamp, scratch, cls, nodes, keys, heap, ids, links, sketch, sess, stable, pool, st,
            fs, rng)  # fmt: skip
        if freed == -2:
            return E_KEY, size, self_evicted
        if freed < 0:
            return E_ALL_PINNED, size, self_evicted
        if freed == 0:
            st[S_ERR_A] = size
            st[S_ERR_B] = want
            return E_NOTHING_FREED, size, self_evicted
        size -= freed
        st[S_EVICT] += freed
        self_evicted += inside
        progress += freed - inside
    return E_OK, size, self_evicted


@njit()
def _cost_sums(
    n: int, counted: int, saved: float, stop_at_miss: bool, costs: F64, cumulative: F64,
    fs: F64,
) -> None:  # fmt: skip
    """Add one served request's costs under a non-uniform model; ``counted`` = hits the match
    mode counts, ``saved`` = the summed cost of its hits (unless ``stop_at_miss``)."""
    fs[F_TOTAL] += cumulative[n]
    if stop_at_miss:  # the counted prefix, summed left to right as Python's sum() does
        for p in range(counted):
            saved += costs[p]
    fs[F_SAVED] += saved


@njit(inline="always")
def _replay_other(  # noqa: C901, PLR0911, PLR0912  (one return per policy)
    family: int, kind: int, capacity: int, xs: I64, lo: int, hi: int, deepest_first: bool,
    size: int, uniform: bool, costs: F64, logcosts: F64, stamp: float, future: I64, nxt: I64,
    prv: I64, res: U8, aux: U8, cls: I64, nodes: I64, keys: F64, heap: I64, ids: I64,
    links: I64, sketch: I64, sess: I64, stable: I64, pool: I64, st: I64, fs: F64,
) -> tuple[int, int]:  # fmt: skip
    """Phase 3 of the policies with a per-request replay kernel (one call per request, the
    per-block loop inside it, over the slots ``xs``); returns (error code, the resident count
    after)."""
    if family == FAM_SESSION:
        return E_OK, session_replay(kind, xs, lo, hi, deepest_first, size, uniform, costs, res,
            aux, nxt, prv, cls, keys, links, sess, stable, pool, nodes, st, fs)  # fmt: skip
    if family == FAM_BELADY_COMPUTE:
        return E_OK, bc_replay(xs, future, lo, hi, deepest_first, size, uniform, res, prv, cls,
            links, nodes, ids, keys, st, fs)  # fmt: skip
    if family == FAM_SEGMENTED:
        if kind == K_SLRU:
            return E_OK, slru_replay(xs, lo, hi, deepest_first, size, st[S_LIMIT], res, nxt,
                prv, cls, nodes)  # fmt: skip
        if kind == K_TWOQ:
            return E_OK, twoq_replay(xs, lo, hi, deepest_first, size, res, nxt, prv, cls, nodes)
        return E_OK, arc_replay(xs, lo, hi, deepest_first, size, capacity, res, nxt, prv, cls,
            nodes, fs, F_POLICY)  # fmt: skip
    if family == FAM_LIRS:
        return lirs_replay(xs, lo, hi, deepest_first, size, res, aux, links, nxt, prv, cls,
            nodes, ids, st)  # fmt: skip
    if family == FAM_RANDOM:
        return E_OK, random_replay(xs, lo, hi, deepest_first, size, kind == K_RANDOM_SMALL,
            uniform, costs, res, aux, nxt, prv, cls, keys, heap, links, st)  # fmt: skip
    if family == FAM_LHD:
        return E_OK, lhd_replay(xs, lo, hi, deepest_first, size, uniform, costs, res, cls, keys,
            heap, links, st, fs)  # fmt: skip
    if family == FAM_PARTIAL:
        return E_OK, partial_replay(xs, lo, hi, deepest_first, size, uniform, costs, res, nxt,
            prv, cls, keys, heap, links, nodes, st)  # fmt: skip
    if family == FAM_WORKLOAD:  # ``stamp``: the request's category (a dense index, ``engine``)
        return E_OK, workload_replay(xs, lo, hi, deepest_first, size, int(stamp), res, nxt,
            prv, cls, nodes, links, st, fs)  # fmt: skip
    if family == FAM_TINYLFU:
        return E_OK, wtinylfu_replay(xs, lo, hi, deepest_first, size, res, nxt, prv, cls,
            nodes, sketch, links, ids, st)  # fmt: skip
    if kind == K_BELADY:  # FAM_HEAPS
        return E_OK, belady_replay(xs, future, lo, hi, deepest_first, size, res, nxt, prv,
            keys, heap, ids, st)  # fmt: skip
    if kind == K_ASYM:
        return E_OK, asym_replay(xs, lo, hi, deepest_first, size, uniform, stamp, logcosts,
            res, nxt, prv, keys, heap, ids, st)  # fmt: skip
    use_cost = kind == K_GDSF_COMPUTE and not uniform  # uniform: every weight is 1
    return E_OK, gdsf_replay(xs, lo, hi, deepest_first, size, use_cost, costs, res, nxt, prv,
        cls, keys, heap, ids, st, fs)  # fmt: skip


@njit(inline="always")
def _replay_blocks(
    family: int, kind: int, top: int, capacity: int, xs: I64, lo: int, hi: int,
    deepest_first: bool, size: int, nxt: I64, prv: I64, res: U8, aux: U8, cls: I64, nodes: I64,
    st: I64,
) -> int:  # fmt: skip
    """Phase 3 of the families below ``FAM_SEGMENTED``, their access steps per block inline
    (see above); returns the resident count after."""
    for step in range(hi - lo):
        x = xs[hi - lo - 1 - step if deepest_first else step]
        if family == FAM_LFU:
            size += lfu_access(x, res, nxt, prv, cls, nodes)
            continue
        if family == FAM_QUEUES:
            if res[x]:  # in the small or the main queue: one more hit, capped
                aux[x] = min(aux[x] + 1, S3_FREQ_CAP)
            else:
                s3fifo_insert(x, kind == K_S3FIFOD, capacity, res, aux, nxt, prv, cls, nodes, st)
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
    return size


def source_key() -> int:
    """A 62-bit hash of every kernel module's source, and of the policy modules they take
    constants from (in the cache key of every entry point)."""
    digest = hashlib.sha256()
    here = Path(__file__).parent
    for name in KERNEL_MODULES:
        digest.update((here / f"{name}.py").read_bytes())
    for name in CONSTANT_MODULES:
        digest.update((here.parent / "policies" / f"{name}.py").read_bytes())
    return int.from_bytes(digest.digest()[:8], "big") >> 2


#: Each family's name (its entry point is ``serve_<name>``) and the policy kinds it serves.
FAMILIES: dict[int, tuple[str, tuple[int, ...]]] = {
    FAM_LISTS: ("lists", (K_LRU, K_FIFO, K_CLOCK, K_SIEVE)),
    FAM_LFU: ("lfu", (K_LFU,)),
    FAM_QUEUES: ("queues", (K_S3FIFO, K_S3FIFOD)),
    FAM_SEGMENTED: ("segmented", (K_SLRU, K_TWOQ, K_ARC)),
    FAM_HEAPS: ("heaps", (K_GDSF, K_GDSF_COMPUTE, K_BELADY, K_ASYM)),
    FAM_BELADY_COMPUTE: ("belady_compute", (K_BELADY_COMPUTE,)),
    FAM_LIRS: ("lirs", (K_LIRS,)),
    FAM_TINYLFU: ("tinylfu", (K_WTINYLFU,)),
    FAM_RANDOM: ("random", (K_RANDOM, K_RANDOM_SMALL)),
    FAM_WORKLOAD: ("workload", (K_WORKLOAD,)),
    FAM_PARTIAL: ("partial", (K_PARTIAL, K_PARTIAL_FREQ)),
    FAM_LHD: ("lhd", (K_LHD, K_LHD_COMPUTE)),
    FAM_SESSION: (
        "session",
        (K_SESSION_LRU, K_SESSION_BELADY, K_SESSION_RANDOM, K_SESSION_S3FIFO, K_SESSION_ARC),
    ),
}
_FAMILY_OF = {kind: family for family, (_, kinds) in FAMILIES.items() for kind in kinds}


def _build_serve(key: int, family: int) -> Any:  # noqa: C901, PLR0915  (serve, below)
    """The entry point of ``family``, compiled in a closure over ``key`` and ``family`` (see
    the module docstring: numba's cache index hashes the closure's cells, so the cached
    machine code follows every kernel file, and numba prunes on ``family`` as a constant)."""

    def serve(  # noqa: C901, PLR0911, PLR0912, PLR0915  (phases 0-3 of a request, in one loop)
        kind: int, top: int, capacity: int, blocks: I64, offsets: I64, first_index: int,
        uniform: bool, costs: F64, cumulative: F64, logcosts: F64, rq_f: F64, rq_i: I64,
        future: I64, stop_at_miss: bool, deepest_first: bool, pin: bool, verify: bool, xs: I64,
        nxt: I64, prv: I64, res: U8, aux: U8, stamp: I64, scratch: I64, cls: I64, nodes: I64,
        keys: F64, heap: I64, ids: I64, table: I64, free: I64, links: I64, sketch: I64,
        sess: I64, stable: I64, pool: I64, st: I64, fs: F64, rng: Any,
    ) -> int:  # fmt: skip
        """Serve requests ``offsets[r]:offsets[r+1]`` of ``blocks`` (ids in prefix order, any
        int64) with policy ``kind``, of this entry point's family.

        ``first_index`` is the workload index of the first one; ``top`` is CLOCK's counter
        ceiling. With ``uniform`` False, ``costs[p]`` is the cost of position p and
        ``cumulative[n]`` the cost of an n-block request (both at least as long as the longest
        request); ``logcosts[p]`` = log2 of ``costs[p]`` (AsymCache; else empty). ``rq_f[r]``
        is a per-request value of request ``offsets[r]:offsets[r+1]`` (AsymCache: its
        timestamp / half_life; WorkloadAware: its category's dense index; else empty);
        ``rq_i[r]`` = (its session id, the request index of the session's next turn) for the
        session policies (else empty), whose session table, its hash table and path pool are
        ``sess``, ``stable`` and ``pool`` (``_session``; else empty).
        ``future[j]`` is the next access of ``blocks[j]`` (oracles; else empty).
        ``xs`` (as long as the longest request) receives the slots of the request being
        served; ``ids``, ``table`` and ``free`` are the slot structures of ``_slots``;
        ``links`` (rows of per-slot links or marks) and ``sketch`` are LIRS's and W-TinyLFU's
        (``_lirs``, ``_tinylfu``; else empty); ``rng`` is the policy's generator (the
        random policies draw from it, ``_random``). Returns
        ``E_OK``, ``E_GROW`` (the state is consistent: grow the slots, or the session arrays
        ``st[S_SESS_NEED]``/``st[S_POOL_NEED]`` name, and call again with the requests from
        ``st[S_RESUME]`` on) or another ``E_*`` code (the state is then not to be used again).
        """
        if key < 0:  # never: reading ``key`` makes it a cell of this closure (the cache key)
            return E_LOST
        size = st[S_SIZE]
        cur = st[S_CUR]
        plain = uniform or stop_at_miss
        queues = kind in (K_S3FIFO, K_S3FIFOD, K_SLRU, K_TWOQ, K_ARC, K_LIRS, K_WTINYLFU,
                          K_WORKLOAD)  # fmt: skip
        for r in range(offsets.shape[0] - 1):
            lo = offsets[r]
            hi = offsets[r + 1]
            n = hi - lo
            # Each access may take a slot: make room (a sweep) only when they may run out.
            if (st[S_FREE_N] < n and not make_room(n, queues, res, cls, aux, stamp, ids, table,
                                                   free, links, st)) or (
                family == FAM_SESSION and not session_room(n, sess, stable, pool, st)
            ):  # fmt: skip
                st[S_RESUME] = r
                st[S_SIZE] = size
                st[S_CUR] = cur
                return E_GROW
            cur += 1
            distinct, resident, hits, first_miss, saved = _probe(
                blocks, xs, lo, hi, cur, res, stamp, plain, costs, ids, table, free, st
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
                fs[F_TOTAL] += n
                fs[F_SAVED] += counted
            else:
                _cost_sums(n, counted, saved, stop_at_miss, costs, cumulative, fs)
            if family == FAM_SESSION:  # ``set_request_ctx``
                session_begin(kind, rq_i[r, 0], rq_i[r, 1], sess, stable, nodes, st, fs)
            missing = distinct - resident
            needed = missing - (capacity - size)
            self_evicted = 0
            if needed > 0:
                code, size, self_evicted = _allocate(family, kind, needed, pin, cur, size, capacity,
                    nxt, prv, res, aux, stamp, scratch, cls, nodes, keys, heap, ids, links,
                    sketch, sess, stable, pool, st, fs, rng)  # fmt: skip
                if code != E_OK:
                    return code
                st[S_SELF] += self_evicted
            # Phase 3 (``replay._ServeLoop._access``, each policy's ``_replay`` body per
            # block): replay α (``xs[j - lo]``: the slot of ``blocks[j]``).
            before = size
            if family > FAM_QUEUES:
                value = rq_f[r] if rq_f.shape[0] else 0.0
                code, size = _replay_other(family, kind, capacity, xs, lo, hi, deepest_first,
                    size, uniform, costs, logcosts, value, future, nxt, prv, res, aux, cls,
                    nodes, keys, heap, ids, links, sketch, sess, stable, pool, st,
                    fs)  # fmt: skip
                if code != E_OK:
                    return code
            else:
                size = _replay_blocks(family, kind, top, capacity, xs, lo, hi, deepest_first,
                                      size, nxt, prv, res, aux, cls, nodes, st)  # fmt: skip
            if size > capacity:
                st[S_ERR_A] = size
                return E_OVER_CAPACITY
            inserts = missing + self_evicted  # α's distinct blocks not resident before
            if size < before + inserts:
                st[S_UNEXP] += before + inserts - size
            if verify:
                for j in range(lo, hi):
                    if not res[xs[j - lo]]:
                        st[S_ERR_A] = blocks[j]
                        return E_LOST
        st[S_SIZE] = size
        st[S_CUR] = cur
        return E_OK

    # numba names a cached function's index and data files after its qualified name: one set
    # per family, so that processes compiling different families at once never rewrite the
    # same index (numba numbers the data files from the index it read: two writers of one
    # index could leave one family's key pointing at the other's machine code).
    serve.__name__ = serve.__qualname__ = f"serve_{FAMILIES[family][0]}"
    return cached_njit(serve)


SOURCE_KEY = source_key()


@functools.cache
def _entry_point(family: int) -> Any:
    return _build_serve(SOURCE_KEY, family)


def serve_for(kind: int) -> Any:
    """The entry point that serves policy ``kind``: its family's (built on first use; numba
    compiles it, or loads it from its cache, on its first call)."""
    return _entry_point(_FAMILY_OF[kind])
