"""LHD kernels: Lhd and LhdCompute (``policies/lhd.py``), hit density over sampled blocks.

The resident set is ``ResidentSample``'s dense list, kept as ``_random`` keeps it
(``heap[0:n]``, ``cls[slot]`` = the slot's index there, ``n`` = ``st[S_HEAP_N]``), and the
samples come from the policy's own generator through ``_random._draw_unpinned`` (``n_sample``
doubles per round, redraws, then the scan), so every eviction samples the blocks the Python
policy samples. Per slot: ``links[0]`` = the clock at its last access (the Python ``_last``),
``keys`` = the cost of its last access (``_cost``). The clock of block accesses is
``st[S_SEQ]``, the age class width ``st[S_COARSE]`` (``coarsening``), the reconfiguration
period ``st[S_PERIOD]``, ``n_sample`` ``st[S_LIMIT]``.

The three per-age tables are floats after the cost sums in ``fs`` (``engine`` sizes it):
``fs[F_HITS + a]``, ``fs[F_EVICTIONS + a]`` and ``fs[F_DENSITY + a]`` for age class ``a`` <
``N_AGES``, updated with the same float operations in the same order as the Python lists
(``hit_densities``, the halving), so every density and every rank comparison agrees bit for
bit. Not cached on its own: only the entry points of ``_kernels`` are (see there).
"""

# ruff: noqa: PLR0917  (numba kernels take their state arrays positionally)

from __future__ import annotations

from typing import Any

from numba import njit

from simulator.kvcache.compiled._layout import (
    F64,
    I64,
    N_FLOAT,
    S_COARSE,
    S_HEAP_N,
    S_LIMIT,
    S_PERIOD,
    S_SEQ,
    U8,
)
from simulator.kvcache.compiled._random import _draw_unpinned, _drop, tie_below
from simulator.kvcache.policies.lhd import N_AGES

F_HITS = N_FLOAT  # fs[F_HITS + a]: hits counted at age class a (the Python ``_hits``)
F_EVICTIONS = F_HITS + N_AGES  # ... evictions (``_evictions``)
F_DENSITY = F_EVICTIONS + N_AGES  # ... the density table (``density``)
N_LHD_FLOAT = F_DENSITY + N_AGES  # the length of ``fs`` an LHD run needs


@njit(inline="always")
def _age(x: int, clock: int, coarse: int, links: I64) -> int:
    """``Lhd.age``: the age class of resident slot ``x``."""
    return min((clock - links[0, x]) // coarse, N_AGES - 1)  # type: ignore[no-any-return]


@njit()
def _reconfigure(fs: F64) -> None:
    """``Lhd._reconfigure``: the density table from the counts (``hit_densities``, oldest class
    first), then both counts halved."""
    hits_above = events_above = lifetime = 0.0
    for age in range(N_AGES - 1, -1, -1):
        hits_above += fs[F_HITS + age]
        events_above += fs[F_HITS + age] + fs[F_EVICTIONS + age]
        lifetime += events_above
        fs[F_DENSITY + age] = hits_above / lifetime if lifetime > 0 else 0.0
    for i in range(F_HITS, F_DENSITY):
        fs[i] = fs[i] * 0.5


@njit()
def lhd_replay(
    xs: I64, lo: int, hi: int, deepest_first: bool, size: int, uniform: bool, costs: F64,
    res: U8, cls: I64, keys: F64, heap: I64, links: I64, st: I64, fs: F64,
) -> int:  # fmt: skip
    """``Lhd.access`` per block of α (slots ``xs``): a hit counts at its age class, a miss joins
    the dense list; the clock moves, the block is stamped with it and its position's cost, and
    every ``period`` accesses the densities are recomputed. Returns the resident count after."""
    clock = st[S_SEQ]
    coarse = st[S_COARSE]
    period = st[S_PERIOD]
    n = st[S_HEAP_N]
    for step in range(hi - lo):
        j = hi - 1 - step if deepest_first else lo + step
        x = xs[j - lo]
        if res[x]:
            fs[F_HITS + _age(x, clock, coarse, links)] += 1.0
        else:  # ``ResidentSample.add``: appended to the dense list
            res[x] = 1
            cls[x] = n
            heap[n] = x
            n += 1
            size += 1
        clock += 1
        links[0, x] = clock
        keys[x] = 1.0 if uniform else costs[j - lo]
        if clock % period == 0:
            _reconfigure(fs)
    st[S_SEQ] = clock
    st[S_HEAP_N] = n
    return size


@njit()
def _lowest(
    sample: I64, m: int, use_cost: bool, clock: int, coarse: int, keys: F64, links: I64,
    ids: I64, fs: F64,
) -> int:  # fmt: skip
    """``min(dict.fromkeys(sample), key=Lhd.rank)``: the sampled slot of lowest (density ×
    cost with ``use_cost``, last access, -id). Ranks of distinct blocks never tie (the id), so
    repeated draws cannot change the winner."""
    best = 0  # slot 0 is no block: none yet
    best_value = 0.0
    for i in range(m):
        x = sample[i]
        value = fs[F_DENSITY + _age(x, clock, coarse, links)]
        if use_cost:
            value *= keys[x]
        if not best or value < best_value:
            best, best_value = x, value
        elif value == best_value and tie_below(x, best, links, ids):
            best = x
    return best


@njit()
def lhd_evict(
    want: int, use_cost: bool, pin: bool, cur: int, rng: Any, res: U8, aux: U8, nxt: I64,
    prv: I64, cls: I64, keys: F64, heap: I64, scratch: I64, stamp: I64, links: I64, ids: I64,
    st: I64, fs: F64,
) -> tuple[int, int]:  # fmt: skip
    """``Lhd.evict_n``: per victim one ``draw_unpinned`` sample, its lowest rank leaves and
    counts an eviction at its age class. Returns (freed, of which in α); freed = -1 where
    Python raises (every resident block pinned). ``scratch`` holds a sample (at least
    ``n_sample`` long: the driver sizes it)."""
    clock = st[S_SEQ]
    coarse = st[S_COARSE]
    inside = 0
    for got in range(want):
        m = _draw_unpinned(rng, st[S_LIMIT], scratch, pin, cur, False, aux, heap, stamp, st)
        if not m:  # every resident block pinned (the serve loop never lets the cache empty)
            return (got if got or not st[S_HEAP_N] else -1), inside
        x = _lowest(scratch, m, use_cost, clock, coarse, keys, links, ids, fs)
        fs[F_EVICTIONS + _age(x, clock, coarse, links)] += 1.0
        inside += stamp[x] == cur
        _drop(x, res, aux, nxt, prv, cls, heap, st)
    return want, inside
