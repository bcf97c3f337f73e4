"""Holes: maximal runs of missed blocks inside one request, and PrefixSim's hole dump.

A hole ``(start, length)`` says blocks ``start .. start+length-1`` (0-based positions) missed in
phase 1 while their neighbours, if any, hit. Summed over a run, the lengths equal the number of
missed blocks. With prefix matching that stops at the first miss, a request has at most one hole
(from the first miss to the end).

Dump format (one line per *served* request, also when it has no hole; skipped requests omitted)::

    Request <idx>: (idx: S, len: L) (idx: S, len: L) ...

in ``DIR/holes_<dataset>_cache<size>_<algo>.txt``, as PrefixSim's ``--dump-holes`` writes it.
``HoleStats`` summarises the same holes (what ``evaluate/analyze_holes.py`` derives from the
dump): holes per request (mean over all served requests and over those with a hole, max) and
the hole-length distribution (mean, max, counts in power-of-two buckets).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import TextIO

__all__ = ["HoleStats", "HoleWriter", "dataset_name", "find_holes", "holes_path"]

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


@dataclass(slots=True)
class HoleStats:
    """Running statistics of the holes of served requests (feed it with ``add``).

    ``length_buckets[k]`` counts holes of length in ``[2^k, 2^(k+1))`` blocks.
    """

    n_requests: int = 0
    """Served requests seen (with or without holes)."""
    n_with_holes: int = 0
    n_holes: int = 0
    max_holes: int = 0
    """Most holes in one request."""
    missed_blocks: int = 0
    """Sum of hole lengths (= missed blocks of the run)."""
    max_length: int = 0
    length_buckets: list[int] = field(default_factory=list)

    def add(self, holes: Sequence[tuple[int, int]]) -> None:
        """Count one served request's holes."""
        self.n_requests += 1
        if not holes:
            return
        self.n_with_holes += 1
        self.n_holes += len(holes)
        self.max_holes = max(self.max_holes, len(holes))
        buckets = self.length_buckets
        for _, length in holes:
            self.missed_blocks += length
            self.max_length = max(self.max_length, length)
            k = length.bit_length() - 1
            if k >= len(buckets):
                buckets.extend([0] * (k + 1 - len(buckets)))
            buckets[k] += 1

    @property
    def mean_holes(self) -> float:
        """Holes per served request (0.0 before any)."""
        return self.n_holes / self.n_requests if self.n_requests else 0.0

    @property
    def mean_holes_when_missing(self) -> float:
        """Holes per request that has at least one (PrefixSim's "avg holes/req")."""
        return self.n_holes / self.n_with_holes if self.n_with_holes else 0.0

    @property
    def mean_length(self) -> float:
        """Mean hole length in blocks (0.0 without holes)."""
        return self.missed_blocks / self.n_holes if self.n_holes else 0.0

    def buckets(self) -> dict[str, int]:
        """Non-empty length buckets keyed ``"lo-hi"`` (blocks, inclusive), shortest first."""
        return {
            f"{1 << k}-{(2 << k) - 1}": count
            for k, count in enumerate(self.length_buckets)
            if count
        }

    def summary(self) -> dict[str, object]:
        """JSON-ready statistics; ``length_buckets`` keyed ``"lo-hi"`` (blocks, inclusive)."""
        return {
            "n_requests": self.n_requests,
            "n_with_holes": self.n_with_holes,
            "n_holes": self.n_holes,
            "mean_holes_per_request": self.mean_holes,
            "mean_holes_per_missing_request": self.mean_holes_when_missing,
            "max_holes_per_request": self.max_holes,
            "missed_blocks": self.missed_blocks,
            "mean_hole_length": self.mean_length,
            "max_hole_length": self.max_length,
            "length_buckets": self.buckets(),
        }


class HoleWriter:
    """Writes one hole line per served request; pass it as the replay's ``on_holes`` callback.

    Opening truncates the file. Use as a context manager (or call ``close``). Not thread-safe.
    ``stats`` accumulates the statistics of everything written.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._file: TextIO = self.path.open("w", encoding="utf-8")
        self.stats = HoleStats()

    def __call__(self, index: int, holes: Sequence[tuple[int, int]]) -> None:
        """Write the line of request ``index`` (its workload index) with its ``holes``."""
        runs = "".join(f" (idx: {start}, len: {length})" for start, length in holes)
        self._file.write(f"Request {index}:{runs}\n")
        self.stats.add(holes)

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
