"""Opening trace files as buffered byte streams, transparently decompressing zstd.

Compression is recognised by the zstd frame magic, not the file name, so ``.jsonl.zst`` and
``.lcp.zst`` work as well as a mis-named file. Streams are forward-only (never seek), so a
reader works the same on a file and on a decompression stream.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

import zstandard

from slo.inputfile import InputError

__all__ = ["ZSTD_MAGIC", "open_stream", "read_exact"]

#: First four bytes of a zstd frame (RFC 8878, little-endian 0xFD2FB528).
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"

_BUFFER_BYTES = 1 << 20
_CHUNK_BYTES = 1 << 20  # read_exact reads at most this much at a time (bounded allocation)


@contextmanager
def open_stream(path: Path) -> Iterator[tuple[BinaryIO, bool]]:
    """Context manager: ``(stream, was_zstd_compressed)`` for buffered binary reading of ``path``.

    The stream supports ``read`` and line iteration and is closed on exit. A missing
    or unreadable file, and a corrupt zstd stream met while reading inside the ``with`` block,
    are one-line ``InputError``s.
    """
    try:
        raw = path.open("rb")
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except OSError as err:
        raise InputError(f"{path}: cannot read: {err.strerror or err}") from None
    buffered = io.BufferedReader(raw, _BUFFER_BYTES)
    stream: BinaryIO = buffered
    try:
        compressed = buffered.peek(4)[:4] == ZSTD_MAGIC
        if compressed:
            reader = zstandard.ZstdDecompressor().stream_reader(stream, closefd=True)
            stream = io.BufferedReader(reader, _BUFFER_BYTES)
        yield stream, compressed
    except zstandard.ZstdError as err:
        raise InputError(f"{path}: corrupt zstd stream: {err}") from None
    finally:
        stream.close()


def read_exact(stream: BinaryIO, n_bytes: int) -> bytes:
    """Read exactly ``n_bytes`` unless the stream ends first (then return what there was).

    Reads in bounded chunks, so a corrupt size field cannot make it allocate more memory than
    the stream actually holds.
    """
    data = stream.read(min(n_bytes, _CHUNK_BYTES))
    if len(data) == n_bytes or not data:
        return data
    parts = [data]
    got = len(data)
    while got < n_bytes:
        chunk = stream.read(min(n_bytes - got, _CHUNK_BYTES))
        if not chunk:
            break
        parts.append(chunk)
        got += len(chunk)
    return b"".join(parts)
