"""``open_trace``: the one entry point for trace files (JSONL, lcp, either zstd-compressed).

    reader = open_trace("trace.jsonl")            # or .jsonl.zst, .lcp, .lcp.zst
    for request in reader:                        # TraceRequest, file order, streamed
        ...
    reader.stats.n_bad_lines, reader.info.type_names   # complete after a full pass

    for ann in open_trace("trace.lcp.zst").annotated():  # oracle policies
        ann.request, ann.next_access, ann.session_next_index

The container is recognised from the bytes (lcp magic, zstd magic), the JSONL schema from the
first record. A reader is re-iterable: each iteration re-opens the file and streams it again;
only the block-id table (and the Qwen chat -> session map) grows during a pass. ``annotated()``
streams an lcp file that stores next accesses in one pass; anything else takes two (``future``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import cast

import numpy as np
from numpy.typing import NDArray

from simulator.workload._io import open_stream, read_exact
from simulator.workload.blockids import BLOCK_ID_MODES
from simulator.workload.future import FutureTable, build_future
from simulator.workload.jsonl import iter_jsonl, sniff_schema
from simulator.workload.lcp import LCP_SUFFIXES, MAGIC, LcpHeader, iter_lcp, read_header
from simulator.workload.request import TraceRequest
from simulator.workload.traceinfo import (
    DEFAULT_BLOCK_SIZE_TOKENS,
    AnnotatedRequest,
    ReadStats,
    TraceInfo,
    TraceSchema,
)
from slo.inputfile import InputError

__all__ = ["TRACE_FORMATS", "TraceReader", "open_trace"]

#: ``fmt`` choices of ``open_trace``: ``auto`` sniffs; the others insist.
TRACE_FORMATS = ("auto", "mooncake", "qwen", "lcp")


class TraceReader(ABC):
    """A re-iterable trace: ``iter(reader)`` streams ``TraceRequest`` objects in file order."""

    def __init__(self, info: TraceInfo) -> None:
        self._info = info
        self._stats = ReadStats()
        self._future: FutureTable | None = None

    @property
    def info(self) -> TraceInfo:
        """What the trace is (for JSONL, ``type_names`` is complete after a full pass)."""
        return self._info

    @property
    def stats(self) -> ReadStats:
        """Counts of the pass in progress or the last one (``stats.complete``)."""
        return self._stats

    def __iter__(self) -> Iterator[TraceRequest]:
        return self.requests()

    @abstractmethod
    def requests(self) -> Iterator[TraceRequest]:
        """Stream the requests once, in file order (a new pass on every call)."""

    def future(self) -> FutureTable:
        """The whole trace's future (computed by one full pass on first call, then cached).

        Holds 8 bytes per block access and 16 per request; see ``simulator.workload.future``.
        """
        if self._future is None:
            self._future = build_future(self.requests())
        return self._future

    def annotated(self) -> Iterator[AnnotatedRequest]:
        """Stream requests with their next accesses (a second pass after ``future()``)."""
        future = self.future()
        rows = future.rows()
        for request in self.requests():
            next_access, session_next = next(rows, (None, 0))
            if next_access is None or len(next_access) != len(request.block_ids):
                raise InputError(f"{self._info.path}: the trace changed while being read")
            yield AnnotatedRequest(request, next_access, session_next)


class JsonlTrace(TraceReader):
    """A Mooncake or Qwen-Bailian JSONL trace (optionally zstd-compressed)."""

    def __init__(self, info: TraceInfo, *, skip_bad_lines: bool) -> None:
        super().__init__(info)
        self._skip_bad_lines = skip_bad_lines

    def requests(self) -> Iterator[TraceRequest]:
        """Stream once; ``stats`` and ``info.type_names`` are refreshed by the pass."""
        self._stats = stats = ReadStats()
        types: dict[str, int] = {}
        yield from iter_jsonl(
            self._info.path,
            self._info.schema,
            BLOCK_ID_MODES[self._info.block_id](),
            stats,
            types,
            skip_bad_lines=self._skip_bad_lines,
        )
        self._info = replace(self._info, type_names=tuple(types))


class LcpTrace(TraceReader):
    """An lcp file (optionally one zstd stream), validated as it streams."""

    def __init__(self, info: TraceInfo, header: LcpHeader) -> None:
        super().__init__(info)
        self.header = header

    def requests(self) -> Iterator[TraceRequest]:
        """Stream once without decoding the stored future."""
        for request, _, _ in self._stream(with_future=False):
            yield request

    def annotated(self) -> Iterator[AnnotatedRequest]:
        """One pass when the file stores next accesses; otherwise two, as for JSONL."""
        if not self.header.has_next_access:
            yield from super().annotated()
            return
        for request, next_access, session_next in self._stream(with_future=True):
            assert next_access is not None  # decoded because the header says it is stored
            next_access.flags.writeable = False
            yield AnnotatedRequest(request, next_access, session_next)

    def _stream(
        self, *, with_future: bool
    ) -> Iterator[tuple[TraceRequest, NDArray[np.int64] | None, int]]:
        self._stats = stats = ReadStats()
        path = self._info.path
        with open_stream(path) as (stream, _):
            header = read_header(stream, path)
            if header != self.header:
                raise InputError(f"{path}: the file changed while being read")
            yield from iter_lcp(stream, header, path, stats, with_future=with_future)


def open_trace(
    path: str | Path,
    *,
    block_id: str = "prefix",
    fmt: str = "auto",
    skip_bad_lines: bool = False,
    with_next_access: bool = False,
    block_size_tokens: int | None = None,
) -> TraceReader:
    """Open a trace file for streaming; see the module docstring for use.

    - ``block_id``: a key of ``BLOCK_ID_MODES`` (``prefix`` interning or ``raw`` ids; lcp files
      hold prefix ids, so ``raw`` is refused for them).
    - ``fmt``: one of ``TRACE_FORMATS``; ``auto`` recognises lcp by its magic and a JSONL schema
      by its first record (``chat_id`` -> ``qwen``, else ``mooncake``).
    - ``skip_bad_lines``: JSONL only; skip and count corrupt lines instead of raising.
    - ``with_next_access``: make ``annotated()`` ready now; where that needs a first pass (JSONL,
      lcp without stored next accesses) it runs here, so errors surface at open and
      ``info``/``stats`` are complete. Without it ``annotated()`` still works, lazily.
    - ``block_size_tokens``: overrides the schema default (512 Mooncake, 16 Qwen); for lcp it
      must match the file.

    Raises ``InputError`` (one line) for a missing, foreign or corrupt file; ``ValueError`` for
    an unknown ``block_id`` or ``fmt`` (a programming error: CLIs derive their choices).
    """
    path = Path(path)
    if block_id not in BLOCK_ID_MODES:
        raise ValueError(f"block_id must be one of {sorted(BLOCK_ID_MODES)}, got {block_id!r}")
    if fmt not in TRACE_FORMATS:
        raise ValueError(f"fmt must be one of {TRACE_FORMATS}, got {fmt!r}")
    if block_size_tokens is not None and block_size_tokens < 1:
        raise ValueError(f"block_size_tokens must be at least 1, got {block_size_tokens}")
    with open_stream(path) as (stream, compressed):
        # a truncated or damaged lcp file is reported as such, not parsed as JSONL
        is_lcp = read_exact(stream, len(MAGIC)) == MAGIC or (
            fmt == "auto" and path.name.endswith(LCP_SUFFIXES)
        )
    reader: TraceReader
    if is_lcp:
        reader = _open_lcp(path, compressed, fmt, block_id, block_size_tokens)
    elif fmt == "lcp":
        raise InputError(f"{path}: byte 0: not an lcp file (bad magic)")
    else:
        schema: TraceSchema = (
            sniff_schema(path, skip_bad_lines=skip_bad_lines)
            if fmt == "auto"
            else cast(TraceSchema, fmt)  # checked against TRACE_FORMATS above
        )
        info = TraceInfo(
            path=path,
            container="jsonl",
            compressed=compressed,
            schema=schema,
            block_size_tokens=block_size_tokens or DEFAULT_BLOCK_SIZE_TOKENS[schema],
            block_id=block_id,
            type_names=(),
        )
        reader = JsonlTrace(info, skip_bad_lines=skip_bad_lines)
    if with_next_access and not (isinstance(reader, LcpTrace) and reader.header.has_next_access):
        reader.future()
    return reader


def _open_lcp(
    path: Path, compressed: bool, fmt: str, block_id: str, block_size_tokens: int | None
) -> LcpTrace:
    if fmt not in ("auto", "lcp"):
        raise InputError(f"{path}: is an lcp file, not {fmt} JSONL (use the format 'auto')")
    if block_id != "prefix":
        raise InputError(
            f"{path}: lcp files hold prefix-interned ids; block_id {block_id!r} "
            "needs the JSONL trace"
        )
    with open_stream(path) as (stream, _):
        header = read_header(stream, path)
    if block_size_tokens is not None and block_size_tokens != header.block_size_tokens:
        raise InputError(
            f"{path}: block size is {header.block_size_tokens} tokens, not {block_size_tokens}"
        )
    info = TraceInfo(
        path=path,
        container="lcp",
        compressed=compressed,
        schema=header.schema,
        block_size_tokens=header.block_size_tokens,
        block_id="prefix",
        type_names=header.type_names,
    )
    return LcpTrace(info, header)
