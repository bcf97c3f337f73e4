"""``ChunkPass``: one pass over a trace file as ``BlockChunk``s, for the compiled replay core.

    if chunk_reason(reader) is None:
        chunks = ChunkPass(reader, skip_bad_lines=False)
        for chunk in chunks: ...                  # BlockChunk, file order
        chunks.stats, chunks.info                 # complete after the pass

JSONL with prefix ids goes through ``jsonl_chunks`` (vectorised decoding and interning); lcp
files through ``lcp_chunks`` (many records per numpy call). Both give the requests, ids,
statistics and errors of the reader's own ``requests()`` pass. ``--block-id raw`` is not
chunked: raw ids are arbitrary 64-bit values, not the dense ids the compiled policies index
arrays by.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

from simulator.workload.chunks import BlockChunk
from simulator.workload.jsonl_chunks import iter_jsonl_chunks
from simulator.workload.lcp_chunks import iter_lcp_chunks
from simulator.workload.trace import JsonlTrace, LcpTrace, TraceReader
from simulator.workload.traceinfo import ReadStats, TraceInfo

__all__ = ["ChunkPass", "chunk_reason"]


def chunk_reason(reader: TraceReader) -> str | None:
    """``None`` if ``reader``'s file can be read as chunks, else why not."""
    if isinstance(reader, LcpTrace):
        return None
    if isinstance(reader, JsonlTrace) and reader.info.block_id == "prefix":
        return None
    return f"block ids {reader.info.block_id!r} are not dense prefix ids"


class ChunkPass:
    """A single pass over ``reader``'s file; iterate once. ``stats`` and ``info`` are those of
    the pass (``stats.complete`` and, for JSONL, ``info.type_names`` once it has ended)."""

    def __init__(self, reader: TraceReader, *, skip_bad_lines: bool) -> None:
        reason = chunk_reason(reader)
        if reason is not None:
            raise ValueError(f"{reader.info.path}: cannot be read in chunks ({reason})")
        self._reader = reader
        self._skip_bad_lines = skip_bad_lines
        self.stats = ReadStats()
        self.info: TraceInfo = reader.info

    def __iter__(self) -> Iterator[BlockChunk]:
        reader = self._reader
        if isinstance(reader, LcpTrace):
            yield from iter_lcp_chunks(reader.info.path, reader.header, self.stats)
            return
        types: dict[str, int] = {}
        yield from iter_jsonl_chunks(
            self.info.path,
            self.info.schema,
            self.stats,
            types,
            skip_bad_lines=self._skip_bad_lines,
        )
        self.info = replace(self.info, type_names=tuple(types))
