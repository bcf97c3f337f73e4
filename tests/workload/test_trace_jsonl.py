"""JSONL trace readers: schema detection, interning, sessions, types, bad lines."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
import zstandard

from simulator.workload import open_trace
from slo.inputfile import InputError

WriteJsonl = Callable[..., Path]  # the conftest fixture's type

MOONCAKE = [
    {"timestamp": 0, "input_length": 1000, "output_length": 10, "hash_ids": [0, 1]},
    {"timestamp": 1500, "input_length": 1500, "output_length": 20, "hash_ids": [0, 1, 2]},
    {"timestamp": 2000, "input_length": 600, "output_length": 5, "hash_ids": [3, 1]},
]

QWEN = [
    {"chat_id": 1, "parent_chat_id": -1, "timestamp": 0.5, "input_length": 40,
     "output_length": 7, "type": "text", "turn": 1, "hash_ids": [100, 101, 102]},
    {"chat_id": 5, "parent_chat_id": 1, "timestamp": 61.114, "input_length": 60,
     "output_length": 9, "type": "search", "turn": 2, "hash_ids": [100, 101, 102, 103]},
    {"chat_id": 7, "parent_chat_id": 5, "timestamp": 62.0, "input_length": 20,
     "output_length": 3, "type": "text", "turn": 3, "hash_ids": [100, 101]},
    {"chat_id": 9, "parent_chat_id": 100, "timestamp": 63.0, "input_length": 16,
     "output_length": 1, "turn": 4, "hash_ids": [101]},
]  # fmt: skip


def test_mooncake_is_detected_and_interned(write_jsonl: WriteJsonl) -> None:
    reader = open_trace(write_jsonl(MOONCAKE))
    requests = list(reader)
    info = reader.info
    assert (info.container, info.schema, info.compressed) == ("jsonl", "mooncake", False)
    assert info.block_size_tokens == 512
    assert [r.block_ids for r in requests] == [(1, 2), (1, 2, 3), (4, 5)]
    assert [r.timestamp_s for r in requests] == [0.0, 1.5, 2.0]
    assert [r.index for r in requests] == [0, 1, 2]
    first = requests[0]
    assert (first.input_length, first.output_length) == (1000, 10)
    assert (first.chat_id, first.parent_chat_id, first.session_id) == (-1, -1, -1)
    assert (first.type_id, first.turn, first.completion_s) == (0, 0, -1.0)
    stats = reader.stats
    assert stats.complete
    assert (stats.n_requests, stats.n_block_accesses, stats.n_unique_blocks) == (3, 7, 5)
    assert stats.max_blocks_per_request == 3
    assert (stats.start_time_us, stats.end_time_us) == (0, 2_000_000)
    assert stats.raw_ids is None


def test_qwen_sessions_types_and_turns(write_jsonl: WriteJsonl) -> None:
    reader = open_trace(write_jsonl(QWEN))
    requests = list(reader)
    assert (reader.info.schema, reader.info.block_size_tokens) == ("qwen", 16)
    assert [r.session_id for r in requests] == [1, 1, 1, 100]  # 100: parent outside the trace
    assert [r.type_id for r in requests] == [1, 2, 1, 0]
    assert reader.info.type_names == ("text", "search")
    assert [r.turn for r in requests] == [1, 2, 3, 4]
    assert [(r.chat_id, r.parent_chat_id) for r in requests][1] == (5, 1)
    assert [r.timestamp_s for r in requests] == [0.5, 61.114, 62.0, 63.0]
    assert [r.block_ids for r in requests] == [(1, 2, 3), (1, 2, 3, 4), (1, 2), (5,)]


def test_forced_schema_and_block_size(write_jsonl: WriteJsonl) -> None:
    path = write_jsonl(QWEN)
    as_mooncake = open_trace(path, fmt="mooncake", block_size_tokens=64)
    requests = list(as_mooncake)
    assert as_mooncake.info.schema == "mooncake"
    assert as_mooncake.info.block_size_tokens == 64
    assert requests[1].timestamp_s == pytest.approx(0.061114)  # read as milliseconds
    assert requests[1].session_id == -1
    with pytest.raises(InputError, match=r"trace\.jsonl:1: missing field 'chat_id'"):
        list(open_trace(write_jsonl(MOONCAKE), fmt="qwen"))


def test_raw_mode_keeps_ids_and_reports_prefix_uniqueness(write_jsonl: WriteJsonl) -> None:
    reader = open_trace(write_jsonl(MOONCAKE), block_id="raw")
    assert [r.block_ids for r in reader] == [(0, 1), (0, 1, 2), (3, 1)]
    report = reader.stats.raw_ids
    assert report is not None
    # id 1 follows 0 and 3 (same position 1): one multi-predecessor id, no multi-position one
    assert (report.n_unique_ids, report.n_multi_predecessor, report.n_multi_position) == (4, 1, 0)


def test_timestamps_are_quantised_to_microseconds(write_jsonl: WriteJsonl) -> None:
    record = dict(QWEN[0], timestamp=0.12345678)
    (request,) = open_trace(write_jsonl([record]))
    assert request.timestamp_s == 0.123457


_GOOD = json.dumps(MOONCAKE[0])


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"timestamp": 0, "input_length": 5', "malformed JSON"),
        ("[1, 2]", "expected a JSON object, got list"),
        ('{"timestamp": 0, "input_length": 5, "output_length": 1}', "missing field 'hash_ids'"),
        ('{"timestamp": 0, "input_length": -5, "output_length": 1, "hash_ids": []}',
         "input_length must be an integer ≥ 0, got -5"),
        ('{"timestamp": 0, "input_length": 5, "output_length": 1.0, "hash_ids": []}',
         "output_length must be an integer"),
        ('{"timestamp": 0, "input_length": 5, "output_length": 1, "hash_ids": [0, 1.5]}',
         r"hash_ids\[1\] must be an integer"),
        ('{"timestamp": 0, "input_length": 5, "output_length": 1, "hash_ids": ["3"]}',
         r"hash_ids\[0\] must be an integer"),
        ('{"timestamp": 0, "input_length": 5, "output_length": 1, "hash_ids": [true]}',
         r"hash_ids\[0\] must be an integer"),
        ('{"timestamp": 0, "input_length": 5, "output_length": 1, "hash_ids": [-1]}',
         r"hash_ids\[0\] must be an integer"),
        ('{"timestamp": 0, "input_length": 5, "output_length": 1, "hash_ids": 7}',
         "hash_ids must be a list"),
        ('{"timestamp": "0", "input_length": 5, "output_length": 1, "hash_ids": []}',
         "timestamp must be a non-negative number"),
        ('{"timestamp": NaN, "input_length": 5, "output_length": 1, "hash_ids": []}',
         "timestamp must be a non-negative number"),
    ],
)  # fmt: skip
def test_bad_line_names_file_and_line(write_jsonl: WriteJsonl, line: str, message: str) -> None:
    path = write_jsonl([_GOOD, "", line, _GOOD])  # the blank line 2 is ignored
    with pytest.raises(InputError, match=rf"^{path}:3: .*{message}") as err:
        list(open_trace(path))
    assert "\n" not in str(err.value)


def test_skip_bad_lines_counts_them_and_keeps_indices_dense(write_jsonl: WriteJsonl) -> None:
    good = [json.dumps(record) for record in MOONCAKE]
    lines = [good[0], "{oops", good[1], "[]", good[2]]
    reader = open_trace(write_jsonl(lines), skip_bad_lines=True)
    requests = list(reader)
    assert [r.index for r in requests] == [0, 1, 2]
    assert [r.block_ids for r in requests] == [(1, 2), (1, 2, 3), (4, 5)]
    assert reader.stats.n_bad_lines == 2


def test_first_line_bad_is_reported_even_when_detecting(write_jsonl: WriteJsonl) -> None:
    path = write_jsonl(["not json", _GOOD])
    with pytest.raises(InputError, match=r":1: malformed JSON"):
        open_trace(path)
    assert open_trace(path, skip_bad_lines=True).info.schema == "mooncake"


def test_non_monotone_timestamps_keep_file_order_and_are_counted(
    write_jsonl: WriteJsonl,
) -> None:
    records = [dict(MOONCAKE[0], timestamp=t) for t in (5000, 1000, 7000, 6000, 9000)]
    reader = open_trace(write_jsonl(records))
    assert [r.timestamp_s for r in reader] == [5.0, 1.0, 7.0, 6.0, 9.0]
    assert reader.stats.n_out_of_order == 2
    assert (reader.stats.start_time_us, reader.stats.end_time_us) == (1_000_000, 9_000_000)


def test_missing_empty_and_compressed_files(write_jsonl: WriteJsonl, tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such file"):
        open_trace(tmp_path / "absent.jsonl")
    with pytest.raises(InputError, match="no trace records"):
        open_trace(write_jsonl(["", "  "], "empty.jsonl"))
    plain = write_jsonl(QWEN)
    packed = tmp_path / "trace.jsonl.zst"
    packed.write_bytes(zstandard.ZstdCompressor().compress(plain.read_bytes()))
    reader = open_trace(packed)
    assert reader.info.compressed
    assert list(reader) == list(open_trace(plain))


def test_reader_is_reiterable_with_identical_results(write_jsonl: WriteJsonl) -> None:
    reader = open_trace(write_jsonl(QWEN))
    assert list(reader) == list(reader)


def test_corrupt_zstd_stream_is_one_line(write_jsonl: WriteJsonl, tmp_path: Path) -> None:
    plain = write_jsonl(QWEN * 50)
    packed = bytearray(zstandard.ZstdCompressor(write_checksum=True).compress(plain.read_bytes()))
    packed[len(packed) // 2] ^= 0xFF
    path = tmp_path / "bad.jsonl.zst"
    path.write_bytes(bytes(packed))
    with pytest.raises(InputError, match=f"^{path}") as err:
        list(open_trace(path))
    assert "\n" not in str(err.value)
