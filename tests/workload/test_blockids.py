"""Block identity: prefix interning ids exactly, and the raw-id prefix-uniqueness report."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from simulator.workload.blockids import BLOCK_ID_MODES, PrefixInterner, RawIds


def test_prefix_interning_assigns_dense_ids_in_first_seen_order() -> None:
    interner = PrefixInterner()
    assert interner.map([10, 11, 12]) == (1, 2, 3)
    assert interner.map([10, 11, 13]) == (1, 2, 4)  # shared prefix, new leaf
    assert interner.map([11, 10]) == (5, 6)  # same raw ids on a different path
    assert interner.map([10, 12]) == (1, 7)  # 12 under 10 is not 12 under 10/11
    assert interner.map([]) == ()
    assert interner.n_unique == 7


@given(st.lists(st.lists(st.integers(0, 3), max_size=6), max_size=12))
def test_prefix_ids_are_equal_exactly_when_paths_are_equal(requests: list[list[int]]) -> None:
    interner = PrefixInterner()
    path_of: dict[int, tuple[int, ...]] = {}
    for raw in requests:
        ids = interner.map(raw)
        assert len(ids) == len(raw)
        for depth, bid in enumerate(ids):
            path = tuple(raw[: depth + 1])
            assert path_of.setdefault(bid, path) == path
    assert len(set(path_of.values())) == len(path_of) == interner.n_unique
    assert sorted(path_of) == list(range(1, interner.n_unique + 1))


def test_raw_ids_are_kept_and_non_prefix_unique_ids_counted() -> None:
    raw = RawIds()
    assert raw.map([1, 2, 3]) == (1, 2, 3)
    assert raw.map([1, 2, 3]) == (1, 2, 3)
    assert raw.report().prefix_unique
    raw.map([2, 3])  # 2 now also under the root (and at position 0); 3 at position 1
    report = raw.report()
    assert (report.n_multi_predecessor, report.n_multi_position) == (1, 2)
    raw.map([5, 5])  # 5 under the root at 0, then under itself at 1
    report = raw.report()
    assert (report.n_unique_ids, report.n_multi_predecessor, report.n_multi_position) == (4, 2, 3)
    assert not report.prefix_unique


def test_block_id_modes_name_their_classes() -> None:
    assert {name: cls.name for name, cls in BLOCK_ID_MODES.items()} == {
        "prefix": "prefix",
        "raw": "raw",
    }


def _reference_intern(paths: list[list[int]]) -> list[tuple[int, ...]]:
    """``PrefixInterner`` as specified: one tuple key per ``(parent, raw)`` pair."""
    table: dict[tuple[int, int], int] = {}
    out = []
    for path in paths:
        ids, parent = [], 0
        for raw in path:
            parent = table.setdefault((parent, raw), len(table) + 1)
            ids.append(parent)
        out.append(tuple(ids))
    return out


def test_packed_keys_intern_as_pairs_around_the_32_bit_edge() -> None:
    # Raw ids in [0, 2^32) are packed with their parent into one int key, others stay tuples:
    # the ids must be those of pair keys, wherever the raw ids fall.
    rng = np.random.default_rng(3)
    edge = [0, 1, 2**32 - 1, 2**32, 2**32 + 1, 2**63 - 1, -1]  # -1: a caller's own ids
    paths = [[int(x) for x in rng.choice(edge, size=int(rng.integers(0, 9)))] for _ in range(400)]
    interner = PrefixInterner()
    assert [interner.map(path) for path in paths] == _reference_intern(paths)
