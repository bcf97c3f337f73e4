"""The vectorised JSONL reader against the Python one: same ids, statistics, types and errors.

``ChunkPass`` over a JSONL file must give exactly what ``open_trace(path).requests()`` gives
with ``--block-id prefix``: the interned ids (request by request), every ``ReadStats`` field,
the type table, and for a bad line the same one-line ``InputError`` (file, line, field), or
the same skipped-line count with ``skip_bad_lines``. Small pieces (``chunk_bytes``) put piece
boundaries everywhere.
"""

from __future__ import annotations

import json
from itertools import pairwise
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.workload import PrefixInterner, ReadStats, open_trace
from simulator.workload.chunk_reader import ChunkPass, chunk_reason
from simulator.workload.chunks import BlockChunk
from simulator.workload.intern import ArrayInterner, parse_id_lists
from simulator.workload.jsonl_chunks import iter_jsonl_chunks
from slo.inputfile import InputError

GOOD = '{"timestamp": 5, "input_length": 5, "output_length": 1, "hash_ids": [7, 8]}'
QWEN = '{"chat_id": 1, "parent_chat_id": -1, "timestamp": 0.5, "input_length": 5,'


#: Per request: its block ids, ``timestamp_s``, ``category`` and ``session_id`` (the context
#: the chunks carry).
Rows = list[tuple[tuple[int, ...], float, int, int]]


def _python(path: Path, skip_bad_lines: bool = False) -> tuple[Rows, Any]:
    reader = open_trace(path, skip_bad_lines=skip_bad_lines)
    rows = [(r.block_ids, r.timestamp_s, r.category, r.session_id) for r in reader.requests()]
    return rows, (reader.stats, reader.info.type_names)


def _chunked(path: Path, chunk_bytes: int, skip_bad_lines: bool = False) -> tuple[Rows, Any]:
    reader = open_trace(path, skip_bad_lines=skip_bad_lines)
    stats = ReadStats()
    types: dict[str, int] = {}
    ids: Rows = []
    for chunk in iter_jsonl_chunks(
        path,
        reader.info.schema,
        stats,
        types,
        skip_bad_lines=skip_bad_lines,
        chunk_bytes=chunk_bytes,
    ):
        assert chunk.first_index == len(ids)
        assert chunk.max_id == max(chunk.max_id, int(chunk.blocks.max(initial=0)))
        ids += chunk_rows(chunk)
    return ids, (stats, tuple(types))


def chunk_rows(chunk: BlockChunk) -> Rows:
    """Per request of ``chunk``: its blocks, timestamp, category and session (all carried)."""
    assert chunk.timestamps is not None
    assert chunk.categories is not None
    assert chunk.sessions is not None
    return list(
        zip(
            [tuple(chunk.blocks[a:b].tolist()) for a, b in pairwise(chunk.offsets.tolist())],
            chunk.timestamps.tolist(),
            chunk.categories.tolist(),
            chunk.sessions.tolist(),
            strict=True,
        )
    )


def _write(tmp_path: Path, lines: list[str], newline: str = "\n", last: bool = True) -> Path:
    path = tmp_path / "trace.jsonl"
    path.write_bytes((newline.join(lines) + (newline if last else "")).encode())
    return path


@st.composite
def _lines(draw: st.DrawFn) -> list[str]:
    """JSONL lines as traces write them, with the variations a reader meets: key order, extra
    keys, spacing, blank lines, repeated and large ids, "-0" (an integer to Python's json)."""
    qwen = draw(st.booleans())
    out = []
    for i in range(draw(st.integers(1, 25))):
        ids = draw(st.lists(st.integers(0, 6) | st.sampled_from([2**63 - 1, 10**18]), max_size=8))
        record: dict[str, Any] = {
            "hash_ids": ids,
            "output_length": draw(st.integers(0, 9)),
            "input_length": draw(st.integers(0, 2**40)),
            "timestamp": draw(st.integers(0, 10**6) | st.floats(0, 1e6)),
        }
        if qwen:
            record.update(chat_id=i, parent_chat_id=draw(st.integers(-1, i)))
            if draw(st.booleans()):
                record["type"] = draw(st.sampled_from(["text", "ünï", None]))
            if draw(st.booleans()):
                record["turn"] = draw(st.integers(0, 3) | st.just(70_000))  # capped at 0xFFFF
        if draw(st.booleans()):
            record["extra"] = {"nested": [1.5, "x"]}
        line = json.dumps(record, separators=draw(st.sampled_from([(",", ":"), (", ", ": ")])))
        if draw(st.integers(0, 9)) == 0:
            line = line.replace("[0", "[-0", 1)
        out.append(line)
        if draw(st.integers(0, 9)) == 0:
            out.append(draw(st.sampled_from(["", "   ", "\t"])))
    return out


@settings(max_examples=80, deadline=None)
@given(lines=_lines(), chunk_bytes=st.integers(1, 400), crlf=st.booleans(), last=st.booleans())
def test_same_ids_stats_and_types_as_the_python_reader(
    tmp_path_factory: pytest.TempPathFactory,
    lines: list[str],
    chunk_bytes: int,
    crlf: bool,
    last: bool,
) -> None:
    path = _write(tmp_path_factory.mktemp("t"), lines, "\r\n" if crlf else "\n", last)
    assert _chunked(path, chunk_bytes) == _python(path)


BAD_LINES = [
    '{"timestamp": 0, "input_length": 5',
    "[1, 2]",
    '{"timestamp": 0, "input_length": 5, "output_length": 1}',
    '{"timestamp": 0, "input_length": -5, "output_length": 1, "hash_ids": []}',
    '{"timestamp": 0, "input_length": 5, "output_length": 1.0, "hash_ids": []}',
    '{"timestamp": 0, "input_length": 5, "output_length": 1, "hash_ids": [0, 1.5]}',
    '{"timestamp": 0, "input_length": 5, "output_length": 1, "hash_ids": ["3"]}',
    '{"timestamp": 0, "input_length": 5, "output_length": 1, "hash_ids": [true]}',
    '{"timestamp": 0, "input_length": 5, "output_length": 1, "hash_ids": [-1]}',
    '{"timestamp": 0, "input_length": 5, "output_length": 1, "hash_ids": [9223372036854775808]}',
    '{"timestamp": 0, "input_length": 5, "output_length": 1, "hash_ids": [[1]]}',
    '{"timestamp": 0, "input_length": 5, "output_length": 1, "hash_ids": 7}',
    '{"timestamp": "0", "input_length": 5, "output_length": 1, "hash_ids": []}',
    '{"timestamp": NaN, "input_length": 5, "output_length": 1, "hash_ids": []}',
    '{"timestamp": 1e16, "input_length": 5, "output_length": 1, "hash_ids": []}',
    '{"timestamp": 4611686018427388, "input_length": 5, "output_length": 1, "hash_ids": []}',
    f"{GOOD} {GOOD}",  # two objects on one line
    '{"timestamp": 0, "input_length": 5, "output_length": 1, "hash_ids": [], "x": "\xff"}',
    '{"timestamp": 0, "input_length": true, "output_length": 1, "hash_ids": []}',
]
#: Lines the Python reader accepts although the fast path does not take them as they are.
ODD_BUT_GOOD = [
    '{"timestamp": 0, "input_length": 5, "output_length": 1, "hash_ids": [-0, 1]}',
    '{"timestamp": 0, "input_length": 123456789012345678901234567890, "output_length": 1,'
    ' "hash_ids": [1]}',
    '{"timestamp": 0, "input_length": 5, "output_length": 1, "hash_ids": [1], "x": NaN}',
    '{"timestamp": 0, "input_length": 5, "output_length": 1, "hash_ids": [1], "x": "ü"}',
    '\ufeff{"timestamp": 0, "input_length": 5, "output_length": 1, "hash_ids": [1]}',
    '{"timestamp": 4611686018427387, "input_length": 5, "output_length": 1, "hash_ids": [2]}',
]


def _raw_write(tmp_path: Path, lines: list[str]) -> Path:
    path = tmp_path / "trace.jsonl"
    # "\xff" in a line stands for one invalid UTF-8 byte
    path.write_bytes(b"".join(line.encode("utf-8", "surrogateescape") + b"\n" for line in lines))
    data = path.read_bytes().replace("\xff".encode(), b"\xff")
    path.write_bytes(data)
    return path


@pytest.mark.parametrize("line", BAD_LINES)
@pytest.mark.parametrize("chunk_bytes", [64, 1 << 20])
def test_a_bad_line_gets_the_python_readers_error(
    tmp_path: Path, line: str, chunk_bytes: int
) -> None:
    path = _raw_write(tmp_path, [GOOD] * 3 + ["", line, GOOD])
    with pytest.raises(InputError) as expected:
        _python(path)
    assert str(expected.value).startswith(f"{path}:5: ")
    with pytest.raises(InputError) as got:
        _chunked(path, chunk_bytes)
    assert str(got.value) == str(expected.value)
    assert _chunked(path, chunk_bytes, skip_bad_lines=True) == _python(path, skip_bad_lines=True)


@pytest.mark.parametrize("line", ODD_BUT_GOOD)
def test_lines_the_fast_path_refuses_are_still_read(tmp_path: Path, line: str) -> None:
    path = _raw_write(tmp_path, [GOOD, line, GOOD])
    expected = _python(path)
    assert len(expected[0]) == 3
    assert _chunked(path, 1 << 20) == expected


def test_qwen_types_in_first_seen_order(tmp_path: Path) -> None:
    lines = [
        QWEN + ' "output_length": 1, "hash_ids": [1], "type": "b"}',
        QWEN + ' "output_length": 1, "hash_ids": [1, 2], "type": null}',
        QWEN + ' "output_length": 1, "hash_ids": [3], "type": "a", "turn": 2}',
        QWEN + ' "output_length": 1, "hash_ids": [], "type": "b"}',
    ]
    path = _write(tmp_path, lines)
    ids, (stats, types) = _chunked(path, 50)
    assert (ids, (stats, types)) == _python(path)
    assert [row[0] for row in ids] == [(1,), (1, 2), (3,), ()]
    assert [row[2] for row in ids] == [1 << 16, 0, (2 << 16) | 2, 1 << 16]
    assert types == ("b", "a")


def test_chunk_pass_is_what_the_cli_reads(tmp_path: Path) -> None:
    path = _write(tmp_path, [GOOD, GOOD.replace("[7, 8]", "[7, 9]")])
    chunks = ChunkPass(open_trace(path), skip_bad_lines=False)
    blocks = np.concatenate([c.blocks for c in chunks])
    assert blocks.tolist() == [1, 2, 1, 3]
    assert chunks.stats.complete
    assert chunks.stats.n_unique_blocks == 3
    raw = open_trace(path, block_id="raw")
    assert chunk_reason(raw) is not None
    with pytest.raises(ValueError, match="cannot be read in chunks"):
        ChunkPass(raw, skip_bad_lines=False)


@settings(max_examples=150, deadline=None)
@given(
    paths=st.lists(
        st.lists(st.integers(0, 5) | st.integers(0, 2**63 - 1), max_size=12), max_size=60
    ),
    split=st.integers(1, 60),
)
def test_array_interner_gives_prefix_interner_ids(paths: list[list[int]], split: int) -> None:
    reference = PrefixInterner()
    expected = [reference.map(p) for p in paths]
    interner = ArrayInterner()
    got: list[tuple[int, ...]] = []
    for start in range(0, len(paths), split):
        part = paths[start : start + split]
        offsets = np.cumsum([0] + [len(p) for p in part])
        flat = np.array([x for p in part for x in p], dtype=np.int64)
        ids = interner.map(flat, offsets).tolist()
        got += [tuple(ids[a:b]) for a, b in pairwise(offsets)]
    assert got == expected
    assert interner.n_unique == reference.n_unique


def test_array_interner_grows_its_table() -> None:
    interner = ArrayInterner()
    raw = np.arange(50_000, dtype=np.int64) % 7919  # one long path, then its reversal
    ids = interner.map(np.concatenate([raw, raw[::-1]]), np.array([0, 50_000, 100_000]))
    reference = PrefixInterner()
    assert ids.tolist() == [*reference.map(raw.tolist()), *reference.map(raw[::-1].tolist())]


@pytest.mark.parametrize(
    ("text", "ids"),
    [
        ("[]", []),
        (" [ 1 , 22,333 ] ", [1, 22, 333]),
        ("[9223372036854775807]", [2**63 - 1]),
        ("[0,\n\t0]", [0, 0]),
        ("[9223372036854775808]", None),
        ("[12345678901234567890]", None),
        ("[-1]", None),
        ("[-0]", None),
        ("[1.0]", None),
        ("[1e3]", None),
        ('["1"]', None),
        ("[[1]]", None),
        ("[1,]", None),
        ("[1 2]", None),
        ("null", None),
        ("[1] 2", None),
    ],
)
def test_parse_id_lists_takes_only_plain_integer_lists(text: str, ids: list[int] | None) -> None:
    data = ("[5]" + text).encode()
    out = np.zeros(64, dtype=np.int64)
    offsets = np.zeros(3, dtype=np.int64)
    refused = parse_id_lists(
        np.frombuffer(data, dtype=np.uint8), np.array([3, len(data)]), out, offsets
    )
    if ids is None:
        assert refused == 1
    else:
        assert refused == -1
        assert out[: offsets[2]].tolist() == [5, *ids]
        assert offsets.tolist() == [0, 1, 1 + len(ids)]
