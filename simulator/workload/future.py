"""The future of a trace, for oracle policies: when each block and each session comes back.

Access numbering: global, 1-based, forward order — block 0 of request 0 is access 1, its
block 1 is access 2, …, then request 1's blocks in prefix order, and so on. The next access of
an access is the number of the next access of the same block id, or ``NEVER``.

The future needs the whole trace, so a streamed JSONL trace takes two passes: the first
collects the block ids into one flat ``int64`` array (8 bytes per access) and ``build_future``
derives the annotation from it (8 more bytes per access plus 16 per request); the second pass
re-reads the requests and slices the annotation (``TraceReader.annotated``). lcp files store the
annotation and need one pass.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from simulator.workload.request import TraceRequest

__all__ = ["NEVER", "FutureTable", "build_future", "next_access_indices", "session_next_indices"]

#: Next-access value of a block that is never accessed again (oracle annotations).
NEVER = 2**62


def _next_occurrence(keys: NDArray[np.int64]) -> NDArray[np.int64]:
    """0-based position of the next equal key after each position, -1 if none."""
    order = np.argsort(keys, kind="stable")  # equal keys keep their forward order
    same = keys[order[1:]] == keys[order[:-1]]
    out = np.full(len(keys), -1, dtype=np.int64)
    out[order[:-1][same]] = order[1:][same]
    return out


def next_access_indices(flat_block_ids: NDArray[np.int64]) -> NDArray[np.int64]:
    """Next-access number (1-based, see module doc) of every access, ``NEVER`` if none.

    ``flat_block_ids`` holds every request's block ids concatenated in forward order.
    O(n log n) time, O(n) memory.
    """
    nxt = _next_occurrence(flat_block_ids)
    return np.where(nxt >= 0, nxt + 1, NEVER).astype(np.int64)


def session_next_indices(session_ids: NDArray[np.int64]) -> NDArray[np.int64]:
    """Per request: index of the next request of the same session; ``NEVER`` if none or if the
    request has no session (-1)."""
    nxt = _next_occurrence(session_ids)
    return np.where((nxt >= 0) & (session_ids >= 0), nxt, NEVER).astype(np.int64)


@dataclass(frozen=True, slots=True, eq=False)
class FutureTable:
    """The future of a whole trace (read-only arrays)."""

    next_access: NDArray[np.int64]
    """Per access, forward order: next-access number or ``NEVER``."""
    offsets: NDArray[np.int64]
    """Request i's accesses are ``next_access[offsets[i]:offsets[i + 1]]``; n_requests + 1."""
    session_next: NDArray[np.int64]
    """Per request: index of the session's next request or ``NEVER``."""

    def __len__(self) -> int:
        return len(self.session_next)

    def of(self, index: int) -> tuple[NDArray[np.int64], int]:
        """``(next_access of request index's blocks, its session's next request index)``."""
        lo, hi = self.offsets[index], self.offsets[index + 1]
        return self.next_access[lo:hi], int(self.session_next[index])

    def rows(self) -> Iterator[tuple[NDArray[np.int64], int]]:
        """``of(i)`` for every request in order."""
        offsets = self.offsets.tolist()
        session_next = self.session_next.tolist()
        for i, snext in enumerate(session_next):
            yield self.next_access[offsets[i] : offsets[i + 1]], snext


def build_future(requests: Iterable[TraceRequest]) -> FutureTable:
    """Consume ``requests`` (one full pass, forward order) and return their future.

    Holds 8 bytes per block access plus 16 per request while building.
    """
    flat = array("q")
    counts = array("q", [0])
    sessions = array("q")
    for request in requests:
        flat.extend(request.block_ids)
        counts.append(len(request.block_ids))
        sessions.append(request.session_id)
    flat_ids = np.frombuffer(flat, dtype=np.int64) if flat else np.zeros(0, dtype=np.int64)
    session_ids = np.frombuffer(sessions, dtype=np.int64) if sessions else flat_ids[:0]
    next_access = next_access_indices(flat_ids)
    session_next = session_next_indices(session_ids)
    offsets = np.cumsum(np.frombuffer(counts, dtype=np.int64))
    for arr in (next_access, offsets, session_next):
        arr.flags.writeable = False
    return FutureTable(next_access, offsets, session_next)
