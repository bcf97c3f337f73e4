"""Block identity: turning a trace's per-block hash ids into the ids the cache keys on.

A block's identity is its whole path from the root (``../DESIGN.md``, "Units and identities").
Two modes, one class each, chosen by name through ``BLOCK_ID_MODES``:

- ``prefix`` (default): ``PrefixInterner`` maps each ``(parent_interned_id, raw_id)`` pair to a
  dense integer 1, 2, 3, … in first-seen order; the root's parent is 0. Two requests share an id
  only if they share the whole prefix up to it, whatever the trace's hashing did. Equivalent to
  PrefixSim's rolling 64-bit ``prefix-hash`` without its (negligible) collisions, and dense, so
  a cache can index arrays by block id.
- ``raw``: ``RawIds`` keeps the trace's ids verbatim and counts, in a ``RawIdReport``, the ids
  that break prefix-uniqueness, so the caller can warn. Raw over-counts reuse on traces such as
  Qwen-Bailian, whose ids are not prefix-unique.

Both are streaming: the table of seen ids is the only state that grows with the trace.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Protocol

__all__ = ["BLOCK_ID_MODES", "BlockIdMapper", "PrefixInterner", "RawIdReport", "RawIds"]


class BlockIdMapper(Protocol):
    """Maps one request's raw hash ids (prefix order) to the block ids the simulator uses."""

    name: ClassVar[str]

    def map(self, raw_ids: list[int]) -> tuple[int, ...]:
        """Block ids of one request, prefix order. Call once per request, in trace order."""
        ...

    @property
    def n_unique(self) -> int:
        """Number of distinct block ids handed out so far."""
        ...


#: Raw ids below this are packed with their parent into one int key (``PrefixInterner``).
_PACKED_RAW_LIMIT = 1 << 32


class PrefixInterner:
    """Interns ``(parent_id, raw_id)`` pairs into dense ids 1, 2, 3… in first-seen order.

    Deterministic: the same requests in the same order always give the same ids. Ids at
    different depths always differ, so a request never repeats an id.
    """

    name: ClassVar[str] = "prefix"

    def __init__(self) -> None:
        self._table: dict[int | tuple[int, int], int] = {}

    def map(self, raw_ids: list[int]) -> tuple[int, ...]:
        """Intern one request's path; new pairs get the next dense id."""
        table = self._table
        out: list[int] = []
        parent = 0
        for raw in raw_ids:
            # One int names the pair when the raw id fits 32 unsigned bits (one to one: the
            # parent is the high bits), cheaper to build and hash than a tuple; a tuple
            # otherwise (a tuple never equals an int, so the two kinds of key cannot collide).
            key = (parent << 32) | raw if 0 <= raw < _PACKED_RAW_LIMIT else (parent, raw)
            bid = table.get(key)
            if bid is None:
                bid = len(table) + 1
                table[key] = bid
            out.append(bid)
            parent = bid
        return tuple(out)

    @property
    def n_unique(self) -> int:
        """Distinct interned ids so far (the largest id handed out)."""
        return len(self._table)


@dataclass(frozen=True, slots=True)
class RawIdReport:
    """How far a trace's raw ids are from prefix-unique (``raw`` mode only).

    An id "under more than one predecessor" follows different blocks in different requests
    (the first block's predecessor is the root); keying a cache on it merges distinct
    prefixes. If no id has more than one predecessor, none has more than one position either,
    and ``raw`` and ``prefix`` give the same hits.
    """

    n_unique_ids: int
    """Distinct raw ids seen."""
    n_multi_predecessor: int
    """Ids seen under more than one predecessor."""
    n_multi_position: int
    """Ids seen at more than one 0-based position."""

    @property
    def prefix_unique(self) -> bool:
        """Whether raw ids identify whole prefixes (raw mode is then exact)."""
        return self.n_multi_predecessor == 0


class RawIds:
    """Keeps hash ids verbatim and tracks whether they are prefix-unique."""

    name: ClassVar[str] = "raw"

    def __init__(self) -> None:
        # raw id -> (predecessor raw id or -1 for the root, position) when first seen
        self._first: dict[int, tuple[int, int]] = {}
        self._multi_predecessor: set[int] = set()
        self._multi_position: set[int] = set()

    def map(self, raw_ids: list[int]) -> tuple[int, ...]:
        """Return the ids unchanged, recording predecessors and positions."""
        first = self._first
        pred = -1
        for pos, raw in enumerate(raw_ids):
            seen = first.get(raw)
            if seen is None:
                first[raw] = (pred, pos)
            else:
                if seen[0] != pred:
                    self._multi_predecessor.add(raw)
                if seen[1] != pos:
                    self._multi_position.add(raw)
            pred = raw
        return tuple(raw_ids)

    @property
    def n_unique(self) -> int:
        """Distinct raw ids so far."""
        return len(self._first)

    def report(self) -> RawIdReport:
        """Counts so far (complete once the whole trace has been mapped)."""
        return RawIdReport(
            n_unique_ids=len(self._first),
            n_multi_predecessor=len(self._multi_predecessor),
            n_multi_position=len(self._multi_position),
        )


#: ``--block-id`` choices: name -> mapper class (constructed with no arguments, one per pass).
BLOCK_ID_MODES: dict[str, type[PrefixInterner] | type[RawIds]] = {
    PrefixInterner.name: PrefixInterner,
    RawIds.name: RawIds,
}
