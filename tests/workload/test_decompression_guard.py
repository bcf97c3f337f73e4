"""zstd bombs are refused in one line, early; real compressed traces still read."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import zstandard

from simulator.workload._io import EXPANSION_FLOOR_BYTES, MAX_EXPANSION, open_stream
from simulator.workload.lcp_header import RECORD_BYTES, LcpHeader, pack_header
from simulator.workload.trace import open_trace
from slo.inputfile import InputError

#: 300 MB of records, as the issue's bomb (it compresses to about 9 KB).
BOMB_BYTES = 300_000_000


def _write_zstd(path: Path, head: bytes, filler: bytes, total: int) -> None:
    with path.open("wb") as raw, zstandard.ZstdCompressor(level=3).stream_writer(raw) as out:
        out.write(head)
        written = len(head)
        while written < total:
            part = filler[: total - written]
            out.write(part)
            written += len(part)


def test_a_zstd_bomb_of_zero_filled_lcp_records_is_refused_quickly(tmp_path: Path) -> None:
    n = BOMB_BYTES // RECORD_BYTES
    header = LcpHeader(
        schema="mooncake",
        block_size_tokens=512,
        n_requests=n,  # a header that agrees with the zero-filled records that follow
        n_block_accesses=0,
        n_unique_blocks=0,
        max_blocks_per_request=0,
        start_time_us=0,
        end_time_us=0,
        type_names=(),
        has_next_access=False,
    )
    bomb = tmp_path / "bomb.lcp.zst"
    _write_zstd(bomb, pack_header(header), bytes(RECORD_BYTES * 100_000), BOMB_BYTES)
    assert bomb.stat().st_size < BOMB_BYTES / MAX_EXPANSION
    started = time.process_time()
    with pytest.raises(InputError, match="decompression bomb") as info:
        for _ in open_trace(bomb):
            pass
    assert time.process_time() - started < 10  # the whole bomb took minutes to parse
    assert "\n" not in str(info.value)
    assert str(bomb) in str(info.value)


def test_a_jsonl_bomb_is_refused(tmp_path: Path) -> None:
    line = b'{"timestamp": 0, "input_length": 512, "output_length": 1, "hash_ids": [1]}\n'
    bomb = tmp_path / "bomb.jsonl.zst"
    _write_zstd(bomb, b"", line * 100_000, 4 * EXPANSION_FLOOR_BYTES)
    with pytest.raises(InputError, match="expands more than"):
        for _ in open_trace(bomb):
            pass


def test_ordinary_compressed_traces_read(tmp_path: Path) -> None:
    """Varied requests (a real trace's shape) compress far below the limit and read whole."""
    lines = b"".join(
        b'{"timestamp": %d, "input_length": %d, "output_length": %d, "hash_ids": [%d]}\n'
        % (i * 37, 512 * (1 + i % 7), 1 + i % 300, i)
        for i in range(150_000)
    )
    path = tmp_path / "trace.jsonl.zst"
    path.write_bytes(zstandard.ZstdCompressor(level=3).compress(lines))
    assert len(lines) > EXPANSION_FLOOR_BYTES
    with open_stream(path) as (stream, compressed):
        assert compressed
        assert stream.read() == lines
