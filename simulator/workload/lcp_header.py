"""The ``lcp`` file header: constants, the ``LcpHeader`` model, packing and validated reading.

Byte layout and field meanings: docs/lcp.md. Records, the writer and the reader are in
``simulator.workload.lcp``.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from simulator.workload._io import read_exact
from simulator.workload.traceinfo import TraceSchema
from slo.inputfile import InputError

__all__ = [
    "ENTRY_BYTES",
    "FLAG_NEXT_ACCESS",
    "HEADER_BYTES",
    "LCP_SUFFIXES",
    "MAGIC",
    "MAX_TYPES",
    "RECORD_BYTES",
    "VERSION",
    "LcpHeader",
    "corrupt",
    "pack_header",
    "read_header",
]

#: PNG-style signature: a non-ASCII first byte (never the ``{`` of JSONL), CR LF and ^Z catch
#: text-mode mangling. Also the last 8 bytes of the header.
MAGIC = b"\x89LCP\r\n\x1a\n"
#: File names an lcp file is expected to have: plain, or the whole file as one zstd stream.
LCP_SUFFIXES = (".lcp", ".lcp.zst")
VERSION = 2  # 2: session_next is 1-based (docs/lcp.md, "Format versions")
HEADER_BYTES = 8192
RECORD_BYTES = 68  # per-request record (struct layout in ``simulator.workload.lcp``)
ENTRY_BYTES = 16  # per block: block_id u64, next_access_delta i64
MAX_TYPES = 64
TYPE_NAME_BYTES = 32
FLAG_NEXT_ACCESS = 1
BLOCK_ID_KIND_PREFIX = 1
SCHEMA_CODES: dict[str, int] = {"mooncake": 1, "qwen": 2}

_FIXED = struct.Struct("<8sIIIIIBBBBQqqqqqq")  # 88 bytes at offset 0
_TYPE_TABLE_AT = 128
_END_MAGIC_AT = HEADER_BYTES - len(MAGIC)
_SCHEMA_BY_CODE: dict[int, TraceSchema] = {1: "mooncake", 2: "qwen"}


@dataclass(frozen=True, slots=True)
class LcpHeader:
    """Everything the 8192-byte header says; counts are totals over the whole file."""

    schema: TraceSchema
    block_size_tokens: int
    n_requests: int
    n_block_accesses: int
    n_unique_blocks: int
    """Distinct (prefix-interned, dense 1..n) block ids."""
    max_blocks_per_request: int
    start_time_us: int
    end_time_us: int
    type_names: tuple[str, ...]
    has_next_access: bool


def pack_header(header: LcpHeader) -> bytes:
    """The 8192 header bytes. Raises ``ValueError`` for a type table the format cannot hold."""
    if len(header.type_names) > MAX_TYPES:
        raise ValueError(
            f"lcp holds at most {MAX_TYPES} request types, got {len(header.type_names)}"
        )
    out = bytearray(HEADER_BYTES)
    _FIXED.pack_into(
        out,
        0,
        MAGIC,
        VERSION,
        HEADER_BYTES,
        RECORD_BYTES,
        ENTRY_BYTES,
        header.block_size_tokens,
        BLOCK_ID_KIND_PREFIX,
        SCHEMA_CODES[header.schema],
        len(header.type_names),
        0,
        FLAG_NEXT_ACCESS if header.has_next_access else 0,
        header.n_requests,
        header.n_block_accesses,
        header.n_unique_blocks,
        header.max_blocks_per_request,
        header.start_time_us,
        header.end_time_us,
    )
    for k, name in enumerate(header.type_names):
        encoded = name.encode("utf-8")
        if len(encoded) >= TYPE_NAME_BYTES or b"\0" in encoded:
            raise ValueError(
                f"lcp type names are < {TYPE_NAME_BYTES} UTF-8 bytes, no NUL: {name!r}"
            )
        at = _TYPE_TABLE_AT + k * TYPE_NAME_BYTES
        out[at : at + len(encoded)] = encoded
    out[_END_MAGIC_AT:] = MAGIC
    return bytes(out)


def read_header(stream: BinaryIO, path: Path) -> LcpHeader:
    """Read and validate the header from the start of ``stream`` (one-line ``InputError``)."""
    data = read_exact(stream, HEADER_BYTES)
    if len(data) >= len(MAGIC) and data[: len(MAGIC)] != MAGIC:
        raise corrupt(path, 0, "not an lcp file (bad magic)")
    if len(data) < HEADER_BYTES:
        raise corrupt(path, len(data), f"truncated header ({len(data)} of {HEADER_BYTES} bytes)")
    (
        _,
        version,
        header_bytes,
        record_bytes,
        entry_bytes,
        block_size,
        kind,
        schema_code,
        n_types,
        _,
        flags,
        n_requests,
        n_block_accesses,
        n_unique_blocks,
        max_blocks_per_request,
        start_time_us,
        end_time_us,
    ) = _FIXED.unpack_from(data)
    if version != VERSION:
        raise corrupt(
            path,
            8,
            f"lcp version {version} is not supported (this reader: {VERSION};"
            " re-run kvplan convert on the source trace)",
        )
    if data[_END_MAGIC_AT:] != MAGIC:
        raise corrupt(path, _END_MAGIC_AT, "corrupt header: bad end magic")
    for at, got, want in (
        (12, header_bytes, HEADER_BYTES),
        (16, record_bytes, RECORD_BYTES),
        (20, entry_bytes, ENTRY_BYTES),
    ):
        if got != want:
            raise corrupt(path, at, f"corrupt header: size field {got}, expected {want}")
    problems = (
        (24, block_size < 1, f"block size {block_size}"),
        (28, kind != BLOCK_ID_KIND_PREFIX, f"block-id kind {kind} (only 1 = prefix)"),
        (29, schema_code not in _SCHEMA_BY_CODE, f"schema code {schema_code}"),
        (30, n_types > MAX_TYPES, f"{n_types} types (at most {MAX_TYPES})"),
        (32, flags & ~FLAG_NEXT_ACCESS, f"unknown flags {flags:#x}"),
        (
            40,
            min(n_requests, n_block_accesses, n_unique_blocks, max_blocks_per_request) < 0,
            "negative count",
        ),
        (72, start_time_us > end_time_us, "start time after end time"),
    )
    for at, bad, what in problems:
        if bad:
            raise corrupt(path, at, f"corrupt header: {what}")
    return LcpHeader(
        schema=_SCHEMA_BY_CODE[schema_code],
        block_size_tokens=block_size,
        n_requests=n_requests,
        n_block_accesses=n_block_accesses,
        n_unique_blocks=n_unique_blocks,
        max_blocks_per_request=max_blocks_per_request,
        start_time_us=start_time_us,
        end_time_us=end_time_us,
        type_names=_type_names(data, n_types, path),
        has_next_access=bool(flags & FLAG_NEXT_ACCESS),
    )


def _type_names(data: bytes, n_types: int, path: Path) -> tuple[str, ...]:
    names = []
    for k in range(n_types):
        at = _TYPE_TABLE_AT + k * TYPE_NAME_BYTES
        raw = data[at : at + TYPE_NAME_BYTES].rstrip(b"\0")
        try:
            names.append(raw.decode("utf-8"))
        except UnicodeDecodeError:
            raise corrupt(path, at, "corrupt header: type name is not UTF-8") from None
    return tuple(names)


def corrupt(path: Path, offset: int, what: str) -> InputError:
    """The one-line error for a bad lcp file: ``FILE: byte OFFSET: what``."""
    return InputError(f"{path}: byte {offset}: {what}")
