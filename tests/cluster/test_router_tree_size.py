"""cache_aware's prefix trees default to one instance's L1 size (explicit values win)."""

from __future__ import annotations

import pytest

from simulator.build import _trees_sized_to_cache


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("cache_aware", "cache_aware:max_tree_blocks=869"),
        ("cache_aware:cache_threshold=0.5", "cache_aware:cache_threshold=0.5,max_tree_blocks=869"),
        ("cache_aware:max_tree_blocks=10", "cache_aware:max_tree_blocks=10"),
        ("least_load", "least_load"),
    ],
)
def test_tree_size_default(spec: str, expected: str) -> None:
    assert _trees_sized_to_cache(spec, 869) == expected
