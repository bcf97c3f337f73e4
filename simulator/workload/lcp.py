"""The ``lcp`` binary trace format: records, the writer and a streaming reader (docs/lcp.md).

Layout (all little-endian, packed): an 8192-byte header, then per request a 68-byte record
followed by ``n_blocks`` 16-byte entries ``(block_id u64, next_access_delta i64)``. A whole file
may be one zstd stream. The reader never seeks and holds one request at a time, so it streams a
file or a decompression stream in bounded memory; it validates everything it reads and turns
corruption into a one-line ``InputError`` naming the file and the (uncompressed) byte offset.

Next-access deltas: within a request, ``prev`` starts at 0; an entry whose next access is
``NEVER`` stores -1 and leaves ``prev`` alone; any other entry stores ``next_access - prev`` (≥ 0)
and sets ``prev = next_access``. With prefix-interned ids next accesses strictly increase along a
request's prefix, so a request that comes back whole stores ``d, 1, 1, …`` and a request that is
never seen again stores ``-1, -1, …`` — long runs that zstd compresses well.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, NamedTuple

import numpy as np
import zstandard
from numpy.typing import NDArray

from simulator.workload._io import read_exact
from simulator.workload.future import NEVER
from simulator.workload.lcp_header import (
    ENTRY_BYTES,
    HEADER_BYTES,
    LCP_SUFFIXES,
    MAGIC,
    RECORD_BYTES,
    LcpHeader,
    corrupt,
    pack_header,
    read_header,
)
from simulator.workload.request import TraceRequest
from simulator.workload.traceinfo import ReadStats

__all__ = [
    "ENTRY_BYTES",
    "HEADER_BYTES",
    "LCP_SUFFIXES",
    "MAGIC",
    "RECORD_BYTES",
    "DeltaCounts",
    "LcpHeader",
    "LcpWriter",
    "decode_next_access",
    "encode_next_access",
    "iter_lcp",
    "pack_header",
    "promised_totals",
    "read_header",
    "read_totals",
]

_RECORD = struct.Struct("<qqqqqqIIIIB3x")  # _Record's fields, then 3 reserved bytes
assert _RECORD.size == RECORD_BYTES


class _Record(NamedTuple):
    arrival_us: int
    completion_us: int
    chat_id: int
    parent_chat_id: int
    session_id: int
    session_next: int
    n_blocks: int
    input_length: int
    output_length: int
    turn: int
    type_id: int


def read_totals(stats: ReadStats, max_id: int) -> tuple[int, ...]:
    """What the header's counts must equal, from what was written or read."""
    return (
        stats.n_requests,
        stats.n_block_accesses,
        max_id,
        stats.max_blocks_per_request,
        stats.start_time_us,
        stats.end_time_us,
    )


def promised_totals(header: LcpHeader) -> tuple[int, ...]:
    """The header's counts, in ``read_totals`` order."""
    return (
        header.n_requests,
        header.n_block_accesses,
        header.n_unique_blocks,
        header.max_blocks_per_request,
        header.start_time_us,
        header.end_time_us,
    )


def encode_next_access(next_access: NDArray[np.int64], first_access: int) -> NDArray[np.int64]:
    """Deltas of one request (module doc); ``first_access`` = global number of its block 0.

    Raises ``ValueError`` if next accesses decrease along the request or do not lie in the
    future (impossible for a correct annotation of prefix-interned ids).
    """
    finite = next_access != NEVER
    values = next_access[finite]
    deltas = np.diff(values, prepend=0)
    own = first_access + np.flatnonzero(finite)
    if len(values) and ((deltas < 0).any() or (values <= own).any()):
        raise ValueError(f"request from access {first_access}: next accesses are not increasing")
    out = np.full(len(next_access), -1, dtype=np.int64)
    out[finite] = deltas
    return out


def decode_next_access(deltas: NDArray[np.int64], first_access: int) -> NDArray[np.int64] | None:
    """Inverse of ``encode_next_access``; ``None`` if the deltas are not a valid encoding."""
    finite = deltas != -1
    values = np.cumsum(np.where(finite, deltas, 0))
    own = first_access + np.arange(len(deltas))
    if (deltas[finite] < 0).any() or (values[finite] <= own[finite]).any():
        return None
    return np.where(finite, values, NEVER).astype(np.int64)


def _dense_prefix_max(ids: NDArray[np.int64], max_seen: int) -> int | None:
    """New largest id if ``ids`` continue a dense first-seen numbering, else ``None``."""
    if len(ids) == 0:
        return max_seen
    fresh = ids[ids > max_seen]
    expected = np.arange(max_seen + 1, max_seen + 1 + len(fresh), dtype=np.int64)
    if ids.min() < 1 or not np.array_equal(fresh, expected):
        return None
    return max_seen + len(fresh)


@dataclass(slots=True)
class DeltaCounts:
    """How the written next-access deltas are distributed (what zstd will see)."""

    zero: int = 0
    one: int = 0
    never: int = 0
    other: int = 0

    def add(self, deltas: NDArray[np.int64]) -> None:
        """Count one request's encoded deltas."""
        never = int(np.count_nonzero(deltas == -1))
        zero = int(np.count_nonzero(deltas == 0))
        one = int(np.count_nonzero(deltas == 1))
        self.never += never
        self.zero += zero
        self.one += one
        self.other += len(deltas) - never - zero - one


class LcpWriter:
    """Writes an lcp file (``.zst`` suffix: one zstd stream) request by request.

    The header's counts are given up front (a converter learns them in its first pass) and
    checked against what was written when the writer closes. Output goes to ``PATH.part`` and
    is renamed into place only on a successful ``close``; ``abort`` (or an exception inside a
    ``with`` block) removes it. Requires prefix-interned ids (dense, first-seen order).
    """

    def __init__(self, path: Path, header: LcpHeader, *, zstd_level: int = 3) -> None:
        self.path = path
        self.header = header
        self.delta_counts = DeltaCounts()
        self._part = path.with_name(path.name + ".part")
        header_bytes = pack_header(header)
        raw = self._part.open("wb")
        self._out: BinaryIO = raw
        if path.name.endswith(".zst"):
            compressor = zstandard.ZstdCompressor(level=zstd_level, write_checksum=True)
            self._out = compressor.stream_writer(raw)
        self._out.write(header_bytes)
        self._seen = ReadStats()
        self._max_id = 0

    def write(
        self,
        request: TraceRequest,
        next_access: NDArray[np.int64] | None = None,
        session_next_index: int = NEVER,
    ) -> None:
        """Append one request; ``next_access`` is required iff the header says it is stored."""
        seen = self._seen
        if request.index != seen.n_requests:
            raise ValueError(f"request index {request.index}, expected {seen.n_requests}")
        ids = np.array(request.block_ids, dtype=np.int64)
        max_id = _dense_prefix_max(ids, self._max_id)
        if max_id is None:
            raise ValueError(f"request {request.index}: block ids are not prefix-interned ids")
        self._max_id = max_id
        deltas = np.zeros(len(ids), dtype=np.int64)
        snext = -1
        if self.header.has_next_access:
            if next_access is None or len(next_access) != len(ids):
                raise ValueError(f"request {request.index}: one next access per block needed")
            deltas = encode_next_access(next_access, seen.n_block_accesses + 1)
            self.delta_counts.add(deltas)
            snext = -1 if session_next_index == NEVER else session_next_index + 1  # 1-based
        arrival_us = round(request.timestamp_s * 1e6)
        completion_us = round(request.completion_s * 1e6) if request.completion_s >= 0 else -1
        if not 0 <= request.type_id <= len(self.header.type_names):
            raise ValueError(f"request {request.index}: type id {request.type_id} not in table")
        try:
            record = _RECORD.pack(
                *_Record(
                    arrival_us,
                    completion_us,
                    request.chat_id,
                    request.parent_chat_id,
                    request.session_id,
                    snext,
                    len(ids),
                    request.input_length,
                    request.output_length,
                    request.turn,
                    request.type_id,
                )
            )
        except struct.error as err:
            raise ValueError(f"request {request.index}: value out of range: {err}") from None
        entries = np.empty((len(ids), 2), dtype="<i8")
        entries[:, 0] = ids
        entries[:, 1] = deltas
        self._out.write(record)
        self._out.write(entries.tobytes())
        seen.observe(arrival_us, len(ids))

    def close(self) -> None:
        """Finish the file and move it into place; ``ValueError`` if the header's counts differ
        from what was written (the partial file is then removed)."""
        written, promised = read_totals(self._seen, self._max_id), promised_totals(self.header)
        if written != promised:
            self.abort()
            raise ValueError(f"{self.path}: header promised {promised}, wrote {written}")
        self._out.close()
        os.replace(self._part, self.path)

    def abort(self) -> None:
        """Close and delete the partial output."""
        self._out.close()
        self._part.unlink(missing_ok=True)

    def __enter__(self) -> LcpWriter:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()


def iter_lcp(
    stream: BinaryIO, header: LcpHeader, path: Path, stats: ReadStats, *, with_future: bool
) -> Iterator[tuple[TraceRequest, NDArray[np.int64] | None, int]]:
    """Stream ``(request, next_access or None, session_next_index)`` after ``read_header``.

    ``next_access`` is decoded only if ``with_future`` and the file stores it; otherwise it is
    ``None`` and ``session_next_index`` is ``NEVER``. Updates ``stats``; checks every record
    and, at the end, the header's totals and that nothing follows the last request.
    """
    offset = HEADER_BYTES
    max_id = 0
    decode = with_future and header.has_next_access
    for index in range(header.n_requests):
        raw = _read(stream, RECORD_BYTES, path, offset, f"record of request {index}")
        rec = _Record._make(_RECORD.unpack(raw))
        if rec.n_blocks > header.max_blocks_per_request or rec.type_id > len(header.type_names):
            raise corrupt(path, offset, f"corrupt record of request {index}")
        offset += RECORD_BYTES
        n_bytes = rec.n_blocks * ENTRY_BYTES
        entries = np.frombuffer(
            _read(stream, n_bytes, path, offset, f"blocks of request {index}"), dtype="<i8"
        ).astype(np.int64, copy=False)
        ids = entries[0::2]
        new_max = _dense_prefix_max(ids, max_id)
        if new_max is None:
            raise corrupt(path, offset, f"block ids of request {index} are not prefix ids")
        max_id = new_max
        next_access = None
        if decode:
            next_access = decode_next_access(entries[1::2], stats.n_block_accesses + 1)
            if next_access is None:
                raise corrupt(path, offset, f"corrupt next-access deltas of request {index}")
        offset += n_bytes
        stats.observe(rec.arrival_us, rec.n_blocks)
        request = TraceRequest(
            index,
            rec.arrival_us / 1e6,
            rec.input_length,
            rec.output_length,
            tuple(ids.tolist()),
            rec.chat_id,
            rec.parent_chat_id,
            rec.session_id,
            rec.turn,
            rec.type_id,
            rec.completion_us / 1e6 if rec.completion_us >= 0 else -1.0,
        )
        yield (
            request,
            next_access,
            (rec.session_next - 1 if decode and rec.session_next >= 1 else NEVER),
        )
    if read_exact(stream, 1):
        raise corrupt(path, offset, f"data after the last of {header.n_requests} requests")
    totals, promised = read_totals(stats, max_id), promised_totals(header)
    if totals != promised:
        raise corrupt(path, 40, f"header totals {promised} do not match the records {totals}")
    stats.n_unique_blocks = max_id
    stats.complete = True


def _read(stream: BinaryIO, n_bytes: int, path: Path, offset: int, what: str) -> bytes:
    data = read_exact(stream, n_bytes)
    if len(data) < n_bytes:
        raise corrupt(path, offset, f"truncated {what} ({len(data)} of {n_bytes} bytes)")
    return data
