"""Opening trace files as buffered byte streams, transparently decompressing zstd.

Compression is recognised by the zstd frame magic, not the file name, so ``.jsonl.zst`` and
``.lcp.zst`` work as well as a mis-named file. Streams are forward-only (never seek), so a
reader works the same on a file and on a decompression stream.

Decompression bombs are refused: a stream that has expanded more than ``MAX_EXPANSION`` times
the compressed bytes read so far, once past ``EXPANSION_FLOOR_BYTES``, is a one-line
``InputError`` (a 300 MB file of zero-filled records compresses about 30,000:1; real traces,
lcp or JSONL, compress at most a few tens to one).
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO, cast

import zstandard

from slo.inputfile import InputError

__all__ = ["EXPANSION_FLOOR_BYTES", "MAX_EXPANSION", "ZSTD_MAGIC", "open_stream", "read_exact"]

#: First four bytes of a zstd frame (RFC 8878, little-endian 0xFD2FB528).
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
#: Most decompressed bytes per compressed byte a trace may have (module docstring).
MAX_EXPANSION = 1000
#: Decompressed bytes before the expansion is judged (frame headers expand small inputs).
EXPANSION_FLOOR_BYTES = 8 << 20


class _Counted(io.RawIOBase):
    """A binary stream that counts the bytes read from it."""

    def __init__(self, inner: BinaryIO) -> None:
        self.inner = inner
        self.n_read = 0

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        data = self.inner.read(size)
        self.n_read += len(data)
        return data

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)

    def close(self) -> None:
        self.inner.close()
        super().close()


class _Guarded(io.RawIOBase):
    """A decompression stream that refuses to expand past ``MAX_EXPANSION``."""

    def __init__(self, inner: BinaryIO, source: _Counted, path: Path) -> None:
        self.inner, self.source, self.path = inner, source, path
        self.n_out = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        # Decompressed straight into the caller's buffer (zstandard's reader has readinto).
        n = cast(io.RawIOBase, self.inner).readinto(buffer) or 0
        self.n_out += n
        limit = MAX_EXPANSION * max(self.source.n_read, 1)
        if self.n_out > EXPANSION_FLOOR_BYTES and self.n_out > limit:
            raise InputError(
                f"{self.path}: zstd stream expands more than {MAX_EXPANSION}x "
                f"({self.n_out:,} bytes from {self.source.n_read:,}): refused as a "
                "decompression bomb (decompress it with zstd -d first if it is genuine)"
            )
        return n

    def close(self) -> None:
        self.inner.close()
        super().close()


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
            source = _Counted(stream)
            reader = zstandard.ZstdDecompressor().stream_reader(
                cast(BinaryIO, source), closefd=True
            )
            stream = io.BufferedReader(_Guarded(reader, source, path), _BUFFER_BYTES)
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
