"""Vectorised JSONL reading: a Mooncake or Qwen trace as ``BlockChunk``s of prefix-interned ids.

The same requests, ids, statistics and errors as ``jsonl.iter_jsonl`` with ``PrefixInterner``
(``tests/workload/test_jsonl_chunks.py`` holds them equal), at a fraction of the cost:

1. the file is read in pieces of about ``chunk_bytes`` that end at a line break;
2. each line is decoded by a typed ``msgspec`` decoder that validates every field the Python
   reader checks in the same pass (types, ranges, required keys) and keeps ``hash_ids`` as its
   raw JSON text; ``intern.parse_id_lists`` then reads all ids of the piece into one array in
   compiled code, and ``intern.ArrayInterner`` interns them exactly (no Python int per block);
3. a piece in which anything is unusual (a decode or validation failure, a blank-looking line,
   non-ASCII bytes that are not UTF-8, a hash id the fast parser does not take as is, a
   timestamp past the lcp range) is read again line by line with ``jsonl.parse_line``, the
   Python reference, which either accepts the line or names it: so bad input gets the same
   one-line ``InputError`` naming file, line and field, and ``skip_bad_lines`` skips exactly
   the same lines.

What the fast path accepts is a subset of what ``parse_line`` accepts, decoded to the same
values, which is what keeps the two readers equal. Memory: one piece at a time plus the
interning table (about 48 bytes per distinct block). Block ids are always prefix-interned;
``--block-id raw`` is read by ``iter_jsonl``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import chain
from pathlib import Path
from typing import Annotated, Any

import msgspec
import numpy as np
from numpy.typing import NDArray

from simulator.workload._io import open_stream
from simulator.workload.chunks import BlockChunk, observe_chunk
from simulator.workload.intern import ArrayInterner, parse_id_lists
from simulator.workload.jsonl import (
    MAX_ARRIVAL_US,
    QWEN_FIELDS,
    US_PER_TIME_UNIT,
    BadLineError,
    Record,
    parse_line,
    session_of,
)
from simulator.workload.request import TURN_BITS, TURN_CAP
from simulator.workload.traceinfo import ReadStats, TraceSchema
from slo.inputfile import InputError

__all__ = ["CHUNK_BYTES", "iter_jsonl_chunks"]

#: Bytes of JSONL per piece (about a million block ids of a Mooncake trace).
CHUNK_BYTES = 8 << 20

_NonNegative = Annotated[int, msgspec.Meta(ge=0)]


class _Mooncake(msgspec.Struct):
    """A Mooncake line as ``jsonl.parse_line`` validates it (extra keys are ignored)."""

    timestamp: _NonNegative | Annotated[float, msgspec.Meta(ge=0)]
    input_length: _NonNegative
    output_length: _NonNegative
    hash_ids: msgspec.Raw


#: A Qwen-Bailian line: the Mooncake fields plus the conversation keys.
_Qwen = msgspec.defstruct("_Qwen", QWEN_FIELDS, bases=(_Mooncake,))


_DECODERS: dict[str, msgspec.json.Decoder[Any]] = {
    "mooncake": msgspec.json.Decoder(_Mooncake),
    "qwen": msgspec.json.Decoder(_Qwen),
}


@dataclass(frozen=True, slots=True, eq=False)
class _Piece:
    """The requests of one piece: raw hash ids back to back, arrivals, type names and turns
    (capped as ``TraceRequest.category`` caps them), chat and parent chat ids (the last four
    empty for a Mooncake piece)."""

    raw: NDArray[np.int64]
    offsets: NDArray[np.int64]
    arrival_us: NDArray[np.int64]
    type_names: Sequence[str | None]
    turns: Sequence[int]
    chats: Sequence[int] = ()
    parents: Sequence[int] = ()


def iter_jsonl_chunks(
    path: Path,
    schema: TraceSchema,
    stats: ReadStats,
    type_table: dict[str, int],
    *,
    skip_bad_lines: bool,
    chunk_bytes: int = CHUNK_BYTES,
) -> Iterator[BlockChunk]:
    """Stream the trace as chunks of prefix-interned ids, in file order.

    Contract as ``jsonl.iter_jsonl`` with a fresh ``PrefixInterner``: ``stats`` is updated per
    chunk (``n_unique_blocks`` and ``complete`` at the end), ``type_table`` grows in first-seen
    order, a bad line raises ``InputError("file:line: what")`` or, with ``skip_bad_lines``, is
    counted in ``stats.n_bad_lines`` and consumes no request index.
    """
    interner = ArrayInterner()
    chains: dict[int, int] = {}  # chat id -> session (Qwen), as ``iter_jsonl`` keeps it
    for first_line, text in _pieces(path, chunk_bytes):
        lines = _lines(text)
        piece = _decode_fast(text, lines, schema) or _decode_slow(
            lines,
            last_has_break=text.endswith(b"\n"),
            first_line=first_line,
            path=path,
            schema=schema,
            stats=stats,
            skip_bad_lines=skip_bad_lines,
        )
        first_index = stats.n_requests
        observe_chunk(stats, piece.arrival_us, np.diff(piece.offsets))
        categories = _categories(piece, type_table)
        if len(piece.offsets) > 1:
            ids = interner.map(piece.raw, piece.offsets)
            times = piece.arrival_us / 1e6  # as iter_jsonl's ``arrival_us / 1e6``, per request
            sessions = _sessions(piece, chains)
            yield BlockChunk(
                ids, piece.offsets, first_index, interner.n_unique, times, categories, sessions
            )
    stats.n_unique_blocks = interner.n_unique
    stats.complete = True


def _categories(piece: _Piece, type_table: dict[str, int]) -> NDArray[np.int64]:
    """``TraceRequest.category`` per request of ``piece``; ``type_table`` grows in first-seen
    order, as ``iter_jsonl``'s does."""
    n = len(piece.offsets) - 1
    if not piece.type_names and not piece.turns:
        return np.zeros(n, dtype=np.int64)
    type_ids = [
        0 if name is None else type_table.setdefault(name, len(type_table) + 1)
        for name in piece.type_names
    ]
    types = np.fromiter(type_ids, dtype=np.int64, count=n)
    return (types << TURN_BITS) | np.fromiter(piece.turns, dtype=np.int64, count=n)


def _sessions(piece: _Piece, chains: dict[int, int]) -> NDArray[np.int64]:
    """``TraceRequest.session_id`` per request of ``piece`` (-1 throughout a Mooncake piece);
    ``chains`` (chat id -> session) learns the piece's chats, as ``iter_jsonl``'s does."""
    n = len(piece.offsets) - 1
    if not piece.chats:
        return np.full(n, -1, dtype=np.int64)
    pairs = zip(piece.chats, piece.parents, strict=True)
    return np.fromiter((session_of(c, p, chains) for c, p in pairs), dtype=np.int64, count=n)


def _pieces(path: Path, chunk_bytes: int) -> Iterator[tuple[int, bytes]]:
    """``(number of its first line, text)`` per piece: whole lines, each ending in ``\n``
    except perhaps the file's last one."""
    first_line = 1
    with open_stream(path) as (stream, _):
        carry = b""
        while True:
            data = stream.read(chunk_bytes)
            text = carry + data
            cut = len(text) if not data else text.rfind(b"\n") + 1
            carry = text[cut:]
            if cut:
                yield first_line, text[:cut]
                first_line += text.count(b"\n", 0, cut) + (not text.endswith(b"\n", 0, cut))
            if not data:
                return


def _lines(text: bytes) -> list[bytes]:
    """The lines of a piece without their ``\n`` (split at ``\n`` only, as the stream is)."""
    lines = text.split(b"\n")
    if text.endswith(b"\n"):
        lines.pop()
    return lines


def _decode_fast(text: bytes, lines: list[bytes], schema: TraceSchema) -> _Piece | None:
    """The piece through msgspec and the compiled id parser, or ``None`` if anything in it
    needs the Python reference (module docstring, step 3)."""
    if not text.isascii():
        try:
            text.decode("utf-8")
        except UnicodeDecodeError:
            return None
    decode = _DECODERS[schema].decode
    try:
        records = [decode(line) for line in lines if line]
    except msgspec.DecodeError:
        return None
    raws = [r.hash_ids for r in records]
    ends = np.cumsum(np.fromiter(map(len, raws), dtype=np.int64, count=len(raws)))
    joined = b"".join(raws)
    out = np.empty(len(joined) // 2 + len(raws), dtype=np.int64)
    offsets = np.zeros(len(raws) + 1, dtype=np.int64)
    if parse_id_lists(np.frombuffer(joined, dtype=np.uint8), ends, out, offsets) >= 0:
        return None
    us_per_unit = US_PER_TIME_UNIT[schema]
    arrival = [round(r.timestamp * us_per_unit) for r in records]
    if arrival and max(arrival) > MAX_ARRIVAL_US:
        return None
    qwen = schema == "qwen"
    types = [r.type for r in records] if qwen else ()
    turns = [min(r.turn, TURN_CAP) for r in records] if qwen else ()
    chats = [r.chat_id for r in records] if qwen else ()
    parents = [r.parent_chat_id for r in records] if qwen else ()
    arrival_us = np.array(arrival, dtype=np.int64)
    return _Piece(out[: offsets[-1]], offsets, arrival_us, types, turns, chats, parents)


def _decode_slow(
    lines: list[bytes],
    *,
    last_has_break: bool,
    first_line: int,
    path: Path,
    schema: TraceSchema,
    stats: ReadStats,
    skip_bad_lines: bool,
) -> _Piece:
    """The piece line by line through ``jsonl.parse_line`` (the reference), each line with its
    ``\n`` back (JSON error columns count it, as the Python reader sees it)."""
    us_per_unit = US_PER_TIME_UNIT[schema]
    records: list[Record] = []
    last = len(lines) - 1
    for lineno, line in enumerate(lines, first_line):
        if not line.strip():
            continue
        whole = line + b"\n" if lineno - first_line < last or last_has_break else line
        try:
            records.append(parse_line(whole, schema, us_per_unit))
        except BadLineError as bad:
            if not skip_bad_lines:
                raise InputError(f"{path}:{lineno}: {bad}") from None
            stats.n_bad_lines += 1
    lengths = np.fromiter((len(r.hash_ids) for r in records), dtype=np.int64, count=len(records))
    offsets = np.zeros(len(records) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    raw = np.fromiter(
        chain.from_iterable(r.hash_ids for r in records), dtype=np.int64, count=int(offsets[-1])
    )
    arrival = np.fromiter((r.arrival_us for r in records), dtype=np.int64, count=len(records))
    turns = [min(r.turn, TURN_CAP) for r in records]
    qwen = schema == "qwen"
    chats = [r.chat_id for r in records] if qwen else ()
    parents = [r.parent_chat_id for r in records] if qwen else ()
    types = [r.type_name for r in records]
    return _Piece(raw, offsets, arrival, types, turns, chats, parents)
