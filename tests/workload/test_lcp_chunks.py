"""The chunked lcp reader against ``iter_lcp``: same ids and statistics, same corruption errors.

Pieces of a few bytes put record boundaries everywhere; every corruption, truncation and
trailing byte that the reference reader reports must come out as the identical ``InputError``.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.workload import ReadStats, convert_to_lcp, open_trace
from simulator.workload.lcp import HEADER_BYTES, RECORD_BYTES
from simulator.workload.lcp_chunks import iter_lcp_chunks
from simulator.workload.trace import LcpTrace
from slo.inputfile import InputError
from tests.workload.test_jsonl_chunks import Rows, chunk_rows

MOONCAKE = [
    {"timestamp": 0, "input_length": 1000, "output_length": 10, "hash_ids": [0, 1]},
    {"timestamp": 1500, "input_length": 1500, "output_length": 20, "hash_ids": [0, 1, 2]},
    {"timestamp": 2000, "input_length": 600, "output_length": 5, "hash_ids": [3, 1]},
]
REQ1_AT = HEADER_BYTES + RECORD_BYTES + 2 * 16  # byte offset of request 1's record


def _lcp(tmp_path: Path, records: list[dict[str, object]], name: str = "t.lcp") -> Path:
    jsonl = tmp_path / "t.jsonl"
    jsonl.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    out = tmp_path / name
    convert_to_lcp(jsonl, out)
    return out


#: Per request: its block ids, ``timestamp_s``, ``category`` and ``session_id`` (the context
#: the chunks carry).


def _chunked(path: Path, chunk_bytes: int) -> tuple[Rows, ReadStats]:
    reader = open_trace(path)
    assert isinstance(reader, LcpTrace)
    stats = ReadStats()
    ids: Rows = []
    for chunk in iter_lcp_chunks(path, reader.header, stats, chunk_bytes=chunk_bytes):
        assert chunk.first_index == len(ids)
        assert chunk.max_id >= int(chunk.blocks.max(initial=0))
        ids += chunk_rows(chunk)
    return ids, stats


def _reference(path: Path) -> tuple[Rows, ReadStats]:
    reader = open_trace(path)
    rows = [(r.block_ids, r.timestamp_s, r.category, r.session_id) for r in reader.requests()]
    return rows, reader.stats


@settings(max_examples=30, deadline=None)
@given(
    lists=st.lists(st.lists(st.integers(0, 5), max_size=9), min_size=1, max_size=30),
    times=st.lists(st.integers(0, 10**6), min_size=30, max_size=30),
    chunk_bytes=st.integers(1, 300),
    zst=st.booleans(),
)
def test_same_ids_and_stats_as_the_reference(
    tmp_path_factory: pytest.TempPathFactory,
    lists: list[list[int]],
    times: list[int],
    chunk_bytes: int,
    zst: bool,
) -> None:
    records = [
        {"timestamp": t, "input_length": 1, "output_length": 1, "hash_ids": ids}
        for ids, t in zip(lists, times, strict=False)  # out-of-order times included
    ]
    path = _lcp(tmp_path_factory.mktemp("l"), records, "t.lcp.zst" if zst else "t.lcp")
    assert _chunked(path, chunk_bytes) == _reference(path)


def _patched(data: bytes, offset: int, fmt: str, value: int) -> bytes:
    out = bytearray(data)
    struct.pack_into(fmt, out, offset, value)
    return bytes(out)


@pytest.mark.parametrize(
    "damage",
    [
        ("patch", 48, "<q", 8),  # header: n_block_accesses off by one
        ("patch", 64, "<q", 2),  # header: max blocks below 3
        ("patch", HEADER_BYTES + 64, "<B", 1),  # type id with no type table
        ("patch", REQ1_AT + RECORD_BYTES, "<q", 9),  # not a prefix id
        ("patch", REQ1_AT + RECORD_BYTES, "<q", 0),
        ("patch", REQ1_AT + RECORD_BYTES, "<q", -3),
        ("patch", REQ1_AT + 48, "<I", 2),  # fewer blocks than written: misaligned records
        ("cut", HEADER_BYTES + 30),
        ("cut", HEADER_BYTES + 73),
        ("cut", REQ1_AT),
        ("trail", 1),
        ("zst-cut", 0),
    ],
)
@pytest.mark.parametrize("chunk_bytes", [7, 1 << 20])
def test_corruption_gets_the_reference_error(
    tmp_path: Path, damage: tuple[object, ...], chunk_bytes: int
) -> None:
    good = _lcp(tmp_path, MOONCAKE).read_bytes()
    kind = damage[0]
    path = tmp_path / ("bad.lcp.zst" if kind == "zst-cut" else "bad.lcp")
    if kind == "patch":
        _, offset, fmt, value = damage
        data = _patched(good, offset, fmt, value)  # type: ignore[arg-type]
    elif kind == "cut":
        data = good[: damage[1]]  # type: ignore[misc]
    elif kind == "trail":
        data = good + b"\0"
    else:
        packed = zstandard.ZstdCompressor().compress(good)
        data = packed[: len(packed) // 2]
    path.write_bytes(data)
    try:
        reader = open_trace(path)
    except InputError:
        return  # the header itself is refused when the file is opened, before any chunk
    with pytest.raises(InputError) as expected:
        list(reader.requests())
    assert isinstance(reader, LcpTrace)
    with pytest.raises(InputError) as got:
        for _ in iter_lcp_chunks(path, reader.header, ReadStats(), chunk_bytes=chunk_bytes):
            pass
    assert str(got.value) == str(expected.value)


def test_a_file_changed_after_opening_is_refused(tmp_path: Path) -> None:
    path = _lcp(tmp_path, MOONCAKE)
    reader = open_trace(path)
    assert isinstance(reader, LcpTrace)
    _lcp(tmp_path, MOONCAKE[:2])  # rewrites t.lcp with another header
    with pytest.raises(InputError, match="changed while being read"):
        list(iter_lcp_chunks(path, reader.header, ReadStats()))


def test_a_request_without_blocks(tmp_path: Path) -> None:
    path = _lcp(tmp_path, [{**MOONCAKE[0], "hash_ids": []}, MOONCAKE[1]])
    assert _chunked(path, 5) == _reference(path)
    assert [row[0] for row in _chunked(path, 5)[0]] == [(), (1, 2, 3)]


def test_qwen_types_and_turns_reach_the_chunks(tmp_path: Path) -> None:
    """Categories (type id and turn, the turn capped at 0xFFFF) and odd arrival times."""
    records = [
        {
            "chat_id": i,
            "parent_chat_id": i - 1,
            "timestamp": t,
            "input_length": 1,
            "output_length": 1,
            "hash_ids": [0, i],
            "turn": turn,
            **({"type": kind} if kind else {}),
        }
        for i, (t, turn, kind) in enumerate(
            [
                (0.1, 1, "text"),
                (1e-6, 2, None),
                (3.3333337, 70_000, "image"),
                (12345.6789, 0, "text"),
            ]
        )
    ]
    path = _lcp(tmp_path, records)
    rows, _ = _chunked(path, 7)
    assert [row[2] for row in rows] == [(1 << 16) | 1, 2, (2 << 16) | 0xFFFF, 1 << 16]
    assert _chunked(path, 7) == _reference(path)
