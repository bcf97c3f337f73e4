"""One pass over a trace file feeding several compiled replays (every ``--algo`` × size).

The file is read and decoded once (``simulator.workload.chunk_reader.ChunkPass``) and each
chunk is served by every replay in turn, so N runs cost one read plus N serve loops instead
of N reads. Runs are independent: each has its own policy state, as separate passes would.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from simulator.kvcache.compiled.engine import CompiledReplay
from simulator.kvcache.replay import ReplayResult
from simulator.workload.chunk_reader import ChunkPass
from simulator.workload.future import FutureTable
from simulator.workload.trace import TraceReader
from simulator.workload.traceinfo import ReadStats, TraceInfo

__all__ = ["replay_pass"]


def replay_pass(
    reader: TraceReader,
    replays: Sequence[CompiledReplay],
    *,
    skip_bad_lines: bool,
    tick: Callable[[int], None] | None = None,
    futures: Sequence[FutureTable | None] | None = None,
) -> tuple[list[ReplayResult], ReadStats, TraceInfo]:
    """Serve ``reader``'s trace through every replay; returns their results (same order) and
    the pass's statistics and trace description. ``tick(n)`` is called after each chunk with
    its number of requests (progress). ``futures[i]`` (oracles): the future of the whole
    trace as replay ``i`` sees it (``served_future.SharedFuture.served``); ``None`` for the
    others. Raises what ``ChunkPass`` and ``CompiledReplay.feed`` raise (``InputError`` for a
    bad trace, ``ValueError`` for a future that does not cover the trace)."""
    wanted = list(futures) if futures is not None else [None] * len(replays)
    chunks = ChunkPass(reader, skip_bad_lines=skip_bad_lines)
    at = 0  # block accesses served so far: where the next chunk's slice of a future starts
    for chunk in chunks:
        for one, future in zip(replays, wanted, strict=True):
            one.feed_served(chunk, future, at)
        at += len(chunk.blocks)
        if tick is not None:
            tick(chunk.n_requests)
    return [one.result() for one in replays], chunks.stats, chunks.info
