"""Future annotation: next accesses and session successors against brute force."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from simulator.kvcache.policies.base import NEVER
from simulator.workload import TraceRequest, build_future, open_trace
from simulator.workload.future import next_access_indices, session_next_indices

WriteJsonl = Callable[..., Path]  # the conftest fixture's type


def brute_force_next_access(requests: Sequence[Sequence[int]]) -> list[list[int]]:
    """Next-access numbers by scanning forward from every access (the O(n^2) definition)."""
    flat = [b for blocks in requests for b in blocks]
    nxt = []
    for i, block in enumerate(flat):
        later = [j for j in range(i + 1, len(flat)) if flat[j] == block]
        nxt.append(later[0] + 1 if later else NEVER)
    out, at = [], 0
    for blocks in requests:
        out.append(nxt[at : at + len(blocks)])
        at += len(blocks)
    return out


def _request(index: int, blocks: Sequence[int], session: int = -1) -> TraceRequest:
    return TraceRequest(index, 0.0, 16 * len(blocks), 1, tuple(blocks), session_id=session)


def test_next_access_by_hand() -> None:
    future = build_future([_request(0, [1, 2, 3]), _request(1, [1, 2, 4]), _request(2, [])])
    assert future.of(0)[0].tolist() == [4, 5, NEVER]
    assert future.of(1)[0].tolist() == [NEVER] * 3
    assert future.of(2)[0].tolist() == []
    assert future.offsets.tolist() == [0, 3, 6, 6]
    assert not future.next_access.flags.writeable


@given(st.lists(st.lists(st.integers(1, 6), max_size=5), max_size=10))
def test_next_access_matches_brute_force(requests: list[list[int]]) -> None:
    future = build_future([_request(i, blocks) for i, blocks in enumerate(requests)])
    assert [nxt.tolist() for nxt, _ in future.rows()] == brute_force_next_access(requests)


def test_next_access_indices_of_nothing() -> None:
    assert next_access_indices(np.zeros(0, dtype=np.int64)).tolist() == []


def test_session_successors() -> None:
    sessions = np.array([-1, 5, 5, 7, -1, 5], dtype=np.int64)
    assert session_next_indices(sessions).tolist() == [NEVER, 2, 5, NEVER, NEVER, NEVER]


def test_annotated_jsonl_trace_matches_brute_force(write_jsonl: WriteJsonl) -> None:
    records = [
        {"chat_id": 1, "parent_chat_id": -1, "hash_ids": [7, 8, 9]},
        {"chat_id": 2, "parent_chat_id": -1, "hash_ids": [7, 8]},
        {"chat_id": 3, "parent_chat_id": 1, "hash_ids": [7, 8, 9, 10]},
        {"chat_id": 4, "parent_chat_id": 3, "hash_ids": [7, 8, 9, 10, 11]},
    ]
    lines = [
        dict(r, timestamp=float(i), input_length=64, output_length=1) for i, r in enumerate(records)
    ]
    reader = open_trace(write_jsonl(lines), with_next_access=True)
    assert reader.stats.complete  # the first pass ran at open
    annotated = list(reader.annotated())
    blocks = [a.request.block_ids for a in annotated]
    assert blocks == [(1, 2, 3), (1, 2), (1, 2, 3, 4), (1, 2, 3, 4, 5)]
    assert [a.next_access.tolist() for a in annotated] == brute_force_next_access(blocks)
    assert annotated[0].next_access.tolist() == [4, 5, 8]
    assert [a.session_next_index for a in annotated] == [2, NEVER, 3, NEVER]
