"""``jsonl.fast_line``: the msgspec decoding of a trace line agrees with ``parse_line``, the
reference, on every line it accepts, and declines (None) every line the reference rejects."""

from __future__ import annotations

import pytest

from simulator.workload.jsonl import US_PER_TIME_UNIT, BadLineError, fast_line, parse_line

GOOD = {
    "mooncake": [
        b'{"timestamp": 0, "input_length": 10, "output_length": 2, "hash_ids": [0, 1]}\n',
        b'{"timestamp": 12.5, "input_length": 0, "output_length": 0, "hash_ids": []}',
        b'{"timestamp": 1e3, "input_length": 3, "output_length": 1, "hash_ids": [5], "x": [1]}',
        b'{"hash_ids": [9223372036854775807], "output_length": 1, "input_length": 1, '
        b'"timestamp": 7}',
        b'{"timestamp": 0.1234567, "input_length": 1, "output_length": 1, "hash_ids": [1]}',
        b'{"timestamp": 3, "timestamp": 4, "input_length": 1, "output_length": 1, "hash_ids": [1]}',
    ],
    "qwen": [
        b'{"chat_id": 1, "parent_chat_id": -1, "timestamp": 0.5, "input_length": 4, '
        b'"output_length": 1, "type": "text", "turn": 2, "hash_ids": [1, 2]}',
        b'{"chat_id": 3, "parent_chat_id": 1, "timestamp": 61.114, "input_length": 4, '
        b'"output_length": 1, "hash_ids": [1]}',
        b'{"chat_id": 3, "parent_chat_id": 1, "timestamp": 1, "input_length": 4, '
        b'"output_length": 1, "type": null, "hash_ids": [1]}',
    ],
}

BAD = {
    "mooncake": [
        b'{"timestamp": -1, "input_length": 1, "output_length": 1, "hash_ids": [1]}',
        b'{"timestamp": true, "input_length": 1, "output_length": 1, "hash_ids": [1]}',
        b'{"timestamp": 1e999, "input_length": 1, "output_length": 1, "hash_ids": [1]}',
        b'{"timestamp": NaN, "input_length": 1, "output_length": 1, "hash_ids": [1]}',
        b'{"timestamp": 1e20, "input_length": 1, "output_length": 1, "hash_ids": [1]}',
        b'{"timestamp": 1, "input_length": 1.0, "output_length": 1, "hash_ids": [1]}',
        b'{"timestamp": 1, "input_length": 1, "output_length": -2, "hash_ids": [1]}',
        b'{"timestamp": 1, "input_length": 1, "output_length": 1, "hash_ids": [-1]}',
        b'{"timestamp": 1, "input_length": 1, "output_length": 1, "hash_ids": [true]}',
        b'{"timestamp": 1, "input_length": 1, "output_length": 1, '
        b'"hash_ids": [9223372036854775808]}',
        b'{"timestamp": 1, "input_length": 1, "output_length": 1, "hash_ids": 5}',
        b'{"timestamp": 1, "input_length": 1, "output_length": 1}',
        b"[1, 2]",
        b'{"timestamp": 1, "input_length": 1, ',
        b'{"timestamp": 1, "input_length": 1, "output_length": 1, "hash_ids": [1], "note": "\xff"}',
    ],
    "qwen": [
        b'{"chat_id": -1, "parent_chat_id": -1, "timestamp": 0, "input_length": 4, '
        b'"output_length": 1, "hash_ids": [1]}',
        b'{"chat_id": 1, "parent_chat_id": -2, "timestamp": 0, "input_length": 4, '
        b'"output_length": 1, "hash_ids": [1]}',
        b'{"chat_id": 1, "parent_chat_id": -1, "timestamp": 0, "input_length": 4, '
        b'"output_length": 1, "turn": null, "hash_ids": [1]}',
        b'{"chat_id": 1, "parent_chat_id": -1, "timestamp": 0, "input_length": 4, '
        b'"output_length": 1, "type": 3, "hash_ids": [1]}',
        b'{"parent_chat_id": -1, "timestamp": 0, "input_length": 4, '
        b'"output_length": 1, "hash_ids": [1]}',
    ],
}


@pytest.mark.parametrize(("schema", "line"), [(s, x) for s, xs in GOOD.items() for x in xs])
def test_fast_line_equals_the_reference(schema: str, line: bytes) -> None:
    us = US_PER_TIME_UNIT[schema]
    fast = fast_line(line, schema, us)  # type: ignore[arg-type]
    assert fast is not None
    assert fast == parse_line(line, schema, us)  # type: ignore[arg-type]
    assert type(fast.arrival_us) is int


@pytest.mark.parametrize(("schema", "line"), [(s, x) for s, xs in BAD.items() for x in xs])
def test_fast_line_declines_what_the_reference_rejects(schema: str, line: bytes) -> None:
    us = US_PER_TIME_UNIT[schema]
    assert fast_line(line, schema, us) is None  # type: ignore[arg-type]
    with pytest.raises(BadLineError):
        parse_line(line, schema, us)  # type: ignore[arg-type]
