"""Small typed results shared by the trace readers: what a trace is, what a pass over it saw.

No I/O here; ``trace.py`` (entry point), ``jsonl.py`` and ``lcp.py`` produce these.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
from numpy.typing import NDArray

from simulator.workload.blockids import RawIdReport
from simulator.workload.request import TraceRequest

__all__ = [
    "DEFAULT_BLOCK_SIZE_TOKENS",
    "AnnotatedRequest",
    "Container",
    "ReadStats",
    "TraceInfo",
    "TraceSchema",
]

TraceSchema = Literal["mooncake", "qwen"]
"""The JSONL schema a trace came from (an lcp file records its source's)."""
Container = Literal["jsonl", "lcp"]
"""How the requests are stored on disk."""

#: Tokens per block when the user does not say: Mooncake hashes 512-token blocks, Qwen-Bailian 16.
DEFAULT_BLOCK_SIZE_TOKENS: dict[str, int] = {"mooncake": 512, "qwen": 16}


@dataclass(frozen=True, slots=True)
class TraceInfo:
    """What a trace is; known when it is opened (see ``type_names`` for the one exception)."""

    path: Path
    """The file as given."""
    container: Container
    """``jsonl`` (Mooncake or Qwen-Bailian records, one per line) or ``lcp`` (binary)."""
    compressed: bool
    """Whether the file is a zstd stream (``.jsonl.zst``, ``.lcp.zst``)."""
    schema: TraceSchema
    """Source schema: decides the timestamp unit and the default block size."""
    block_size_tokens: int
    """Tokens per block (the last block of a prompt may be partial)."""
    block_id: str
    """Block identity mode, a key of ``BLOCK_ID_MODES`` (lcp files are always ``prefix``)."""
    type_names: tuple[str, ...]
    """Request type table: ``type_id`` k ≥ 1 names ``type_names[k - 1]``. Complete at open for
    lcp; for JSONL it is first-seen order and complete only after one full pass (the reader's
    ``info`` property is re-derived after each pass)."""


@dataclass(slots=True)
class ReadStats:
    """Counts of the pass in progress or, once ``complete``, of the last full pass."""

    n_requests: int = 0
    """Requests yielded (bad lines excluded)."""
    n_block_accesses: int = 0
    """Sum of ``len(block_ids)`` over yielded requests."""
    n_unique_blocks: int = 0
    """Distinct block ids seen."""
    max_blocks_per_request: int = 0
    """Longest request, in blocks."""
    start_time_us: int = 0
    """Earliest arrival in whole microseconds (0 for an empty trace)."""
    end_time_us: int = 0
    """Latest arrival in whole microseconds (0 for an empty trace)."""
    n_bad_lines: int = 0
    """JSONL lines skipped because they were corrupt or invalid (``skip_bad_lines=True``)."""
    n_out_of_order: int = 0
    """Requests that arrive earlier than some request before them in the file. File order is
    kept (replay is request-ordered); an engine that replays by time sorts and warns."""
    raw_ids: RawIdReport | None = None
    """Prefix-uniqueness of the raw ids (``block_id="raw"`` only)."""
    complete: bool = False
    """True once a pass has reached the end of the trace."""

    def observe(self, arrival_us: int, n_blocks: int) -> None:
        """Count one yielded request (call in file order)."""
        if self.n_requests == 0:
            self.start_time_us = self.end_time_us = arrival_us
        elif arrival_us < self.end_time_us:
            self.n_out_of_order += 1
            self.start_time_us = min(self.start_time_us, arrival_us)
        else:
            self.end_time_us = arrival_us
        self.n_requests += 1
        self.n_block_accesses += n_blocks
        self.max_blocks_per_request = max(self.max_blocks_per_request, n_blocks)


@dataclass(frozen=True, slots=True, eq=False)
class AnnotatedRequest:
    """A request with its future, for oracle policies (``TraceReader.annotated``).

    Access indices are global and 1-based in forward order: block 0 of request 0 is access 1,
    block 1 is access 2, …, continuing through later requests in prefix order.
    """

    request: TraceRequest
    next_access: NDArray[np.int64]
    """Per block of ``request.block_ids``: index of the next access of the same block id, or
    ``NEVER`` (``simulator.kvcache.policies.base``). Read-only."""
    session_next_index: int
    """Request index of the next request of the same session, ``NEVER`` if none or no
    session (Mooncake)."""
