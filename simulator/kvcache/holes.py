"""Holes: maximal runs of missed blocks inside one request, and PrefixSim's hole dump.

A hole ``(start, length)`` says blocks ``start .. start+length-1`` (0-based positions) missed in
phase 1 while their neighbours, if any, hit. Summed over a run, the lengths equal the number of
missed blocks. With prefix matching that stops at the first miss, a request has at most one hole
(from the first miss to the end).

Dump format (one line per *served* request, also when it has no hole; skipped requests omitted)::

    Request <idx>: (idx: S, len: L) (idx: S, len: L) ...

in ``DIR/holes_<dataset>_cache<size>_<algo>.txt``, as PrefixSim's ``--dump-holes`` writes it.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import TextIO

__all__ = ["HoleWriter", "dataset_name", "find_holes", "holes_path"]

# Compression / container suffixes that are not part of a trace's dataset name.
_TRACE_SUFFIXES = (".zst", ".gz", ".jsonl", ".json", ".lcp", ".lcsllm", ".csv", ".txt")


def find_holes(hits: Sequence[bool]) -> list[tuple[int, int]]:
    """The maximal runs of ``False`` in ``hits`` as ``(start, length)`` pairs, in order."""
    holes: list[tuple[int, int]] = []
    start = -1
    for position, hit in enumerate(hits):
        if not hit:
            if start < 0:
                start = position
        elif start >= 0:
            holes.append((start, position - start))
            start = -1
    if start >= 0:
        holes.append((start, len(hits) - start))
    return holes


def dataset_name(trace: str | Path) -> str:
    """The dataset part of a trace file name: ``a/qwen_A.jsonl.zst`` -> ``qwen_A``."""
    name = Path(trace).name
    stripped = True
    while stripped:
        stripped = False
        for suffix in _TRACE_SUFFIXES:
            if name.endswith(suffix) and len(name) > len(suffix):
                name = name[: -len(suffix)]
                stripped = True
    return name


def holes_path(directory: str | Path, dataset: str, cache_size: int, algo: str) -> Path:
    """``DIR/holes_<dataset>_cache<size>_<algo>.txt`` (size in blocks, as a plain integer)."""
    return Path(directory) / f"holes_{dataset}_cache{cache_size}_{algo}.txt"


class HoleWriter:
    """Writes one hole line per served request; pass it as the replay's ``on_holes`` callback.

    Opening truncates the file. Use as a context manager (or call ``close``). Not thread-safe.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._file: TextIO = self.path.open("w", encoding="utf-8")

    def __call__(self, index: int, holes: Sequence[tuple[int, int]]) -> None:
        """Write the line of request ``index`` (its workload index) with its ``holes``."""
        runs = "".join(f" (idx: {start}, len: {length})" for start, length in holes)
        self._file.write(f"Request {index}:{runs}\n")

    def close(self) -> None:
        """Flush and close the file (idempotent)."""
        self._file.close()

    def __enter__(self) -> HoleWriter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
