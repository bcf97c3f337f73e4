"""LIRS kernels (``policies.lirs.Lirs``): the stack S, the resident-HIR queue Q and the
non-resident HIR ids N over slots.

Per slot: ``res`` = in the Python ``_status`` (resident), ``aux`` bits ``LIR`` (its status is
LIR), ``IN_S`` and ``IN_Q``; S and Q are circular doubly linked lists through the rows of
``links`` (S: rows 0/1, Q: rows 2/3; slot 0 is both sentinels, its next = the bottom / oldest,
its previous = the top / newest), N is queue ``Q_NONRESIDENT`` of ``_queues`` (``cls``, so a
non-resident HIR id keeps its slot through ``_slots.sweep``). The three are separate, as the
Python ``OrderedDict``s are, and each step below mirrors the Python statement it names,
including the prune after every push onto S that keeps S's bottom LIR after a pinned eviction
took LIR blocks (``policies/lirs.py``). The Python ``KeyError``s of states outside the
invariants are still mirrored as a guard (``E_KEY``; ``_kernels`` returns it with the block id
in ``st[S_ERR_A]``).

``lirs_replay`` serves one request (``Lirs.access`` per block; ``slots[j - lo]`` is block j's
slot, from ``_kernels._probe``), ``lirs_evict`` is ``Lirs.evict_n``. Not cached on their own:
only the entry points of ``_kernels`` are (see there).
"""

# ruff: noqa: PLR0917  (numba kernels take their state arrays positionally)

from __future__ import annotations

from numba import njit

from simulator.kvcache.compiled._layout import (
    COUNT,
    E_KEY,
    E_OK,
    HEAD,
    I64,
    Q_NONRESIDENT,
    S_ERR_A,
    S_LIR_COUNT,
    S_LIR_TARGET,
    U8,
)
from simulator.kvcache.compiled._queues import q_pop, q_push, q_take

LIR, IN_S, IN_Q = 1, 2, 4  # ``aux`` bits
_S_NEXT, _S_PREV, _Q_NEXT, _Q_PREV = 0, 1, 2, 3  # rows of ``links``


@njit(inline="always")
def _unlink(nx: I64, pv: I64, x: int) -> None:
    """Take slot ``x`` out of the circular list ``nx``/``pv``."""
    before = pv[x]
    after = nx[x]
    nx[before] = after
    pv[after] = before


@njit(inline="always")
def _push_top(nx: I64, pv: I64, x: int) -> None:
    """Put slot ``x`` (not in the list) at the newest end of the circular list ``nx``/``pv``."""
    top = pv[0]
    nx[top] = x
    pv[x] = top
    nx[x] = 0
    pv[0] = x


@njit()
def _prune(aux: U8, links: I64, nxt: I64, prv: I64, cls: I64, nodes: I64) -> None:
    """``Lirs._prune``: drop S's bottom entries until the bottom is LIR (a non-LIR one also
    leaves N); ``res`` is not read: a non-resident slot never has the ``LIR`` bit."""
    s_next = links[_S_NEXT]
    s_prev = links[_S_PREV]
    while s_next[0]:
        bottom = s_next[0]
        if aux[bottom] & LIR:
            return
        _unlink(s_next, s_prev, bottom)
        aux[bottom] &= ~IN_S
        if cls[bottom] == Q_NONRESIDENT:
            q_take(nodes, bottom, nxt, prv, cls)


@njit()
def _demote_bottom(
    size: int, res: U8, aux: U8, links: I64, nxt: I64, prv: I64, cls: I64, nodes: I64,
    st: I64,
) -> int:  # fmt: skip
    """``Lirs._demote_bottom``: S's bottom becomes resident HIR at Q's end (an entry already in
    Q keeps its place, as an ``OrderedDict`` key assigned again does), S is pruned. Returns the
    resident count after (the bottom is made resident if it was not: see the module
    docstring)."""
    s_next = links[_S_NEXT]
    bottom = s_next[0]
    _unlink(s_next, links[_S_PREV], bottom)
    aux[bottom] &= ~(IN_S | LIR)
    if not res[bottom]:
        res[bottom] = 1
        size += 1
    st[S_LIR_COUNT] -= 1
    if not aux[bottom] & IN_Q:
        _push_top(links[_Q_NEXT], links[_Q_PREV], bottom)
        aux[bottom] |= IN_Q
    _prune(aux, links, nxt, prv, cls, nodes)
    return size


@njit()
def _make_lir(x: int, res: U8, aux: U8, links: I64, st: I64) -> None:
    """``Lirs._make_lir`` for a slot not in ``_status``: LIR, at S's top."""
    res[x] = 1
    aux[x] |= LIR
    st[S_LIR_COUNT] += 1
    if aux[x] & IN_S:
        _unlink(links[_S_NEXT], links[_S_PREV], x)
    _push_top(links[_S_NEXT], links[_S_PREV], x)
    aux[x] |= IN_S


@njit()
def lirs_replay(  # noqa: PLR0912  (one branch per case of ``Lirs.access``)
    slots: I64, lo: int, hi: int, deepest_first: bool, size: int, res: U8, aux: U8,
    links: I64, nxt: I64, prv: I64, cls: I64, nodes: I64, ids: I64, st: I64,
) -> tuple[int, int]:  # fmt: skip
    """``Lirs.access`` per block. Returns (``E_OK`` or ``E_KEY``, resident count after)."""
    s_next = links[_S_NEXT]
    s_prev = links[_S_PREV]
    q_next = links[_Q_NEXT]
    q_prev = links[_Q_PREV]
    for step in range(hi - lo):
        x = slots[hi - lo - 1 - step if deepest_first else step]
        if res[x] and aux[x] & LIR:  # LIR: to S's top, then prune
            if not aux[x] & IN_S:
                st[S_ERR_A] = ids[x]
                return E_KEY, size
            _unlink(s_next, s_prev, x)
            _push_top(s_next, s_prev, x)
            _prune(aux, links, nxt, prv, cls, nodes)
        elif res[x]:  # resident HIR
            if not aux[x] & IN_Q:
                st[S_ERR_A] = ids[x]
                return E_KEY, size
            if aux[x] & IN_S:  # in S: becomes LIR, S's bottom LIR is demoted
                _unlink(q_next, q_prev, x)
                aux[x] = (aux[x] & ~IN_Q) | LIR
                st[S_LIR_COUNT] += 1
                _unlink(s_next, s_prev, x)
                _push_top(s_next, s_prev, x)
                size = _demote_bottom(size, res, aux, links, nxt, prv, cls, nodes, st)
            else:  # to S's top and Q's end
                _push_top(s_next, s_prev, x)
                aux[x] |= IN_S
                _unlink(q_next, q_prev, x)
                _push_top(q_next, q_prev, x)
                _prune(aux, links, nxt, prv, cls, nodes)
        elif st[S_LIR_COUNT] < st[S_LIR_TARGET]:  # cold start: a miss becomes LIR
            if cls[x] == Q_NONRESIDENT:
                q_take(nodes, x, nxt, prv, cls)
            _make_lir(x, res, aux, links, st)
            _prune(aux, links, nxt, prv, cls, nodes)
            size += 1
        elif aux[x] & IN_S:  # a non-resident HIR entry of S: its reuse distance is short
            if cls[x] != Q_NONRESIDENT:
                st[S_ERR_A] = ids[x]
                return E_KEY, size
            q_take(nodes, x, nxt, prv, cls)
            _make_lir(x, res, aux, links, st)
            size = _demote_bottom(size + 1, res, aux, links, nxt, prv, cls, nodes, st)
        else:  # resident HIR, at S's top and Q's end
            res[x] = 1
            aux[x] = (aux[x] & ~LIR) | IN_S
            _push_top(s_next, s_prev, x)
            if not aux[x] & IN_Q:  # (always: Q holds resident blocks only)
                _push_top(q_next, q_prev, x)
                aux[x] |= IN_Q
            _prune(aux, links, nxt, prv, cls, nodes)
            size += 1
    return E_OK, size


@njit()
def lirs_evict(
    k: int, pin: bool, cur: int, size: int, capacity: int, res: U8, aux: U8, links: I64,
    nxt: I64, prv: I64, cls: I64, nodes: I64, stamp: I64, ids: I64, st: I64,
) -> tuple[int, int]:  # fmt: skip
    """``Lirs.evict_n``: Q's oldest unpinned block (it stays in S as a non-resident HIR id if
    it was there; N then drops its oldest id beyond ``capacity``, from S too), else S's least
    recent unpinned LIR block (it leaves S, which is pruned). Returns (freed, of which in α):
    freed = -1 where Python raises (nothing unpinned), -2 for its ``KeyError`` (``E_KEY``)."""
    s_next = links[_S_NEXT]
    s_prev = links[_S_PREV]
    q_next = links[_Q_NEXT]
    got = inside = 0
    while got < k and size - got > 0:
        x = q_next[0]
        while x and pin and stamp[x] == cur:
            x = q_next[x]
        if x:
            _unlink(q_next, links[_Q_PREV], x)
            aux[x] &= ~(IN_Q | LIR)
            res[x] = 0
            if aux[x] & IN_S:
                if cls[x] != Q_NONRESIDENT:
                    q_push(nodes, Q_NONRESIDENT, x, nxt, prv, cls)
                if nodes[COUNT, Q_NONRESIDENT] > capacity:
                    oldest = nodes[HEAD, Q_NONRESIDENT]
                    q_pop(nodes, Q_NONRESIDENT, nxt, prv, cls)
                    if not aux[oldest] & IN_S:
                        st[S_ERR_A] = ids[oldest]
                        return -2, inside
                    _unlink(s_next, s_prev, oldest)
                    aux[oldest] &= ~IN_S
        else:  # Q is empty or pinned: the least recent unpinned LIR block goes
            x = s_next[0]
            while x and not (res[x] and aux[x] & LIR and not (pin and stamp[x] == cur)):
                x = s_next[x]
            if not x:
                break
            _unlink(s_next, s_prev, x)
            aux[x] &= ~(IN_S | LIR)
            res[x] = 0
            st[S_LIR_COUNT] -= 1
            _prune(aux, links, nxt, prv, cls, nodes)
        got += 1
        inside += stamp[x] == cur
    if not got and k > 0 and size > 0:
        return -1, inside
    return got, inside
