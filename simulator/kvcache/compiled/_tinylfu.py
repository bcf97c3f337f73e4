"""W-TinyLFU kernels (``policies.wtinylfu.WTinyLfu``): window, probation and protected queues
over slots (``_queues``, columns ``Q_WINDOW`` and SLRU's ``Q_PROBATION`` and ``Q_PROTECTED``:
the main cache is an SLRU, ``_segmented.slru_promote``) and the count-min sketch of
``wtinylfu.CountMinSketch``.

The sketch is ``sketch[row, i]`` (int64 counters, 4-bit saturating as in Python); a block's
counter in row r is at ``((id + 1) × M_r mod 2⁶⁴) >> shift``, the Python ``_slots`` hash with
the same multipliers (``_ROW_MULTIPLIERS``, as signed int64: numba's products wrap modulo 2⁶⁴,
and the top ``64 - shift`` bits of the arithmetic shift, masked, are the logical shift's), so
every counter is the Python one. The doorkeeper (an exact set of ids since the last halving) is
per slot: ``links[0, slot]`` = the generation ``st[S_DOOR_GEN]`` when the block entered it, so
clearing it is one increment, and ``_slots.sweep`` keeps the slot of a block in it (the set
holds at most a halving period of ids: ``sample_factor × capacity``). Every sketch operation
is on a block that is being accessed or is resident, so it has a slot.

``wtinylfu_replay`` serves one request (``WTinyLfu.access`` per block; ``slots[j - lo]`` is
block j's slot, from ``_kernels._probe``), ``wtinylfu_evict`` is ``WTinyLfu.evict_n``. Not
cached on their own: only the entry points of ``_kernels`` are (see there).
"""

# ruff: noqa: PLR0917  (numba kernels take their state arrays positionally)

from __future__ import annotations

import numpy as np
from numba import njit

from simulator.kvcache.compiled._layout import (
    COUNT,
    I64,
    Q_PROBATION,
    Q_PROTECTED,
    Q_WINDOW,
    S_ADDITIONS,
    S_DOOR_GEN,
    S_DOORKEEPER,
    S_MAIN_TARGET,
    S_PERIOD,
    S_PROTECTED_TARGET,
    S_SKETCH_SHIFT,
    S_WINDOW_TARGET,
    U8,
)
from simulator.kvcache.compiled._queues import q_first_unpinned, q_pop, q_push, q_take
from simulator.kvcache.compiled._segmented import slru_promote
from simulator.kvcache.policies.wtinylfu import _COUNTER_MAX, _ROW_MULTIPLIERS

#: The sketch rows' multipliers as signed int64 (frozen into the kernels by numba).
MULTIPLIERS = np.array([m - (1 << 64) if m >> 63 else m for m in _ROW_MULTIPLIERS], np.int64)


@njit(inline="always")
def _index(key: int, row: int, shift: int, mask: int) -> int:
    """``CountMinSketch._slots(key)[row]``."""
    return ((key + 1) * MULTIPLIERS[row] >> shift) & mask  # type: ignore[no-any-return]


@njit()
def _estimate(x: int, sketch: I64, links: I64, ids: I64, st: I64) -> int:
    """``CountMinSketch.estimate`` of slot ``x``'s block."""
    shift = st[S_SKETCH_SHIFT]
    mask = sketch.shape[1] - 1
    key = ids[x]
    base = sketch[0, _index(key, 0, shift, mask)]
    for row in range(1, sketch.shape[0]):
        base = min(base, sketch[row, _index(key, row, shift, mask)])
    return base + (links[0, x] == st[S_DOOR_GEN])  # type: ignore[no-any-return]


@njit()
def _record(x: int, sketch: I64, links: I64, ids: I64, st: I64) -> None:
    """``CountMinSketch.record`` of slot ``x``'s block: into the doorkeeper if it is on and the
    block not in it, else one more in each row (saturating); every ``S_PERIOD`` records every
    counter and the record count are halved and the doorkeeper is emptied."""
    if st[S_DOORKEEPER] and links[0, x] != st[S_DOOR_GEN]:
        links[0, x] = st[S_DOOR_GEN]
    else:
        shift = st[S_SKETCH_SHIFT]
        mask = sketch.shape[1] - 1
        key = ids[x]
        for row in range(sketch.shape[0]):
            i = _index(key, row, shift, mask)
            if sketch[row, i] < _COUNTER_MAX:
                sketch[row, i] += 1
    st[S_ADDITIONS] += 1
    if st[S_ADDITIONS] >= st[S_PERIOD]:
        for row in range(sketch.shape[0]):
            for i in range(sketch.shape[1]):
                sketch[row, i] >>= 1
        st[S_DOOR_GEN] += 1
        st[S_ADDITIONS] //= 2


@njit()
def wtinylfu_replay(
    slots: I64, lo: int, hi: int, deepest_first: bool, size: int, res: U8, nxt: I64,
    prv: I64, cls: I64, nodes: I64, sketch: I64, links: I64, ids: I64, st: I64,
) -> int:  # fmt: skip
    """``WTinyLfu.access`` per block: record it; a window or protected hit moves to its
    segment's MRU end, a probation hit is promoted to protected (demoting protected's LRU block
    to probation beyond the protected target); a miss enters the window, whose overflow moves
    to probation while main is below its target. Returns the resident count after."""
    for step in range(hi - lo):
        x = slots[hi - lo - 1 - step if deepest_first else step]
        _record(x, sketch, links, ids, st)
        q = cls[x]
        if q in (Q_WINDOW, Q_PROTECTED):
            q_take(nodes, x, nxt, prv, cls)
            q_push(nodes, q, x, nxt, prv, cls)
        elif q == Q_PROBATION:
            slru_promote(x, st[S_PROTECTED_TARGET], nodes, nxt, prv, cls)
        else:
            q_push(nodes, Q_WINDOW, x, nxt, prv, cls)
            res[x] = 1
            size += 1
            while (nodes[COUNT, Q_WINDOW] > st[S_WINDOW_TARGET]
                   and nodes[COUNT, Q_PROBATION] + nodes[COUNT, Q_PROTECTED]
                   < st[S_MAIN_TARGET]):  # fmt: skip
                moved = q_pop(nodes, Q_WINDOW, nxt, prv, cls)
                q_push(nodes, Q_PROBATION, moved, nxt, prv, cls)
    return size


@njit()
def wtinylfu_evict(
    k: int, pin: bool, cur: int, res: U8, nxt: I64, prv: I64, cls: I64, nodes: I64,
    stamp: I64, sketch: I64, links: I64, ids: I64, st: I64,
) -> tuple[int, int]:  # fmt: skip
    """``WTinyLfu.evict_n``: ``k`` victims, the first ``|window| + k - window target`` of them
    by a duel (``_evict_one``): the window's oldest unpinned block (the candidate) against
    main's victim (probation's oldest unpinned block, else protected's). The candidate leaves
    unless its estimate is strictly higher; then it moves to probation and the victim leaves.
    Without a duel the victim leaves (the candidate if main has none). Returns (freed, of which
    in α), freed = -1 where Python raises (nothing unpinned)."""
    overflow = nodes[COUNT, Q_WINDOW] + k - st[S_WINDOW_TARGET]
    inside = 0
    for _ in range(k):
        candidate = q_first_unpinned(nodes, Q_WINDOW, pin, cur, nxt, stamp)
        victim = q_first_unpinned(nodes, Q_PROBATION, pin, cur, nxt, stamp)
        if not victim:
            victim = q_first_unpinned(nodes, Q_PROTECTED, pin, cur, nxt, stamp)
        gone = 0
        if candidate and (overflow > 0 or not victim):
            q_take(nodes, candidate, nxt, prv, cls)
            if not victim or _estimate(candidate, sketch, links, ids, st) <= _estimate(
                victim, sketch, links, ids, st
            ):
                gone = candidate
            else:  # the candidate wins the duel: it is admitted to main, the victim leaves
                q_push(nodes, Q_PROBATION, candidate, nxt, prv, cls)
        if not gone:
            if not victim:
                return -1, inside
            q_take(nodes, victim, nxt, prv, cls)
            gone = victim
        res[gone] = 0
        inside += stamp[gone] == cur
        overflow -= 1
    return k, inside
