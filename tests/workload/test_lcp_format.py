"""The lcp format: round trips (JSONL = .lcp = .lcp.zst), corruption, truncation, the writer."""

from __future__ import annotations

import json
import struct
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.kvcache.policies.base import NEVER
from simulator.workload import LcpHeader, LcpWriter, TraceRequest, convert_to_lcp, open_trace
from simulator.workload.lcp import (
    HEADER_BYTES,
    RECORD_BYTES,
    decode_next_access,
    encode_next_access,
)
from slo.inputfile import InputError

WriteJsonl = Callable[..., Path]  # the conftest fixture's type

MOONCAKE = [
    {"timestamp": 0, "input_length": 1000, "output_length": 10, "hash_ids": [0, 1]},
    {"timestamp": 1500, "input_length": 1500, "output_length": 20, "hash_ids": [0, 1, 2]},
    {"timestamp": 2000, "input_length": 600, "output_length": 5, "hash_ids": [3, 1]},
]
REQ1_AT = HEADER_BYTES + RECORD_BYTES + 2 * 16  # byte offset of request 1's record


def _everything(path: Path) -> tuple[Any, ...]:
    """All a reader yields (requests, futures, info, counts), for equality across containers."""
    reader = open_trace(path)
    annotated = list(reader.annotated())
    stats = reader.stats
    info = reader.info
    return (
        [a.request for a in annotated],
        [a.next_access.tolist() for a in annotated],
        [a.session_next_index for a in annotated],
        (info.schema, info.block_size_tokens, info.type_names, info.block_id),
        (stats.n_requests, stats.n_block_accesses, stats.n_unique_blocks,
         stats.max_blocks_per_request, stats.start_time_us, stats.end_time_us),
    )  # fmt: skip


def _assert_same_from_all_containers(jsonl: Path) -> None:
    expected = _everything(jsonl)
    for suffix in (".lcp", ".lcp.zst"):
        out = jsonl.with_suffix(suffix)
        summary = convert_to_lcp(jsonl, out)
        assert summary.n_requests == len(expected[0])
        assert _everything(out) == expected
        assert list(open_trace(out)) == expected[0]  # plain iteration skips the future


@st.composite
def _traces(draw: st.DrawFn) -> list[dict[str, Any]]:
    schema = draw(st.sampled_from(["mooncake", "qwen"]))
    n = draw(st.integers(1, 12))
    records = []
    for i in range(n):
        us = draw(st.integers(0, 10**10))
        record: dict[str, Any] = {
            "input_length": draw(st.integers(0, 2**31)),
            "output_length": draw(st.integers(0, 5000)),
            "hash_ids": draw(st.lists(st.integers(0, 4), max_size=7)),
        }
        if schema == "mooncake":
            record["timestamp"] = us // 1000
        else:
            record.update(
                chat_id=i,
                parent_chat_id=draw(st.sampled_from([-1, 99, *range(i)])),
                timestamp=us / 1e6,
                turn=draw(st.integers(0, 9)),
            )
            kind = draw(st.sampled_from([None, "text", "search", "ünïcode"]))
            if kind is not None:
                record["type"] = kind
        records.append(record)
    return records


@settings(max_examples=25, deadline=None)
@given(_traces())
def test_random_traces_read_identically_from_jsonl_lcp_and_zst(
    records: list[dict[str, Any]],
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        jsonl = Path(tmp) / "t.jsonl"
        jsonl.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
        _assert_same_from_all_containers(jsonl)


@settings(max_examples=50, deadline=None)
@given(st.integers(0, 100), st.lists(st.tuples(st.booleans(), st.integers(0, 3)), max_size=8))
def test_next_access_deltas_round_trip(first: int, shape: list[tuple[bool, int]]) -> None:
    values, prev = [], 0
    for j, (finite, gap) in enumerate(shape):
        if finite:
            prev = max(prev, first + j) + 1 + gap
            values.append(prev)
        else:
            values.append(NEVER)
    next_access = np.array(values, dtype=np.int64)
    deltas = encode_next_access(next_access, first)
    assert ((deltas == -1) == (next_access == NEVER)).all()
    assert (deltas >= -1).all()
    decoded = decode_next_access(deltas, first)
    assert decoded is not None
    assert decoded.tolist() == values


def test_delta_encoding_by_hand_and_its_limits() -> None:
    deltas = encode_next_access(np.array([10, 11, 12, NEVER, NEVER], dtype=np.int64), 1)
    assert deltas.tolist() == [10, 1, 1, -1, -1]
    with pytest.raises(ValueError, match="not increasing"):
        encode_next_access(np.array([10, 9], dtype=np.int64), 1)
    with pytest.raises(ValueError, match="not increasing"):
        encode_next_access(np.array([1], dtype=np.int64), 1)  # its own access is not the future
    assert decode_next_access(np.array([3, -2], dtype=np.int64), 1) is None


@pytest.fixture
def lcp_bytes(write_jsonl: WriteJsonl, tmp_path: Path) -> bytes:
    out = tmp_path / "small.lcp"
    convert_to_lcp(write_jsonl(MOONCAKE), out)
    return out.read_bytes()


def _patched(data: bytes, patch: tuple[int, str, int]) -> bytes:
    offset, fmt, value = patch
    out = bytearray(data)
    struct.pack_into(fmt, out, offset, value)
    return bytes(out)


@pytest.mark.parametrize(
    ("patch", "message"),
    [
        ((8, "<I", 1), "byte 8: lcp version 1 is not supported"),
        ((8, "<I", 3), "byte 8: lcp version 3 is not supported"),
        ((12, "<I", 4096), "byte 12: corrupt header: size field 4096"),
        ((16, "<I", 48), "byte 16: corrupt header"),
        ((24, "<I", 0), "byte 24: corrupt header: block size 0"),
        ((28, "<B", 0), "byte 28: corrupt header: block-id kind 0"),
        ((29, "<B", 9), "byte 29: corrupt header: schema code 9"),
        ((30, "<B", 65), "byte 30: corrupt header: 65 types"),
        ((32, "<Q", 4), "byte 32: corrupt header: unknown flags 0x4"),
        ((40, "<q", -1), "byte 40: corrupt header: negative count"),
        ((72, "<q", 10**12), "byte 72: corrupt header: start time after end time"),
        ((HEADER_BYTES - 3, "<B", 0), "byte 8184: corrupt header: bad end magic"),
    ],
)
def test_corrupt_header_is_one_line_with_offset(
    lcp_bytes: bytes, tmp_path: Path, patch: tuple[int, str, int], message: str
) -> None:
    path = tmp_path / "bad.lcp"
    path.write_bytes(_patched(lcp_bytes, patch))
    with pytest.raises(InputError, match=f"^{path}: {message}") as err:
        list(open_trace(path))
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(
    ("patch", "message"),
    [
        ((48, "<q", 8), "byte 40: header totals"),  # n_block_accesses off by one
        ((64, "<q", 2), "byte 8292: corrupt record of request 1"),  # max blocks below 3
        ((HEADER_BYTES + 64, "<B", 1), "byte 8192: corrupt record of request 0"),  # no type table
        ((REQ1_AT + RECORD_BYTES, "<q", 9), "byte 8360: block ids of request 1 are not prefix"),
        ((REQ1_AT + RECORD_BYTES, "<q", 0), "byte 8360: block ids of request 1 are not prefix"),
    ],
)
def test_corrupt_records_are_found_while_streaming(
    lcp_bytes: bytes, tmp_path: Path, patch: tuple[int, str, int], message: str
) -> None:
    path = tmp_path / "bad.lcp"
    path.write_bytes(_patched(lcp_bytes, patch))
    reader = open_trace(path)
    with pytest.raises(InputError, match=f"^{path}: {message}"):
        list(reader)


def test_corrupt_delta_is_found_when_the_future_is_read(lcp_bytes: bytes, tmp_path: Path) -> None:
    path = tmp_path / "bad.lcp"
    path.write_bytes(_patched(lcp_bytes, (HEADER_BYTES + RECORD_BYTES + 8, "<q", -5)))
    assert len(list(open_trace(path))) == 3  # ids and records are fine
    with pytest.raises(InputError, match="byte 8260: corrupt next-access deltas of request 0"):
        list(open_trace(path).annotated())


@pytest.mark.parametrize(
    ("cut", "message"),
    [
        (5, "byte 5: truncated header"),
        (100, "byte 100: truncated header"),
        (HEADER_BYTES + 30, "byte 8192: truncated record of request 0 \\(30 of 68 bytes\\)"),
        (HEADER_BYTES + 73, "byte 8260: truncated blocks of request 0 \\(5 of 32 bytes\\)"),
        (REQ1_AT, "byte 8292: truncated record of request 1 \\(0 of 68 bytes\\)"),
    ],
)
def test_truncated_file(lcp_bytes: bytes, tmp_path: Path, cut: int, message: str) -> None:
    path = tmp_path / "cut.lcp"
    path.write_bytes(lcp_bytes[:cut])
    with pytest.raises(InputError, match=f"^{path}: {message}"):
        list(open_trace(path))


def test_truncated_zst_and_trailing_bytes(lcp_bytes: bytes, tmp_path: Path) -> None:
    packed = zstandard.ZstdCompressor().compress(lcp_bytes)
    path = tmp_path / "cut.lcp.zst"
    path.write_bytes(packed[: len(packed) // 2])
    with pytest.raises(InputError, match=f"^{path}: "):
        list(open_trace(path))
    path = tmp_path / "long.lcp"
    path.write_bytes(lcp_bytes + b"\0")
    with pytest.raises(InputError, match="byte 8508: data after the last of 3 requests"):
        list(open_trace(path))


def test_foreign_files_and_mismatched_options(
    lcp_bytes: bytes, write_jsonl: WriteJsonl, tmp_path: Path
) -> None:
    jsonl = write_jsonl(MOONCAKE)
    with pytest.raises(InputError, match="byte 0: not an lcp file"):
        open_trace(jsonl, fmt="lcp")
    misnamed = tmp_path / "really.lcp"
    misnamed.write_bytes(jsonl.read_bytes())
    with pytest.raises(InputError, match="byte 0: not an lcp file"):
        open_trace(misnamed)
    path = tmp_path / "good.lcp"
    path.write_bytes(lcp_bytes)
    with pytest.raises(InputError, match="prefix-interned ids"):
        open_trace(path, block_id="raw")
    with pytest.raises(InputError, match="block size is 512 tokens, not 16"):
        open_trace(path, block_size_tokens=16)
    with pytest.raises(InputError, match="is an lcp file, not qwen JSONL"):
        open_trace(path, fmt="qwen")
    assert open_trace(path, block_size_tokens=512).info.container == "lcp"


def _header(**overrides: Any) -> LcpHeader:
    defaults: dict[str, Any] = {
        "schema": "qwen",
        "block_size_tokens": 16,
        "n_requests": 1,
        "n_block_accesses": 2,
        "n_unique_blocks": 2,
        "max_blocks_per_request": 2,
        "start_time_us": 0,
        "end_time_us": 0,
        "type_names": (),
        "has_next_access": False,
    }
    return LcpHeader(**(defaults | overrides))


def test_writer_checks_promises_and_leaves_no_partial_file(tmp_path: Path) -> None:
    out = tmp_path / "w.lcp"
    writer = LcpWriter(out, _header(n_requests=2))
    writer.write(TraceRequest(0, 0.0, 32, 1, (1, 2)))
    with pytest.raises(ValueError, match="header promised"):
        writer.close()
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(ValueError, match="not prefix-interned"), LcpWriter(out, _header()) as w:
        w.write(TraceRequest(0, 0.0, 32, 1, (5, 9)))
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(ValueError, match="at most 64 request types"):
        LcpWriter(out, _header(type_names=tuple(f"t{k}" for k in range(65))))


def test_file_without_stored_future_is_annotated_in_two_passes(tmp_path: Path) -> None:
    requests = [
        TraceRequest(0, 0.25, 32, 1, (1, 2), chat_id=3, session_id=3, completion_s=1.5),
        TraceRequest(1, 0.5, 48, 1, (1, 2, 3), chat_id=4, parent_chat_id=3, session_id=3),
    ]
    out = tmp_path / "plain.lcp.zst"
    header = _header(
        n_requests=2,
        n_block_accesses=5,
        n_unique_blocks=3,
        max_blocks_per_request=3,
        start_time_us=250_000,
        end_time_us=500_000,
    )
    with LcpWriter(out, header) as writer:
        for request in requests:
            writer.write(request)
    reader = open_trace(out)
    assert list(reader) == requests  # completion time and session fields survive
    annotated = list(reader.annotated())
    assert [a.next_access.tolist() for a in annotated] == [[3, 4], [NEVER] * 3]
    assert [a.session_next_index for a in annotated] == [1, NEVER]


def test_empty_trace_round_trips(tmp_path: Path) -> None:
    out = tmp_path / "empty.lcp"
    empty = _header(n_requests=0, n_block_accesses=0, n_unique_blocks=0, max_blocks_per_request=0)
    with LcpWriter(out, empty):
        pass
    reader = open_trace(out)
    assert list(reader) == []
    assert reader.stats.complete
    assert out.stat().st_size == HEADER_BYTES
