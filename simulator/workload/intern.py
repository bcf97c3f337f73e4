"""Compiled prefix interning and hash-id parsing for the vectorised JSONL reader (numba).

``ArrayInterner`` gives exactly the ids ``blockids.PrefixInterner`` gives (dense 1, 2, 3, …
in first-seen order of ``(parent id, raw id)`` pairs, root parent 0) for a whole chunk of
requests per call. It is an open-addressing hash table keyed on the *pair itself*: a slot is
matched only when both stored fields are equal, so a hash collision costs a probe, never a
wrong id, and no collision check or exact fallback is needed (a rolling prefix hash +
factorize would have to detect collisions and redo the chunk exactly). About 48 bytes per
distinct block at the table's maximum load of one half (``PrefixInterner``: ~180).

``parse_id_lists`` turns the raw JSON text of ``hash_ids`` arrays (``msgspec.Raw`` slices,
back to back) into one int64 array, accepting only what the Python reader accepts *as is*:
``[`` non-negative decimal integers below 2^63 separated by commas ``]`` with JSON whitespace.
Anything else (a sign, a fraction, an exponent, a string, nesting) is reported, and the
reader re-reads that text with the Python validator, which accepts or names the error.
"""

# ruff: noqa: PLR0917  (numba kernels take their arrays positionally)

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from simulator.core.jit import cached_njit

__all__ = ["ArrayInterner", "parse_id_lists"]

_EMPTY = 0  # a value slot holding 0 is free (interned ids start at 1)
_MIN_SLOTS = 1 << 12
_MAX_ID = np.int64(2**63 - 1)


class ArrayInterner:
    """``PrefixInterner`` over arrays; its tables are the only state (grown geometrically).

    Per id: its pair (``_parent[id]``, ``_raw[id]``); and a hash table of ids (0 = free) by
    pair, probed linearly, that is only consulted when the *successor guess* fails: along a
    path seen before, the child of id ``p`` is usually ``p + 1`` (a path's new blocks are
    numbered consecutively when first seen), which the pair arrays confirm or refute without
    touching the table. Either way an id is returned only for its exact pair.
    """

    def __init__(self) -> None:
        self._table = np.zeros(_MIN_SLOTS, dtype=np.int64)
        self._parent = np.zeros(_MIN_SLOTS, dtype=np.int64)
        self._raw = np.zeros(_MIN_SLOTS, dtype=np.int64)
        self._n_unique = 0

    @property
    def n_unique(self) -> int:
        """Distinct interned ids so far (the largest id handed out)."""
        return self._n_unique

    def map(self, raw: NDArray[np.int64], offsets: NDArray[np.int64]) -> NDArray[np.int64]:
        """Interned ids of requests ``raw[offsets[r]:offsets[r + 1]]`` (each a path from the
        root, prefix order), in order; new pairs get the next dense ids."""
        out = np.empty(len(raw), dtype=np.int64)
        if len(self._parent) <= self._n_unique + len(raw):  # room for every id the chunk may add
            size = max(self._n_unique + len(raw) + 1, 2 * len(self._parent))
            self._parent = _extended(self._parent, size)
            self._raw = _extended(self._raw, size)
        start = 0
        while start < len(offsets) - 1:
            # The kernel stops before a request that could push the table past half full.
            start, self._n_unique = _intern(
                raw, offsets, start, self._table, self._parent, self._raw, self._n_unique, out
            )
            if start < len(offsets) - 1:
                self._grow_table(self._n_unique + int(offsets[start + 1] - offsets[start]))
        return out

    def _grow_table(self, n_keys: int) -> None:
        """Rehash into a table at most half full with ``n_keys`` ids (at least twice as big)."""
        slots = 2 * len(self._table)
        while 2 * n_keys > slots:
            slots *= 2
        table = np.zeros(slots, dtype=np.int64)
        _rehash(self._n_unique, self._parent, self._raw, table)
        self._table = table


def _extended(array: NDArray[np.int64], size: int) -> NDArray[np.int64]:
    out = np.zeros(size, dtype=np.int64)
    out[: len(array)] = array
    return out


@cached_njit
def _slot(parent: int, raw: int, mask: int) -> int:
    """Home slot of a pair: a multiplicative mix and the splitmix64 finaliser (uint64)."""
    h = np.uint64(parent) * np.uint64(0x9E3779B97F4A7C15) ^ np.uint64(raw)
    h ^= h >> np.uint64(30)
    h *= np.uint64(0xBF58476D1CE4E5B9)
    h ^= h >> np.uint64(27)
    h *= np.uint64(0x94D049BB133111EB)
    h ^= h >> np.uint64(31)
    return int(np.int64(h & np.uint64(mask)))


@cached_njit
def _intern(
    raw: NDArray[np.int64],
    offsets: NDArray[np.int64],
    start: int,
    table: NDArray[np.int64],
    parent_of: NDArray[np.int64],
    raw_of: NDArray[np.int64],
    n_unique: int,
    out: NDArray[np.int64],
) -> tuple[int, int]:
    """Intern requests ``start``, ``start + 1``, … into ``out``; returns (the first request
    not interned, ids so far): all of them, unless one might overfill the table."""
    mask = len(table) - 1
    for r in range(start, len(offsets) - 1):
        if 2 * (n_unique + offsets[r + 1] - offsets[r]) > len(table):
            return r, n_unique
        parent = 0
        for j in range(offsets[r], offsets[r + 1]):
            value = raw[j]
            guess = parent + 1
            if guess <= n_unique and parent_of[guess] == parent and raw_of[guess] == value:
                parent = guess
                out[j] = guess
                continue
            i = _slot(parent, value, mask)
            found = table[i]
            while found != _EMPTY and (parent_of[found] != parent or raw_of[found] != value):
                i = (i + 1) & mask
                found = table[i]
            if found == _EMPTY:
                n_unique += 1
                found = n_unique
                table[i] = found
                parent_of[found] = parent
                raw_of[found] = value
            parent = found
            out[j] = found
    return len(offsets) - 1, n_unique


@cached_njit
def _rehash(
    n_unique: int, parent_of: NDArray[np.int64], raw_of: NDArray[np.int64], table: NDArray[np.int64]
) -> None:
    mask = len(table) - 1
    for found in range(1, n_unique + 1):
        i = _slot(parent_of[found], raw_of[found], mask)
        while table[i] != _EMPTY:
            i = (i + 1) & mask
        table[i] = found


@cached_njit
def _skip_space(text: NDArray[np.uint8], pos: int, end: int) -> int:
    """Position of the first byte at or after ``pos`` that is not JSON whitespace (space,
    line feed, tab, carriage return)."""
    while pos < end and (text[pos] == 32 or text[pos] == 10 or text[pos] == 9 or text[pos] == 13):
        pos += 1
    return pos


@cached_njit
def _parse_list(
    text: NDArray[np.uint8], pos: int, end: int, out: NDArray[np.int64], n: int
) -> tuple[int, int]:
    """One ``[...]`` at ``text[pos:end]`` into ``out[n:]``: (ids now written, -1 = refused)."""
    pos = _skip_space(text, pos, end)
    if pos >= end or text[pos] != 91:  # '['
        return n, -1
    pos = _skip_space(text, pos + 1, end)
    if pos < end and text[pos] == 93:  # ']': the empty list
        pos += 1
    else:
        while True:
            start = pos
            value = np.int64(0)
            while pos < end and 48 <= text[pos] <= 57:
                value = value * 10 + np.int64(text[pos] - 48)
                pos += 1
                if pos - start == 18:  # 18 digits never overflow; check the rest one by one
                    break
            while pos < end and 48 <= text[pos] <= 57:
                digit = np.int64(text[pos] - 48)
                if value > (_MAX_ID - digit) // 10:
                    return n, -1
                value = value * 10 + digit
                pos += 1
            if pos == start:
                return n, -1
            out[n] = value
            n += 1
            pos = _skip_space(text, pos, end)
            if pos >= end or text[pos] not in (44, 93):  # ',' or ']'
                return n, -1
            pos += 1
            if text[pos - 1] == 93:
                break
            pos = _skip_space(text, pos, end)
    return n, (0 if _skip_space(text, pos, end) == end else -1)


@cached_njit
def parse_id_lists(
    text: NDArray[np.uint8],
    ends: NDArray[np.int64],
    out: NDArray[np.int64],
    offsets: NDArray[np.int64],
) -> int:
    """Parse arrays ``text[ends[r-1]:ends[r]]`` (``ends[-1]`` = 0) into ``out``, back to back,
    array ``r`` at ``out[offsets[r]:offsets[r + 1]]`` (``offsets[0]`` = 0 is left as is).

    ``out`` must have room for every id (``len(text) // 2 + len(ends)`` always suffices).
    Returns -1, or the first array ``r`` that is not a plain list of integers in [0, 2^63)
    (see the module docstring; ``out`` and ``offsets`` are then partly written).
    """
    n = 0
    start = 0
    for r in range(len(ends)):
        n, ok = _parse_list(text, start, ends[r], out, n)
        if ok < 0:
            return r
        offsets[r + 1] = n
        start = ends[r]
    return -1
