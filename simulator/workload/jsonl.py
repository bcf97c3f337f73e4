"""Mooncake and Qwen-Bailian JSONL traces: schema sniffing, per-line validation, streaming.

Schemas (one JSON object per line; unknown extra keys are ignored):

- ``mooncake`` (kvcache-ai/Mooncake, FAST'25): ``timestamp`` (milliseconds), ``input_length``,
  ``output_length``, ``hash_ids`` (one id per 512-token block). No sessions, types or turns.
- ``qwen`` (Qwen-Bailian, ATC'25): ``chat_id``, ``parent_chat_id`` (-1 for a first turn),
  ``timestamp`` (seconds, float), ``input_length``, ``output_length``, ``hash_ids`` (16-token
  blocks), and optionally ``type`` (a string) and ``turn``.

Timestamps are quantised to whole microseconds (the lcp resolution), so a trace read from JSONL
and from its lcp conversion yields bit-identical floats. The only state that grows with the
trace is the block-id mapper's table, the type table and (Qwen) the ``chat_id -> session``
map; lines are parsed one at a time.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any, NamedTuple

import msgspec

from simulator.workload._io import open_stream
from simulator.workload.blockids import BlockIdMapper, RawIds
from simulator.workload.request import TraceRequest
from simulator.workload.traceinfo import ReadStats, TraceSchema
from slo.inputfile import InputError

__all__ = [
    "MAX_ARRIVAL_US",
    "QWEN_FIELDS",
    "US_PER_TIME_UNIT",
    "BadLineError",
    "Record",
    "fast_line",
    "iter_jsonl",
    "parse_line",
    "session_of",
    "sniff_schema",
]

US_PER_TIME_UNIT: dict[str, int] = {"mooncake": 1_000, "qwen": 1_000_000}
_MAX_ID = 2**63 - 1  # ids must fit the signed 64-bit arrays of the future annotation
#: Latest arrival, microseconds: lcp records store it as a signed 64-bit integer (2^62 leaves
#: room for time scaling; it is about 146,000 years).
MAX_ARRIVAL_US = 2**62


class BadLineError(Exception):
    """One line is unusable; the message says what was expected (no file or line number)."""


class Record(NamedTuple):
    """One validated line; ``arrival_us`` in whole microseconds."""

    arrival_us: int
    input_length: int
    output_length: int
    hash_ids: list[int]
    chat_id: int
    parent_chat_id: int
    type_name: str | None
    turn: int


def session_of(chat_id: int, parent_chat_id: int, chains: dict[int, int]) -> int:
    """The session of a Qwen request: the root chat of its parent chain (its own id without
    a parent). ``chains`` maps every chat id seen so far to its session, in file order, and
    learns ``chat_id``; a parent outside the trace window starts the chain we can see."""
    session = chat_id if parent_chat_id < 0 else chains.get(parent_chat_id, parent_chat_id)
    chains[chat_id] = session
    return session


def sniff_schema(path: Path, *, skip_bad_lines: bool) -> TraceSchema:
    """Schema of a JSONL trace from its first record: ``qwen`` if it has ``chat_id``.

    Raises ``InputError`` if the first non-blank line is not a JSON object (unless
    ``skip_bad_lines``, then the first line that is) or the file holds no record at all.
    """
    with open_stream(path) as (stream, _):
        for lineno, line in enumerate(stream, 1):
            if not line.strip():
                continue
            try:
                record = _load_object(line)
            except BadLineError as bad:
                if skip_bad_lines:
                    continue
                raise InputError(f"{path}:{lineno}: {bad}") from None
            return "qwen" if "chat_id" in record else "mooncake"
    raise InputError(f"{path}: no trace records (empty file or only bad lines)")


def iter_jsonl(
    path: Path,
    schema: TraceSchema,
    mapper: BlockIdMapper,
    stats: ReadStats,
    type_table: dict[str, int],
    *,
    skip_bad_lines: bool,
) -> Iterator[TraceRequest]:
    """Stream the requests of a JSONL trace in file order, mapping block ids with ``mapper``.

    ``stats`` is updated as requests are yielded (``complete`` is set at the end);
    ``type_table`` (name -> 1-based id) grows in first-seen order. A bad line raises
    ``InputError("file:line: what")`` or, with ``skip_bad_lines``, is counted in
    ``stats.n_bad_lines`` and consumes no request index.
    """
    us_per_unit = US_PER_TIME_UNIT[schema]
    sessions: dict[int, int] = {}  # chat_id -> root chat_id of its chain (Qwen)
    with open_stream(path) as (stream, _):
        for lineno, line in enumerate(stream, 1):
            if not line.strip():
                continue
            try:
                rec = fast_line(line, schema, us_per_unit) or parse_line(line, schema, us_per_unit)
            except BadLineError as bad:
                if not skip_bad_lines:
                    raise InputError(f"{path}:{lineno}: {bad}") from None
                stats.n_bad_lines += 1
                continue
            session = -1
            if schema == "qwen":
                session = session_of(rec.chat_id, rec.parent_chat_id, sessions)
            type_id = 0
            if rec.type_name is not None:
                type_id = type_table.setdefault(rec.type_name, len(type_table) + 1)
            block_ids = mapper.map(rec.hash_ids)
            stats.observe(rec.arrival_us, len(block_ids))
            yield TraceRequest(
                stats.n_requests - 1,
                rec.arrival_us / 1e6,
                rec.input_length,
                rec.output_length,
                block_ids,
                rec.chat_id,
                rec.parent_chat_id,
                session,
                rec.turn,
                type_id,
            )
    stats.n_unique_blocks = mapper.n_unique
    if isinstance(mapper, RawIds):
        stats.raw_ids = mapper.report()
    stats.complete = True


def _load_object(line: bytes) -> dict[str, Any]:
    try:
        record = json.loads(line)
    except UnicodeDecodeError:
        raise BadLineError("not UTF-8 text") from None
    except json.JSONDecodeError as err:
        raise BadLineError(f"malformed JSON ({err.msg} at column {err.colno})") from None
    if not isinstance(record, dict):
        raise BadLineError(f"expected a JSON object, got {type(record).__name__}")
    return record


def parse_line(line: bytes, schema: TraceSchema, us_per_unit: int) -> Record:
    """Decode and validate one non-blank line (the reference both JSONL readers apply);
    ``BadLineError`` says what is wrong, without file or line."""
    record = _load_object(line)
    timestamp = _field(record, "timestamp")
    if type(timestamp) not in (int, float) or not math.isfinite(timestamp) or timestamp < 0:
        raise BadLineError(f"timestamp must be a non-negative number, got {timestamp!r}")
    if timestamp * us_per_unit > MAX_ARRIVAL_US:
        unit = "ms" if us_per_unit == 1_000 else "s"
        limit = MAX_ARRIVAL_US / us_per_unit
        raise BadLineError(f"timestamp {timestamp!r} {unit} is beyond the supported {limit:.3g}")
    hash_ids = _field(record, "hash_ids")
    if type(hash_ids) is not list:
        raise BadLineError(f"hash_ids must be a list of non-negative integers, got {hash_ids!r}")
    # C-level checks first; the slow scan runs only to name the culprit
    if hash_ids and (
        not set(map(type, hash_ids)) <= {int} or min(hash_ids) < 0 or max(hash_ids) > _MAX_ID
    ):
        pos, bad = next((i, h) for i, h in enumerate(hash_ids) if not _is_id(h))
        raise BadLineError(f"hash_ids[{pos}] must be an integer in [0, 2^63), got {bad!r}")
    chat_id = parent_chat_id = -1
    turn = 0
    type_name: str | None = None
    if schema == "qwen":
        chat_id = _int(record, "chat_id", minimum=0)
        parent_chat_id = _int(record, "parent_chat_id", minimum=-1)
        turn = _int(record, "turn", minimum=0) if "turn" in record else 0
        type_name = record.get("type")
        if type_name is not None and type(type_name) is not str:
            raise BadLineError(f"type must be a string, got {type_name!r}")
    return Record(
        round(timestamp * us_per_unit),
        _int(record, "input_length", minimum=0),
        _int(record, "output_length", minimum=0),
        hash_ids,
        chat_id,
        parent_chat_id,
        type_name,
        turn,
    )


_NonNegative = Annotated[int, msgspec.Meta(ge=0)]


class _MooncakeLine(msgspec.Struct):
    """A Mooncake line as ``parse_line`` validates it (extra keys are ignored)."""

    timestamp: _NonNegative | Annotated[float, msgspec.Meta(ge=0)]
    input_length: _NonNegative
    output_length: _NonNegative
    hash_ids: list[Annotated[int, msgspec.Meta(ge=0, le=_MAX_ID)]]


#: The conversation keys a Qwen-Bailian line adds to the Mooncake fields, as msgspec
#: ``defstruct`` fields (shared with ``jsonl_chunks``, whose Mooncake struct keeps hash ids raw).
QWEN_FIELDS: list[tuple[str, Any] | tuple[str, Any, Any]] = [
    ("chat_id", _NonNegative),
    ("parent_chat_id", Annotated[int, msgspec.Meta(ge=-1)]),
    ("turn", _NonNegative, 0),
    ("type", str | None, None),
]

#: A Qwen-Bailian line: the Mooncake fields plus the conversation keys.
_QwenLine = msgspec.defstruct("_QwenLine", QWEN_FIELDS, bases=(_MooncakeLine,))


_LINE_DECODERS: dict[str, msgspec.json.Decoder[Any]] = {
    "mooncake": msgspec.json.Decoder(_MooncakeLine),
    "qwen": msgspec.json.Decoder(_QwenLine),
}


def fast_line(line: bytes, schema: TraceSchema, us_per_unit: int) -> Record | None:
    """``parse_line(line, ...)`` through a typed msgspec decoder (about 4x cheaper), or None
    when the line needs the reference: any decode or validation failure, non-ASCII bytes
    (the reference rejects bad UTF-8 anywhere in the line) or a timestamp past the lcp
    range. What it accepts, ``parse_line`` accepts with the same values, so a None costs
    only time and the reference names every bad line."""
    if not line.isascii():
        return None
    try:
        rec = _LINE_DECODERS[schema].decode(line)
    except msgspec.DecodeError:
        return None
    if rec.timestamp * us_per_unit > MAX_ARRIVAL_US:
        return None
    if schema == "qwen":
        return Record(
            round(rec.timestamp * us_per_unit),
            rec.input_length,
            rec.output_length,
            rec.hash_ids,
            rec.chat_id,
            rec.parent_chat_id,
            rec.type,
            rec.turn,
        )
    return Record(
        round(rec.timestamp * us_per_unit),
        rec.input_length,
        rec.output_length,
        rec.hash_ids,
        -1,
        -1,
        None,
        0,
    )


def _is_id(value: object) -> bool:
    return type(value) is int and 0 <= value <= _MAX_ID


def _field(record: dict[str, Any], key: str) -> Any:
    try:
        return record[key]
    except KeyError:
        raise BadLineError(f"missing field {key!r}") from None


def _int(record: dict[str, Any], key: str, *, minimum: int) -> int:
    value = _field(record, key)
    if type(value) is not int or value < minimum:
        raise BadLineError(f"{key} must be an integer ≥ {minimum}, got {value!r}")
    return value
