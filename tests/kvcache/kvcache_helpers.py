"""Shared helpers of the kvcache tests: trace builders and a brute-force LRU prefix cache.

The reference below is written independently of ``simulator.kvcache`` (a plain list in recency
order, linear scans everywhere) so that differential tests compare two implementations of the
PrefixSim serve loop, not one implementation with itself.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from simulator.testing.traces import random_prefix_trace  # noqa: F401 (the kvcache tests import it from here)
from simulator.workload.request import TraceRequest

TRACES_DIR = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "traces"


def as_requests(lists: Sequence[Sequence[int]]) -> list[TraceRequest]:
    """Wrap block-id lists into requests with index i and timestamp i seconds."""
    return [TraceRequest(i, float(i), 0, 0, tuple(blocks)) for i, blocks in enumerate(lists)]


@dataclass
class RefCounts:
    """What the reference counts (the same names as ``ReplayResult``)."""

    n_req: int = 0
    n_req_skipped: int = 0
    n_blocks: int = 0
    n_block_hits: int = 0
    n_eviction: int = 0
    n_self_eviction: int = 0


def reference_lru(
    requests: Sequence[Sequence[int]],
    capacity: int,
    *,
    pin: bool = True,
    deepest_first: bool = True,
    stop_at_first_miss: bool = False,
) -> RefCounts:
    """Brute-force PrefixSim serve loop over an LRU list (index 0 = least recently used)."""
    cache: list[int] = []
    resident: set[int] = set()  # mirror of ``cache``, only to make membership tests cheap
    counts = RefCounts()
    for blocks in requests:
        alpha = set(blocks)
        if len(alpha) > capacity:
            counts.n_req_skipped += 1
            continue
        counts.n_req += 1
        counts.n_blocks += len(blocks)
        hit = [b in resident for b in blocks]
        if stop_at_first_miss:
            counts.n_block_hits += hit.index(False) if False in hit else len(hit)
        else:
            counts.n_block_hits += sum(hit)
        missing = [b for b in alpha if b not in resident]
        needed = len(missing) - (capacity - len(cache))
        progress = 0
        while progress < needed:
            victim = next(b for b in cache if not (pin and b in alpha))
            cache.remove(victim)
            resident.discard(victim)
            counts.n_eviction += 1
            if victim in alpha:
                counts.n_self_eviction += 1
            else:
                progress += 1
        for b in reversed(blocks) if deepest_first else blocks:
            if b in resident:
                cache.remove(b)
            cache.append(b)
            resident.add(b)
        assert len(cache) <= capacity
    return counts


def read_mooncake(path: Path) -> list[TraceRequest]:
    """A Mooncake JSONL trace with hash ids interned by ``(parent, raw)`` into 1, 2, 3…"""
    table: dict[tuple[int, int], int] = {}
    requests: list[TraceRequest] = []
    with path.open(encoding="utf-8") as lines:
        for line in lines:
            record = json.loads(line)
            ids = []
            parent = 0
            for raw in record["hash_ids"]:
                parent = table.setdefault((parent, raw), len(table) + 1)
                ids.append(parent)
            requests.append(
                TraceRequest(
                    index=len(requests),
                    timestamp_s=record["timestamp"] / 1000.0,
                    input_length=record["input_length"],
                    output_length=record["output_length"],
                    block_ids=tuple(ids),
                )
            )
    return requests
