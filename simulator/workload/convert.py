"""Converting a trace (JSONL or lcp) to an lcp file, with the future annotation.

Two passes over the source: the first interns block ids, counts what the header needs and
computes every next access (``TraceReader.future``: 16 bytes per block access held in memory);
the second streams the requests into the ``LcpWriter``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from simulator.workload.lcp import (
    ENTRY_BYTES,
    HEADER_BYTES,
    LCP_SUFFIXES,
    RECORD_BYTES,
    DeltaCounts,
    LcpHeader,
    LcpWriter,
)
from simulator.workload.trace import open_trace
from slo.inputfile import InputError

__all__ = ["ConvertSummary", "convert_to_lcp"]


@dataclass(frozen=True, slots=True)
class ConvertSummary:
    """What a conversion read and wrote."""

    source: Path
    output: Path
    n_requests: int
    n_block_accesses: int
    n_unique_blocks: int
    n_bad_lines: int
    """Source lines skipped (``skip_bad_lines``)."""
    n_out_of_order: int
    """Requests arriving before an earlier one in the file (order kept)."""
    source_bytes: int
    output_bytes: int
    deltas: DeltaCounts
    """Distribution of the next-access deltas written."""

    @property
    def lcp_bytes(self) -> int:
        """Size of the uncompressed lcp form."""
        return HEADER_BYTES + RECORD_BYTES * self.n_requests + ENTRY_BYTES * self.n_block_accesses

    @property
    def compression_ratio(self) -> float:
        """Uncompressed lcp bytes per output byte (1.0 for a plain ``.lcp``)."""
        return self.lcp_bytes / self.output_bytes

    @property
    def share_delta_0_or_1(self) -> float:
        """Share of block entries whose next-access delta is 0 or 1 (0.0 if no blocks)."""
        total = self.n_block_accesses
        return (self.deltas.zero + self.deltas.one) / total if total else 0.0

    @property
    def share_never(self) -> float:
        """Share of block entries never accessed again (delta -1)."""
        total = self.n_block_accesses
        return self.deltas.never / total if total else 0.0


def convert_to_lcp(
    source: Path,
    output: Path,
    *,
    fmt: str = "auto",
    block_size_tokens: int | None = None,
    skip_bad_lines: bool = False,
    zstd_level: int = 3,
) -> ConvertSummary:
    """Write ``source`` (any trace ``open_trace`` reads) as ``output`` (``.lcp``/``.lcp.zst``).

    Block ids are prefix-interned (the only kind lcp stores). ``output`` appears only when the
    conversion succeeds. Raises ``InputError`` for a bad source, a bad output name or a trace
    the format cannot hold (e.g. more than 64 request types).
    """
    if not output.name.endswith(LCP_SUFFIXES):
        raise InputError(f"{output}: output name must end with .lcp or .lcp.zst")
    reader = open_trace(
        source, fmt=fmt, skip_bad_lines=skip_bad_lines, block_size_tokens=block_size_tokens
    )
    reader.future()  # pass 1: ids, counts and the next-access annotation
    stats, info = reader.stats, reader.info
    header = LcpHeader(
        schema=info.schema,
        block_size_tokens=info.block_size_tokens,
        n_requests=stats.n_requests,
        n_block_accesses=stats.n_block_accesses,
        n_unique_blocks=stats.n_unique_blocks,
        max_blocks_per_request=stats.max_blocks_per_request,
        start_time_us=stats.start_time_us,
        end_time_us=stats.end_time_us,
        type_names=info.type_names,
        has_next_access=True,
    )
    try:
        writer = LcpWriter(output, header, zstd_level=zstd_level)
    except OSError as err:
        raise InputError(f"{output}: cannot write: {err.strerror or err}") from None
    except ValueError as err:
        raise InputError(f"{source}: cannot be stored as lcp: {err}") from None
    with writer:
        for ann in reader.annotated():  # pass 2
            try:
                writer.write(ann.request, ann.next_access, ann.session_next_index)
            except ValueError as err:
                raise InputError(f"{source}: cannot be stored as lcp: {err}") from None
    return ConvertSummary(
        source=source,
        output=output,
        n_requests=stats.n_requests,
        n_block_accesses=stats.n_block_accesses,
        n_unique_blocks=stats.n_unique_blocks,
        n_bad_lines=stats.n_bad_lines,
        n_out_of_order=stats.n_out_of_order,
        source_bytes=source.stat().st_size,
        output_bytes=output.stat().st_size,
        deltas=writer.delta_counts,
    )
