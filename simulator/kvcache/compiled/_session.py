"""Session kernels: the session-level policies (``policies/session.py``,
``policies/session_variants.py``): session_lru, session_belady, session_random_compute,
session_s3fifo and session_arc. The victim is a conversation; a block leaves when no session's
latest turn claims it (``session._SessionPolicy``, whose docstring is the contract).

Blocks (per slot, ``_slots``): ``res`` = resident, ``cls`` = its claim count (sessions whose
latest path holds it), ``aux`` = 1 while it is an *orphan* (resident, unclaimed), the orphans
being one FIFO through ``nxt``/``prv`` with slot 0 as its sentinel (oldest at ``nxt[0]``, the
Python ``_orphans``); ``links[0]`` = the served-request number (``st[S_REQ]``) that last
claimed it, so a request's distinct blocks are claimed once; ``keys`` = the cost of its last
access (session_random_compute's ``_cost``). Every claimed block is resident between requests
(a claimed block is never evicted, and phase 3 makes the request's claimed blocks resident),
so the slot sweep, which keeps resident slots, never recycles a slot a path holds.

Sessions live in *session slots* 1 … M - 1, the columns of ``sess`` (rows ``R_*``); a hash
table ``stable`` (linear probing, ``_slots``' Fibonacci hashing with ``st[S_SESS_SHIFT]``) maps a
session key (the trace's session id, or -2, -3, … for requests without one, numbered in
serving order as the Python policy numbers them) to its slot, and ``sess[R_FREE,
:st[S_SESS_FREE_N]]`` stacks the free ones. A session keeps its slot while it is in the
Python ``_paths`` (``R_PATH`` ≠ -1) or in one of its policy's structures (``R_Q`` ≠ 0: a queue
or ghost queue of ``nodes`` through ``R_NXT``/``R_PRV``, as ``_queues`` chains block slots;
session_belady's heap, session_random_compute's dense list); the slot is freed (deleted
from the table by backward shift) the moment it is in neither. ``session_room`` makes sure a
request finds a free session slot and room for its path, else the driver grows the arrays.

A session's latest path (its distinct blocks, prefix order) is a record of the *pool*:
``pool[o]`` = its session slot (0 once replaced or released: garbage), ``pool[o + 1]`` = its
length, then its block slots; ``R_PATH`` = ``o``, or -2 for the empty path of a session that
has none yet (``_paths.setdefault(session, ())``). Records are appended at ``st[S_POOL_TOP]``;
``session_room`` compacts the pool when the next request's path would not fit.

Per policy (``R_VAL`` / ``R_POS`` / ``R_TIE`` and ``nodes`` columns):

- session_lru: one LRU queue of sessions (column ``SQ_ORDER``);
- session_belady: an indexed heap (``_heaps``, oracle order) of slots in ``R_HEAP``, ``R_POS``
  = the position, ``R_VAL`` = the next turn's request index, ``R_TIE`` = -(serve sequence
  number), so the least ``(-next, seq)`` pops first as from the Python ``KeyedHeap``;
- session_random_compute: ``ResidentSample``'s dense list of session slots in ``R_HEAP[0:n]``
  (``n`` = ``st[S_HEAP_N]``, same order: appended, the last moved into a removed one's place),
  ``R_POS`` = the index, ``R_VAL`` = the tick of its last touch (``st[S_SEQ]``); draws from
  the policy's own generator (``_random``);
- session_s3fifo: S3-FIFO's small, main and ghost queues (``Q_SMALL``, ``Q_MAIN``,
  ``Q_GHOST``), ``R_VAL`` = touches; ``small_ratio`` in ``fs[F_POLICY]``;
- session_arc: T1, T2, B1, B2 (``Q_T1`` … ``Q_B2``), the target p in ``fs[F_POLICY]``.

Not cached on its own: only the entry points of ``_kernels`` are (see there).
"""

# ruff: noqa: PLR0917  (numba kernels take their state arrays positionally)

from __future__ import annotations

import math
from typing import Any

from numba import njit

from simulator.kvcache.compiled._heaps import _heap_pop, _heap_push, _sift
from simulator.kvcache.compiled._layout import (
    COUNT,
    F64,
    F_POLICY,
    I64,
    K_SESSION_ARC,
    K_SESSION_BELADY,
    K_SESSION_LRU,
    K_SESSION_RANDOM,
    Q_B1,
    Q_B2,
    Q_GHOST,
    Q_MAIN,
    Q_SMALL,
    Q_T1,
    Q_T2,
    S_CUR_NEXT,
    S_CUR_SESSION,
    S_ERR_A,
    S_HEAP_N,
    S_LIMIT,
    S_NEUMAIER,
    S_POOL_NEED,
    S_POOL_TOP,
    S_REQ,
    S_SEQ,
    S_SESS_ANON,
    S_SESS_FREE_N,
    S_SESS_NEED,
    S_SESS_SHIFT,
    U8,
)
from simulator.kvcache.compiled._queues import q_pop, q_push, q_take
from simulator.kvcache.compiled._slots import FIBONACCI

#: Rows of the session table ``sess`` (one column per session slot).
R_KEY, R_LIVE, R_NXT, R_PRV, R_Q, R_VAL, R_POS, R_TIE, R_PATH, R_HEAP, R_FREE = range(11)
N_SESSION_ROWS = 11
SQ_ORDER = 1  # session_lru's queue (a column of ``nodes``)
NO_PATH = -1  # ``R_PATH`` of a session not in the Python ``_paths``
EMPTY_PATH = -2  # ... of one there with the empty path
_TOUCH_CAP = 3  # ``session_variants._TOUCH_CAP``


# -- session slots ------------------------------------------------------------------------


@njit(inline="always")
def _home(key: int, stable: I64, st: I64) -> int:
    """The home bucket of session ``key`` (``_slots``' hash)."""
    return ((key * FIBONACCI) >> st[S_SESS_SHIFT]) & (stable.shape[0] - 1)  # type: ignore[no-any-return]


@njit()
def _slot_of(key: int, sess: I64, stable: I64, st: I64) -> int:
    """The slot of session ``key``, taken from the free stack if it has none (``session_room``
    leaves one free at the start of every request, and a request takes at most one more after
    releasing it: see ``session_begin``, ``record``)."""
    mask = stable.shape[0] - 1
    h = _home(key, stable, st)
    s = stable[h]
    while s and sess[R_KEY, s] != key:
        h = (h + 1) & mask
        s = stable[h]
    if s:
        return s  # type: ignore[no-any-return]
    n_free = st[S_SESS_FREE_N] - 1
    st[S_SESS_FREE_N] = n_free
    s = sess[R_FREE, n_free]
    stable[h] = s
    sess[R_KEY, s] = key
    sess[R_LIVE, s] = 1
    sess[R_PATH, s] = NO_PATH
    sess[R_Q, s] = 0
    return s  # type: ignore[no-any-return]


@njit()
def _forget(s: int, sess: I64, stable: I64, st: I64) -> None:
    """Free slot ``s`` if its session is neither in ``_paths`` nor in a structure: out of the
    table (backward-shift deletion, so no tombstones) and onto the free stack."""
    if sess[R_Q, s] or sess[R_PATH, s] != NO_PATH:
        return
    mask = stable.shape[0] - 1
    i = _home(sess[R_KEY, s], stable, st)
    while stable[i] != s:
        i = (i + 1) & mask
    j = i
    while True:  # move later entries of the run into the hole when their home allows
        j = (j + 1) & mask
        y = stable[j]
        if not y:
            break
        h = _home(sess[R_KEY, y], stable, st)
        if (h <= i or h > j) if i <= j else (h <= i and h > j):
            stable[i] = y
            i = j
    stable[i] = 0
    sess[R_LIVE, s] = 0
    sess[R_FREE, st[S_SESS_FREE_N]] = s
    st[S_SESS_FREE_N] += 1


@njit()
def _rebuild(sess: I64, stable: I64, st: I64) -> None:
    """The table and free stack from ``R_LIVE`` (after the driver grew the arrays)."""
    stable[:] = 0
    mask = stable.shape[0] - 1
    n_free = 0
    for s in range(sess.shape[1] - 1, 0, -1):  # pushed high to low: low slots are taken first
        if sess[R_LIVE, s]:
            h = _home(sess[R_KEY, s], stable, st)
            while stable[h]:
                h = (h + 1) & mask
            stable[h] = s
        else:
            sess[R_FREE, n_free] = s
            n_free += 1
    st[S_SESS_FREE_N] = n_free


@njit()
def _compact(sess: I64, pool: I64, st: I64) -> None:
    """Move the live path records to the front of the pool, in order."""
    top = st[S_POOL_TOP]
    src = dst = 0
    while src < top:
        owner = pool[src]
        width = pool[src + 1] + 2
        if owner:
            if dst != src:
                for i in range(width):
                    pool[dst + i] = pool[src + i]
                sess[R_PATH, owner] = dst
            dst += width
        src += width
    st[S_POOL_TOP] = dst


@njit()
def session_room(n: int, sess: I64, stable: I64, pool: I64, st: I64) -> bool:
    """Before a request of ``n`` accesses: a free session slot and room for a path of ``n``
    blocks at the pool's top (rebuilding the table after growth, compacting the pool). False
    if the arrays must grow first: ``st[S_SESS_NEED]`` / ``st[S_POOL_NEED]`` (non-zero) say
    how many session slots / pool entries must fit, ``st[S_ERR_A]`` = 0 (no block slots)."""
    ok = True
    if st[S_SESS_FREE_N] < 1:
        _rebuild(sess, stable, st)
        slots = sess.shape[1] - 1
        if st[S_SESS_FREE_N] < 1 or 4 * st[S_SESS_FREE_N] < slots:  # a quarter free, as _slots
            st[S_SESS_NEED] = slots - st[S_SESS_FREE_N] + 1
            ok = False
    need = n + 2
    if st[S_POOL_TOP] + need > pool.shape[0]:
        _compact(sess, pool, st)
        if st[S_POOL_TOP] + need > pool.shape[0] or 4 * (st[S_POOL_TOP] + need) > 3 * pool.shape[0]:
            st[S_POOL_NEED] = st[S_POOL_TOP] + need
            ok = False
    if not ok:
        st[S_ERR_A] = 0
    return ok


# -- the session orders (``_touch``, ``_pop_victim_session``) -------------------------------
# Sessions are queued as ``_queues`` queues block slots (``R_NXT``, ``R_PRV``, ``R_Q`` for
# ``nxt``, ``prv``, ``cls``), through these three wrappers, which take the rows from ``sess``
# (a call per touch or victim: nothing to save by inlining them into every caller).


@njit()
def _s_push(nodes: I64, q: int, s: int, sess: I64) -> None:
    """Session slot ``s`` (in no queue) to the newest end of queue ``q``."""
    q_push(nodes, q, s, sess[R_NXT], sess[R_PRV], sess[R_Q])


@njit()
def _s_take(nodes: I64, s: int, sess: I64) -> None:
    """Session slot ``s`` out of its queue."""
    q_take(nodes, s, sess[R_NXT], sess[R_PRV], sess[R_Q])


@njit()
def _s_pop(nodes: I64, q: int, sess: I64) -> int:
    """The oldest session slot of queue ``q`` (not empty), taken out."""
    return q_pop(nodes, q, sess[R_NXT], sess[R_PRV], sess[R_Q])


@njit()
def _touch(kind: int, s: int, next_turn: int, sess: I64, nodes: I64, st: I64, fs: F64) -> None:
    """The policy's ``_touch``: session slot ``s`` is being served (``next_turn``: the request
    index of its next turn, session_belady's)."""
    q = sess[R_Q, s]
    if kind == K_SESSION_LRU:
        if q:
            _s_take(nodes, s, sess)
        _s_push(nodes, SQ_ORDER, s, sess)
    elif kind == K_SESSION_BELADY:
        st[S_SEQ] += 1
        sess[R_VAL, s] = next_turn
        sess[R_TIE, s] = -st[S_SEQ]
        if q:
            _sift(sess[R_POS, s], st[S_HEAP_N], sess[R_HEAP], sess[R_POS], fs, sess[R_VAL],
                sess[R_TIE], True)  # fmt: skip
        else:
            _heap_push(s, sess[R_HEAP], sess[R_POS], fs, sess[R_VAL], sess[R_TIE], True, st)
            sess[R_Q, s] = 1
    elif kind == K_SESSION_RANDOM:
        st[S_SEQ] += 1
        if not q:  # ``ResidentSample.add``
            n = st[S_HEAP_N]
            sess[R_HEAP, n] = s
            sess[R_POS, s] = n
            st[S_HEAP_N] = n + 1
            sess[R_Q, s] = 1
        sess[R_VAL, s] = st[S_SEQ]
    elif kind == K_SESSION_ARC:
        _arc_touch(s, q, sess, nodes, fs)
    elif q in (Q_SMALL, Q_MAIN):  # session_s3fifo
        sess[R_VAL, s] = min(sess[R_VAL, s] + 1, _TOUCH_CAP)
    else:
        if q:  # in the ghost: evicted from S recently, it deserved M
            _s_take(nodes, s, sess)
        _s_push(nodes, Q_MAIN if q else Q_SMALL, s, sess)
        sess[R_VAL, s] = 0


@njit()
def _arc_touch(s: int, q: int, sess: I64, nodes: I64, fs: F64) -> None:
    """``SessionArc._touch``: T1 -> T2, T2 -> its MRU end, a ghost hit moves p (by the ghosts'
    size ratio, at least 1, within 0 … the queued sessions) and enters T2; new: T1."""
    if q == Q_B1:
        step = max(1.0, nodes[COUNT, Q_B2] / nodes[COUNT, Q_B1])
        queued = max(1, nodes[COUNT, Q_T1] + nodes[COUNT, Q_T2])
        fs[F_POLICY] = min(float(queued), fs[F_POLICY] + step)
    elif q == Q_B2:
        step = max(1.0, nodes[COUNT, Q_B1] / nodes[COUNT, Q_B2])
        fs[F_POLICY] = max(0.0, fs[F_POLICY] - step)
    if q:
        _s_take(nodes, s, sess)
    _s_push(nodes, Q_T2 if q else Q_T1, s, sess)


@njit()
def _score(
    s: int, res: U8, keys: F64, sess: I64, pool: I64, st: I64
) -> float:  # fmt: skip
    """``SessionRandomCompute.session_score``: the cost of the resident blocks of its latest
    path over its age in touches. The sum is Python's ``sum()`` of floats: left to right from
    the integer 0, with Neumaier's compensation where the interpreter uses it (3.12 on:
    ``st[S_NEUMAIER]``), so the score is bit for bit the Python one."""
    total = 0.0
    carry = 0.0
    started = False
    o = sess[R_PATH, s]
    for i in range(pool[o + 1] if o >= 0 else 0):
        y = pool[o + 2 + i]
        if not res[y]:
            continue
        x = keys[y]
        if not started or not st[S_NEUMAIER]:
            total += x  # the first term: 0 + x, as the integer start adds it
            started = True
            continue
        t = total + x
        if abs(total) >= abs(x):
            carry += (total - t) + x
        else:
            carry += (x - t) + total
        total = t
    if carry and math.isfinite(carry):
        total += carry
    return total / (st[S_SEQ] - sess[R_VAL, s] + 1)  # type: ignore[no-any-return]


@njit()
def _pop_random(rng: Any, res: U8, keys: F64, sess: I64, pool: I64, st: I64) -> int:
    """``SessionRandomCompute._pop_victim_session``: ``n_sample`` uniform draws from the dense
    list; the lowest (score, last touch, key) leaves it."""
    n = st[S_HEAP_N]
    if not n:
        return 0
    uniforms = rng.random(st[S_LIMIT])
    best = 0
    best_score = 0.0
    for u in uniforms:
        s = sess[R_HEAP, int(u * n)]
        score = _score(s, res, keys, sess, pool, st)
        if (
            best == 0
            or score < best_score
            or (
                score == best_score
                and (
                    sess[R_VAL, s] < sess[R_VAL, best]
                    or (sess[R_VAL, s] == sess[R_VAL, best] and sess[R_KEY, s] < sess[R_KEY, best])
                )
            )
        ):
            best = s
            best_score = score
    n -= 1  # ``ResidentSample.discard``: the last takes its place
    last = sess[R_HEAP, n]
    if last != best:
        i = sess[R_POS, best]
        sess[R_HEAP, i] = last
        sess[R_POS, last] = i
    st[S_HEAP_N] = n
    sess[R_Q, best] = 0
    return best


@njit()
def _pop_s3fifo(sess: I64, stable: I64, nodes: I64, st: I64, fs: F64) -> int:
    """``SessionS3Fifo._pop_victim_session``: S's oldest leaves S while S holds its share
    (promoted to M if touched, else the victim, its id in the ghost); otherwise M's oldest,
    reinserted with one touch fewer while it has any."""
    while nodes[COUNT, Q_SMALL] or nodes[COUNT, Q_MAIN]:
        small = nodes[COUNT, Q_SMALL]
        queued = small + nodes[COUNT, Q_MAIN]
        if small and (small >= max(1.0, fs[F_POLICY] * queued) or not nodes[COUNT, Q_MAIN]):
            s = _s_pop(nodes, Q_SMALL, sess)
            if sess[R_VAL, s] > 0:
                _s_push(nodes, Q_MAIN, s, sess)
                sess[R_VAL, s] = 0
                continue
            _s_push(nodes, Q_GHOST, s, sess)
            while nodes[COUNT, Q_GHOST] > max(1, nodes[COUNT, Q_MAIN]):
                _forget(_s_pop(nodes, Q_GHOST, sess), sess, stable, st)
            return s
        s = _s_pop(nodes, Q_MAIN, sess)
        if sess[R_VAL, s] > 0:
            _s_push(nodes, Q_MAIN, s, sess)
            sess[R_VAL, s] -= 1
            continue
        return s
    return 0


@njit()
def _pop_arc(sess: I64, stable: I64, nodes: I64, st: I64, fs: F64) -> int:
    """``SessionArc._pop_victim_session``: T1's LRU while |T1| > p (or T2 is empty), else
    T2's, its id into B1 / B2; both ghosts are then cut to the queued sessions (at least 1)."""
    if nodes[COUNT, Q_T1] and (nodes[COUNT, Q_T1] > fs[F_POLICY] or not nodes[COUNT, Q_T2]):
        s = _s_pop(nodes, Q_T1, sess)
        _s_push(nodes, Q_B1, s, sess)
    elif nodes[COUNT, Q_T2]:
        s = _s_pop(nodes, Q_T2, sess)
        _s_push(nodes, Q_B2, s, sess)
    else:
        return 0
    limit = max(1, nodes[COUNT, Q_T1] + nodes[COUNT, Q_T2])
    for ghost in (Q_B1, Q_B2):
        while nodes[COUNT, ghost] > limit:
            _forget(_s_pop(nodes, ghost, sess), sess, stable, st)
    return s


@njit()
def _pop_victim(  # noqa: PLR0911  (one return per policy)
    kind: int, rng: Any, res: U8, keys: F64, sess: I64, stable: I64, pool: I64, nodes: I64,
    st: I64, fs: F64,
) -> int:  # fmt: skip
    """The policy's ``_pop_victim_session``: the next session slot to evict, 0 if none."""
    if kind == K_SESSION_LRU:
        if not nodes[COUNT, SQ_ORDER]:
            return 0
        return _s_pop(nodes, SQ_ORDER, sess)
    if kind == K_SESSION_BELADY:
        if not st[S_HEAP_N]:
            return 0
        s = _heap_pop(sess[R_HEAP], sess[R_POS], fs, sess[R_VAL], sess[R_TIE], True, st)
        sess[R_Q, s] = 0
        return s
    if kind == K_SESSION_RANDOM:
        return _pop_random(rng, res, keys, sess, pool, st)
    if kind == K_SESSION_ARC:
        return _pop_arc(sess, stable, nodes, st, fs)
    return _pop_s3fifo(sess, stable, nodes, st, fs)


# -- claims, orphans and the serve-loop verbs -----------------------------------------------


@njit()
def _orphan(x: int, aux: U8, nxt: I64, prv: I64) -> None:
    """Append block slot ``x`` to the orphans (the newest end)."""
    tail = prv[0]
    nxt[tail] = x
    prv[x] = tail
    nxt[x] = 0
    prv[0] = x
    aux[x] = 1


@njit()
def _adopt(x: int, aux: U8, nxt: I64, prv: I64) -> None:
    """Take block slot ``x`` out of the orphans."""
    before = prv[x]
    after = nxt[x]
    nxt[before] = after
    prv[after] = before
    aux[x] = 0


@njit()
def _release(
    o: int, evict: bool, pin: bool, cur: int, res: U8, aux: U8, nxt: I64, prv: I64, cls: I64,
    stamp: I64, pool: I64,
) -> tuple[int, int]:  # fmt: skip
    """Drop one claim on every block of path record ``o`` (then garbage). A block left without
    a claim is evicted with ``evict`` (unless pinned: α with ``pin``), else it becomes an
    orphan. Returns (evicted, of which in α)."""
    if o < 0:
        return 0, 0
    width = pool[o + 1]
    pool[o] = 0
    freed = inside = 0
    for i in range(width):
        y = pool[o + 2 + i]
        cls[y] -= 1
        if cls[y] or not res[y]:
            continue
        if evict and not (pin and stamp[y] == cur):
            res[y] = 0
            freed += 1
            inside += stamp[y] == cur
        else:
            _orphan(y, aux, nxt, prv)
    return freed, inside


@njit()
def session_begin(
    kind: int, key: int, next_turn: int, sess: I64, stable: I64, nodes: I64, st: I64, fs: F64
) -> None:  # fmt: skip
    """``set_request_ctx`` of a served request: its session (``key`` < 0: a new anonymous one,
    -2, -3, …) is the current one, enters ``_paths`` with the empty path if it is not there,
    and is touched."""
    if key < 0:
        key = st[S_SESS_ANON]
        st[S_SESS_ANON] -= 1
    st[S_CUR_SESSION] = key
    st[S_CUR_NEXT] = next_turn
    s = _slot_of(key, sess, stable, st)
    if sess[R_PATH, s] == NO_PATH:
        sess[R_PATH, s] = EMPTY_PATH
    _touch(kind, s, next_turn, sess, nodes, st, fs)


@njit()
def session_evict(
    want: int, kind: int, pin: bool, cur: int, size: int, rng: Any, res: U8, aux: U8,
    nxt: I64, prv: I64, cls: I64, keys: F64, stamp: I64, sess: I64, stable: I64, pool: I64,
    nodes: I64, st: I64, fs: F64,
) -> tuple[int, int]:  # fmt: skip
    """``_SessionPolicy.evict_n``: the oldest unpinned orphans first, then whole sessions
    until ``want`` blocks are freed (a session may free more, or nothing: the next is tried).
    Returns (freed, of which in α); freed = -1 where Python raises (nothing freed while blocks
    are resident)."""
    freed = inside = 0
    x = nxt[0]
    while freed < want and x:
        after = nxt[x]
        if not (pin and stamp[x] == cur):
            _adopt(x, aux, nxt, prv)
            res[x] = 0
            freed += 1
            inside += stamp[x] == cur
        x = after
    while freed < want:
        s = _pop_victim(kind, rng, res, keys, sess, stable, pool, nodes, st, fs)
        if not s:
            break
        o = sess[R_PATH, s]
        sess[R_PATH, s] = NO_PATH
        got, alpha = _release(o, True, pin, cur, res, aux, nxt, prv, cls, stamp, pool)
        freed += got
        inside += alpha
        _forget(s, sess, stable, st)
    if not freed and want > 0 and size:
        return -1, 0
    return freed, inside


@njit()
def session_replay(
    kind: int, xs: I64, lo: int, hi: int, deepest_first: bool, size: int, uniform: bool,
    costs: F64, res: U8, aux: U8, nxt: I64, prv: I64, cls: I64, keys: F64, links: I64,
    sess: I64, stable: I64, pool: I64, nodes: I64, st: I64, fs: F64,
) -> int:  # fmt: skip
    """``record_request`` then ``access`` per block (slots ``xs``): the current session
    (touched again if phase 2 evicted it) claims α's distinct blocks, prefix order, before its
    previous path is released; every block is then resident (session_random_compute stamps
    each with its position's cost, the last access's winning). Returns the resident count."""
    s = _slot_of(st[S_CUR_SESSION], sess, stable, st)
    if sess[R_PATH, s] == NO_PATH:  # its session was evicted in phase 2
        _touch(kind, s, st[S_CUR_NEXT], sess, nodes, st, fs)
    old = sess[R_PATH, s]
    mark = st[S_REQ]
    o = st[S_POOL_TOP]
    width = 0
    for j in range(lo, hi):
        x = xs[j - lo]
        if links[0, x] == mark:
            continue
        links[0, x] = mark
        cls[x] += 1
        if aux[x]:
            _adopt(x, aux, nxt, prv)
        pool[o + 2 + width] = x
        width += 1
    sess[R_PATH, s] = EMPTY_PATH
    if width:
        pool[o] = s
        pool[o + 1] = width
        st[S_POOL_TOP] = o + 2 + width
        sess[R_PATH, s] = o
    # without ``evict`` nothing is evicted, so no pin is read (``cls`` stands in for stamps)
    _release(old, False, False, 0, res, aux, nxt, prv, cls, cls, pool)
    for step in range(hi - lo):
        j = hi - 1 - step if deepest_first else lo + step
        x = xs[j - lo]
        if not res[x]:
            res[x] = 1
            size += 1
            if not cls[x]:  # unclaimed (never, after the claims above; as ``access``)
                _orphan(x, aux, nxt, prv)
        if kind == K_SESSION_RANDOM:
            keys[x] = 1.0 if uniform else costs[j - lo]
    return size
