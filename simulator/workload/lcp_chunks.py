"""Chunked lcp reading: many records per call, as ``BlockChunk``s (for the compiled replay).

``iter_lcp_chunks`` reads the records after the header in pieces of about ``chunk_bytes``
and walks each piece in one compiled call (``_scan``), which copies the block ids, arrival
times, categories (``TraceRequest.category``) and session ids of every complete record out
and checks what ``lcp.iter_lcp`` checks per record (block count and type id within the
header's bounds, block ids continuing the dense first-seen numbering); the header's totals and
the end of the data are checked at the end.

On the first thing that does not check out, the file is read again from the start by
``lcp.iter_lcp``, the reference reader, which raises its one-line ``InputError`` naming the
byte offset; so corrupt files give exactly the messages they always did. The stored future
is not decoded (the compiled policies do not read it).
"""

# ruff: noqa: PLR0917  (numba kernels take their arrays positionally)

from __future__ import annotations

from collections.abc import Iterator
from io import BufferedIOBase
from pathlib import Path
from typing import cast

import numpy as np
from numpy.typing import NDArray

from simulator.core.jit import cached_njit
from simulator.workload._io import open_stream
from simulator.workload.chunks import BlockChunk, observe_chunk
from simulator.workload.lcp import iter_lcp, promised_totals, read_totals
from simulator.workload.lcp_header import ENTRY_BYTES, RECORD_BYTES, LcpHeader, read_header
from simulator.workload.request import TURN_BITS, TURN_CAP
from simulator.workload.traceinfo import ReadStats
from slo.inputfile import InputError

__all__ = ["CHUNK_BYTES", "iter_lcp_chunks"]

#: Bytes of records read per piece (about 130,000 block entries). Small enough that the piece
#: and the ids scanned out of it (3 MB together) can stay in a core's L2 cache (4 MB on the
#: bench machine) between zstd writing the piece, ``_scan`` reading it and the serve loop
#: reading the ids: 8 MB pieces cost about 0.03 s more CPU per 10 M blocks there
#: (bench/README.md, 2026-12-07 fourth session), the extra per-chunk calls included.
CHUNK_BYTES = 2 << 20

_OK, _NEED_MORE, _BAD = 0, 1, 2


def iter_lcp_chunks(
    path: Path, header: LcpHeader, stats: ReadStats, *, chunk_bytes: int = CHUNK_BYTES
) -> Iterator[BlockChunk]:
    """Stream the requests of the lcp file at ``path`` (whose header is ``header``) as chunks.

    ``stats`` is updated per chunk, ``n_unique_blocks`` and ``complete`` at the end. Raises the
    ``InputError`` that ``lcp.iter_lcp`` raises for the same file, and ``InputError`` if the
    header differs from ``header`` (the file changed since it was opened).
    """
    max_id = 0
    n_read = 0
    with open_stream(path) as (stream, _):
        if read_header(stream, path) != header:
            raise InputError(f"{path}: the file changed while being read")
        # Pieces are read into one reused buffer; the bytes of a record cut off at its end
        # move to its start (``have`` of them) and the next read appends to them.
        piece = np.empty(chunk_bytes, dtype=np.uint8)
        have = 0
        while n_read < header.n_requests:
            if have == len(piece):  # one record longer than a piece: grow the piece
                piece = np.concatenate((piece, np.empty(len(piece), dtype=np.uint8)))
            got = cast(BufferedIOBase, stream).readinto(piece[have:].data)
            buffer = piece[: have + got]
            left = header.n_requests - n_read
            n_records = min(left, len(buffer) // RECORD_BYTES)
            ids = np.empty(len(buffer) // ENTRY_BYTES, dtype=np.int64)
            offsets = np.zeros(n_records + 1, dtype=np.int64)
            arrival = np.empty(n_records, dtype=np.int64)
            categories = np.empty(n_records, dtype=np.int64)
            sessions = np.empty(n_records, dtype=np.int64)
            status, n_done, used, new_max = _scan(
                buffer,
                n_records,
                header.max_blocks_per_request,
                len(header.type_names),
                max_id,
                ids,
                offsets,
                arrival,
                categories,
                sessions,
            )
            if status == _BAD or (not got and not n_done):
                _raise_reference(path, header)  # corrupt or truncated: the reference says how
            have = len(buffer) - used
            piece[:have] = buffer[used:]  # numpy copies overlapping ranges safely
            if n_done:
                first = n_read
                n_read += n_done
                max_id = new_max
                observe_chunk(stats, arrival[:n_done], np.diff(offsets[: n_done + 1]))
                blocks = ids[: offsets[n_done]]
                yield BlockChunk(
                    blocks,
                    offsets[: n_done + 1],
                    first,
                    max_id,
                    arrival[:n_done] / 1e6,  # as iter_lcp's ``arrival_us / 1e6``, per request
                    categories[:n_done],
                    sessions[:n_done],
                )
        if have or stream.read(1) or read_totals(stats, max_id) != promised_totals(header):
            _raise_reference(path, header)
    stats.n_unique_blocks = max_id
    stats.complete = True


def _raise_reference(path: Path, header: LcpHeader) -> None:
    """Read the file with the reference reader, which raises what is wrong with it."""
    with open_stream(path) as (stream, _):
        read_header(stream, path)
        for _ in iter_lcp(stream, header, path, ReadStats(), with_future=False):
            pass
    raise RuntimeError(f"{path}: the chunked lcp reader refused a file the reference accepts")


@cached_njit
def _le_int64(buffer: NDArray[np.uint8], at: int, size: int) -> int:
    """The little-endian signed integer of ``size`` bytes (8 or less) at ``at``."""
    value = np.uint64(0)
    for i in range(size - 1, -1, -1):
        value = (value << np.uint64(8)) | np.uint64(buffer[at + i])
    return int(np.int64(value))


@cached_njit
def _scan(
    buffer: NDArray[np.uint8],
    n_records: int,
    max_blocks: int,
    n_types: int,
    max_id: int,
    ids: NDArray[np.int64],
    offsets: NDArray[np.int64],
    arrival: NDArray[np.int64],
    categories: NDArray[np.int64],
    sessions: NDArray[np.int64],
) -> tuple[int, int, int, int]:
    """Walk up to ``n_records`` records from the start of ``buffer``.

    Returns (status, records done, bytes used, largest id): ``_OK`` when ``n_records`` were
    read, ``_NEED_MORE`` when the next one is cut off by the end of the buffer, ``_BAD`` for a
    record that ``iter_lcp`` refuses (the records before it are then not to be used).
    Record layout (``lcp._RECORD``): arrival_us at byte 0, session_id at 32, n_blocks (u32) at
    48, turn (u32) at 60, type_id (u8) at 64; each entry is block_id (u64) then the next-access
    delta.
    """
    pos = 0
    n = 0
    for r in range(n_records):
        if pos + RECORD_BYTES > len(buffer):
            return _NEED_MORE, r, pos, max_id
        n_blocks = _le_int64(buffer, pos + 48, 4)
        if n_blocks > max_blocks or buffer[pos + 64] > n_types:
            return _BAD, r, pos, max_id
        end = pos + RECORD_BYTES + n_blocks * ENTRY_BYTES
        if end > len(buffer):
            return _NEED_MORE, r, pos, max_id
        arrival[r] = _le_int64(buffer, pos, 8)
        sessions[r] = _le_int64(buffer, pos + 32, 8)
        turn = min(_le_int64(buffer, pos + 60, 4), TURN_CAP)
        categories[r] = (np.int64(buffer[pos + 64]) << TURN_BITS) | turn  # TraceRequest.category
        seen = max_id  # ids above the largest before this request must count up from it
        for b in range(n_blocks):
            block = _le_int64(buffer, pos + RECORD_BYTES + b * ENTRY_BYTES, 8)
            if block < 1:
                return _BAD, r, pos, max_id
            if block > max_id:
                if block != seen + 1:
                    return _BAD, r, pos, max_id
                seen = block
            ids[n] = block
            n += 1
        max_id = seen
        offsets[r + 1] = n
        pos = end
    return _OK, n_records, pos, max_id
