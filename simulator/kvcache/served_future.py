"""The future an oracle sees: the trace's future with the requests the replay skips left out.

A request with more distinct blocks than the cache is skipped (never served), so an access it
would make never happens: an oracle that counted it would keep a block for a reuse that never
comes. PrefixSim annotates the served trace only; ``build_future`` (``simulator.workload``)
annotates the whole file, so this module removes the skipped requests from a built future:
every next-access pointer (and every session's next-request pointer) that lands on a skipped
request is followed along its chain to the first served one, or ``NEVER``.

Access numbers keep their global (whole-trace) values: oracles only compare them, and the
order of served accesses is unchanged. Example (belady, 64 blocks, Mooncake conversation trace):
0.061061 with skipped requests' accesses in the future, 0.061137 without.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import tee

import numpy as np
from numpy.typing import NDArray

from simulator.kvcache.policies.base import NEVER
from simulator.workload.future import FutureTable
from simulator.workload.request import TraceRequest
from simulator.workload.trace import LcpTrace, TraceReader

__all__ = [
    "FutureRow",
    "SharedFuture",
    "distinct_counts",
    "replay_streams",
    "stores_future",
    "without_skipped",
]

#: Per request: next access of each block, index of the session's next request.
FutureRow = tuple[Sequence[int] | NDArray[np.int64], int]


def distinct_counts(block_lists: list[tuple[int, ...]]) -> NDArray[np.int64]:
    """Distinct blocks per request (what the skip rule compares with the capacity)."""
    return np.fromiter((len(set(b)) for b in block_lists), dtype=np.int64, count=len(block_lists))


def _follow(pointers: NDArray[np.int64], live: NDArray[np.bool_]) -> NDArray[np.int64]:
    """Per position: the first live position on its chain starting at ``pointers[j]``
    (``pointers`` are 0-based, -1 = end; every chain strictly increases), -1 if none.
    Pointer doubling: O(n log L) for chains of length L, all in numpy."""
    n = len(pointers)
    # res[k]: k itself when live, else the next position on k's chain (resolved below).
    res = np.where(live, np.arange(n, dtype=np.int64), pointers)
    while True:
        open_ = np.flatnonzero(res >= 0)
        open_ = open_[~live[res[open_]]]
        if not len(open_):
            break
        res[open_] = res[res[open_]]
    valid = pointers >= 0
    out = np.full(n, -1, dtype=np.int64)
    out[valid] = res[pointers[valid]]
    return out


def without_skipped(table: FutureTable, served: NDArray[np.bool_]) -> FutureTable:
    """``table`` with the accesses of requests where ``served`` is False removed.

    ``served`` has one flag per request. Rows of skipped requests keep their (unused) values.
    Returns ``table`` itself when every request is served.
    """
    if served.all():
        return table
    sizes = np.diff(table.offsets)
    live = np.repeat(served, sizes)
    nxt = table.next_access
    pointers = np.where(nxt == NEVER, -1, nxt - 1).astype(np.int64)
    followed = _follow(pointers, live)
    next_access = np.where(followed >= 0, followed + 1, NEVER).astype(np.int64)
    sess = table.session_next
    spointers = np.where(sess == NEVER, -1, sess).astype(np.int64)
    sfollowed = _follow(spointers, served)
    session_next = np.where(sfollowed >= 0, sfollowed, NEVER).astype(np.int64)
    for arr in (next_access, session_next):
        arr.flags.writeable = False
    return FutureTable(next_access, table.offsets, session_next)


def stores_future(reader: TraceReader) -> bool:
    """Whether the file itself stores next accesses (an lcp file from ``kvplan convert``)."""
    return isinstance(reader, LcpTrace) and reader.header.has_next_access


@dataclass(frozen=True, slots=True, eq=False)
class SharedFuture:
    """The whole trace's future and each request's distinct block count (the skip rule)."""

    table: FutureTable
    distinct: NDArray[np.int64]

    def rows(self, capacity: int) -> Iterator[FutureRow]:
        """The future as a replay at ``capacity`` sees it: skipped requests' accesses removed."""
        return without_skipped(self.table, self.distinct <= capacity).rows()

    def served(self, capacity: int) -> FutureTable:
        """The future as a replay at ``capacity`` sees it, whole (what the compiled core
        slices per chunk: ``CompiledReplay.feed_served``)."""
        return without_skipped(self.table, self.distinct <= capacity)


def replay_streams(
    reader: TraceReader, future: SharedFuture | None, oracle: bool, capacity: int
) -> tuple[Iterable[TraceRequest], Iterable[FutureRow] | None]:
    """A new pass over the trace: the requests and, for an oracle, their future (``future``
    when the file does not store one, else the file's own in the same pass)."""
    if not oracle:
        return reader.requests(), None
    if future is not None:
        return reader.requests(), future.rows(capacity)
    # The file stores the future: one annotated pass, split in two. ``replay`` zips the halves
    # in lockstep, so ``tee`` buffers at most one request.
    first, second = tee(reader.annotated())
    return (a.request for a in first), ((a.next_access, a.session_next_index) for a in second)
