"""The real Mooncake traces (../shared/data/traces): identity across containers, golden counts.

Skipped where the shared data is absent (a clone without ../shared beside it).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from simulator.kvcache.policies.base import NEVER
from simulator.workload import convert_to_lcp, open_trace

TRACES = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "traces"

# name -> (requests, block accesses, unique blocks, deltas == 1, last timestamp in µs)
GOLDEN = {
    "mooncake_conversation_trace": (12_031, 288_500, 182_790, 89_002, 3_536_999_000),
    "mooncake_synthetic_trace": (3_993, 121_877, 43_924, 76_035, 1_022_025_000),
}


def _trace(name: str) -> Path:
    path = TRACES / f"{name}.jsonl"
    if not path.exists():
        pytest.skip(f"{path} is absent (the shared trace data is not beside this checkout)")
    return path


def _backward_next_access(flat: list[int]) -> list[int]:
    """Reference: one backward scan remembering where each block is seen next."""
    seen: dict[int, int] = {}
    out = [NEVER] * len(flat)
    for i in range(len(flat) - 1, -1, -1):
        out[i] = seen.get(flat[i], NEVER)
        seen[flat[i]] = i + 1
    return out


@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_real_trace_identical_from_jsonl_lcp_and_zst(name: str, tmp_path: Path) -> None:
    source = _trace(name)
    n_requests, n_blocks, n_unique, n_delta_one, end_us = GOLDEN[name]
    jsonl = open_trace(source)
    requests = list(jsonl)
    stats = jsonl.stats
    assert (stats.n_requests, stats.n_block_accesses, stats.n_unique_blocks) == (
        n_requests,
        n_blocks,
        n_unique,
    )
    assert (stats.end_time_us, stats.n_out_of_order, stats.n_bad_lines) == (end_us, 0, 0)
    flat = [b for r in requests for b in r.block_ids]
    expected_next = _backward_next_access(flat)
    for suffix in (".lcp", ".lcp.zst"):
        out = tmp_path / f"{name}{suffix}"
        summary = convert_to_lcp(source, out)
        assert (summary.deltas.zero, summary.deltas.one, summary.deltas.never) == (
            0,
            n_delta_one,
            n_unique,  # every block's last access
        )
        reader = open_trace(out)
        annotated = list(reader.annotated())
        assert [a.request for a in annotated] == requests
        got_next = np.concatenate([a.next_access for a in annotated])
        assert got_next.tolist() == expected_next
        assert reader.stats.complete


@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_mooncake_ids_are_prefix_unique(name: str) -> None:
    reader = open_trace(_trace(name), block_id="raw")
    for _ in reader:
        pass
    report = reader.stats.raw_ids
    assert report is not None
    assert report.prefix_unique
    assert report.n_multi_position == 0
    assert report.n_unique_ids == GOLDEN[name][2]  # raw and prefix ids agree in number
