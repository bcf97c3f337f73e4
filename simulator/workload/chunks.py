"""Requests as arrays: ``BlockChunk``, many requests' block ids in one int64 array.

What the compiled replay core (``simulator.kvcache.compiled``) consumes instead of one
``TraceRequest`` object per request: ``blocks`` holds the block ids of consecutive requests
back to back (each in prefix order) and ``offsets[r]:offsets[r + 1]`` is request ``r``'s slice.
The vectorised readers (``jsonl_chunks``, ``lcp_chunks``) produce chunks straight from the file;
``chunk_requests`` packs any request stream (tests, synthetic workloads, raw-id traces).
``observe_chunk`` updates a ``ReadStats`` for a whole chunk as ``ReadStats.observe`` would per
request.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from itertools import chain

import numpy as np
from numpy.typing import NDArray

from simulator.workload.request import TraceRequest
from simulator.workload.traceinfo import ReadStats

__all__ = ["CHUNK_BLOCKS", "BlockChunk", "chunk_requests", "observe_chunk"]

#: Block accesses per chunk the readers aim for: large enough that per-chunk overhead (numpy
#: calls, one compiled call per policy) vanishes, small enough to keep a chunk at ~8 MiB.
CHUNK_BLOCKS = 1 << 20


@dataclass(frozen=True, slots=True, eq=False)
class BlockChunk:
    """Consecutive requests of a workload as flat arrays (read-only by convention)."""

    blocks: NDArray[np.int64]
    """Block ids (≥ 0) of every request, back to back, each request in prefix order."""
    offsets: NDArray[np.int64]
    """``n_requests + 1`` non-decreasing positions into ``blocks``, from 0 to ``len(blocks)``."""
    first_index: int
    """Workload index (``TraceRequest.index``) of the first request of the chunk."""
    max_id: int
    """Largest block id in the chunk (-1 if it holds no block); sizes the policies' arrays."""
    timestamps: NDArray[np.float64] | None = None
    """Per request: ``TraceRequest.timestamp_s`` (``chunk_requests`` and the file readers fill
    it). Read by the compiled policies that read the request context (``asym_cache``)."""
    categories: NDArray[np.int64] | None = None
    """Per request: ``TraceRequest.category`` (as ``timestamps``; ``workload_aware``)."""
    sessions: NDArray[np.int64] | None = None
    """Per request: ``TraceRequest.session_id``, -1 for none (as ``timestamps``; the session
    policies)."""

    @property
    def n_requests(self) -> int:
        """Requests in the chunk."""
        return len(self.offsets) - 1


def chunk_requests(
    requests: Iterable[TraceRequest], *, max_blocks: int = CHUNK_BLOCKS
) -> Iterator[BlockChunk]:
    """Pack ``requests`` (file order; indices consecutive) into chunks of about ``max_blocks``
    block accesses, the last one possibly smaller; an empty stream yields nothing. Block ids
    must be non-negative (as interned and lcp ids are)."""
    batch: list[TraceRequest] = []
    first = 0
    filled = 0
    for request in requests:
        if not batch:
            first = request.index
        batch.append(request)
        filled += len(request.block_ids)
        if filled >= max_blocks:
            yield _pack(batch, first)
            batch, filled = [], 0
    if batch:
        yield _pack(batch, first)


def _pack(batch: list[TraceRequest], first: int) -> BlockChunk:
    n = len(batch)
    lengths = np.fromiter((len(r.block_ids) for r in batch), dtype=np.int64, count=n)
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    total = int(offsets[-1])
    ids = chain.from_iterable(r.block_ids for r in batch)
    blocks = np.fromiter(ids, dtype=np.int64, count=total)
    times = np.fromiter((r.timestamp_s for r in batch), dtype=np.float64, count=n)
    categories = np.fromiter((r.category for r in batch), dtype=np.int64, count=n)
    sessions = np.fromiter((r.session_id for r in batch), dtype=np.int64, count=n)
    largest = int(blocks.max()) if total else -1
    return BlockChunk(blocks, offsets, first, largest, times, categories, sessions)


def observe_chunk(
    stats: ReadStats, arrival_us: NDArray[np.int64], lengths: NDArray[np.int64]
) -> None:
    """``stats.observe(arrival_us[i], lengths[i])`` for every i, in order, without a loop.

    A request is out of order when it arrives before the latest arrival so far; the start time
    is then the minimum, the end time the running maximum (exactly what ``observe`` keeps).
    """
    n = len(arrival_us)
    if n == 0:
        return
    if stats.n_requests == 0:
        stats.start_time_us = stats.end_time_us = int(arrival_us[0])
    latest = np.maximum.accumulate(np.concatenate(([stats.end_time_us], arrival_us)))
    stats.n_out_of_order += int(np.count_nonzero(arrival_us < latest[:-1]))
    stats.start_time_us = min(stats.start_time_us, int(arrival_us.min()))
    stats.end_time_us = int(latest[-1])
    stats.n_requests += n
    stats.n_block_accesses += int(lengths.sum())
    stats.max_blocks_per_request = max(stats.max_blocks_per_request, int(lengths.max()))
