"""Slots: block ids (any int64) mapped to the small integers that index the policy state.

The policy arrays (``nxt``, ``prv``, ``stamp``, ``res``, ``aux``, ``cls``, ``keys``) are indexed
by *slot*, 1 … ``len(ids) - 1`` (slot 0 is the list sentinel), so their length follows the
blocks the policy remembers, not the largest id of the trace. Three structures:

- ``ids[slot]``: the block id a slot holds (what tie-breaks on ids read, e.g. Belady's);
- an open-addressing hash table, id -> slot, linear probing: ``table[h]`` is a slot (0 =
  empty) and ``ids[slot]`` its key, so the table is 8 bytes a bucket and stays in cache (a probe
  reads the slot's ``ids`` entry, next to the state the access reads anyway); ``len(table)`` is
  a power of two ≥ 2 × ``len(ids)`` (load ≤ 1/2), the home bucket the top bits of
  ``id × 2⁶⁴/φ`` (Fibonacci hashing, so sparse or strided ids spread), ``st[S_SHIFT]`` =
  64 - log2(len(table));
- ``free[:st[S_FREE_N]]``: a stack of unused slots, popped from the end (after a sweep, the
  lowest slots first).

The arrays double (the driver reallocates them on ``E_GROW``) when a sweep leaves fewer than a
quarter of the slots free, and then until the blocks remembered fill at most 3/4: between
requests a policy remembers at most its capacity plus its ghosts, so from a small start
``len(ids) - 1`` (``CompiledReplay.slot_space``) stays under 8/3 × (capacity + ghosts +
longest request) + 1.

A slot is taken on a block's first access (the lookup is written out in ``_kernels._probe``,
the one place that reads the table per block access) and given back by ``sweep`` once the
policy keeps nothing for it: the block is not resident and, for the queue policies, in no queue
(a ghost of ARC, 2Q, S3-FIFO or S3-FIFO-D keeps its slot while it is in its ghost queue, a
non-resident HIR id of LIRS while it is in LIRS's N, a block in W-TinyLFU's doorkeeper while it
is there). LFU
counts and GDSF frequencies are forgotten on eviction, as in their Python policies, so their
non-resident blocks hold nothing. ``sweep`` runs between requests only
(``_kernels.serve_loop``), never while α's stamps and pins are in use, and rebuilds the hash
table from the kept slots (so there are no tombstones). Not cached on their own: only the entry
points of ``_kernels`` are (see there).
"""

# ruff: noqa: PLR0917  (numba kernels take their state arrays positionally)

from __future__ import annotations

from numba import njit

from simulator.kvcache.compiled._layout import I64, S_DOOR_GEN, S_ERR_A, S_FREE_N, S_SHIFT, U8

#: 2⁶⁴ / golden ratio, odd, as a signed int64 (numba's int64 product wraps modulo 2⁶⁴).
FIBONACCI = 0x9E3779B97F4A7C15 - (1 << 64)


@njit()
def make_room(
    n: int, queues: bool, res: U8, cls: I64, aux: U8, stamp: I64, ids: I64, table: I64,
    free: I64, links: I64, st: I64,
) -> bool:  # fmt: skip
    """Sweep before a request of ``n`` accesses. False if the slots must grow first (then
    ``st[S_ERR_A]`` = the slots needed): fewer than ``n`` are free, or fewer than a quarter,
    since a sweep costs O(slots) and must free that many for the next one to come late enough
    (three array passes per quarter: about 12 steps per block that takes a slot)."""
    sweep(queues, res, cls, aux, stamp, ids, table, free, links, st)
    slots = ids.shape[0] - 1
    if st[S_FREE_N] >= n and 4 * st[S_FREE_N] >= slots:
        return True
    st[S_ERR_A] = slots - st[S_FREE_N] + n
    return False


@njit()
def sweep(
    queues: bool, res: U8, cls: I64, aux: U8, stamp: I64, ids: I64, table: I64, free: I64,
    links: I64, st: I64,
) -> None:  # fmt: skip
    """Give back every slot the policy keeps nothing for and rebuild the table from the rest.

    Kept: resident slots, with ``queues`` (the policies whose ``cls`` names a queue) every
    slot in a queue, ghosts included, and W-TinyLFU's slots in its doorkeeper (``links[0]`` =
    ``st[S_DOOR_GEN]``, non-zero only for it: ``_tinylfu``). A freed slot's ``aux``, ``stamp``,
    ``cls`` and ``links`` are reset, so a block that takes it starts as a never-seen one.
    O(len(ids) + len(table))."""
    table[:] = 0
    mask = table.shape[0] - 1
    shift = st[S_SHIFT]
    door = st[S_DOOR_GEN]
    n_free = 0
    for x in range(ids.shape[0] - 1, 0, -1):  # pushed high to low: low slots are taken first
        if res[x] or (queues and cls[x]) or (door and links[0, x] == door):
            block = ids[x]
            h = ((block * FIBONACCI) >> shift) & mask
            while table[h]:
                h = (h + 1) & mask
            table[h] = x
        else:
            aux[x] = 0
            stamp[x] = 0
            if cls.shape[0]:
                cls[x] = 0
            for row in range(links.shape[0]):
                links[row, x] = 0
            free[n_free] = x
            n_free += 1
    st[S_FREE_N] = n_free
