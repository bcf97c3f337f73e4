"""Batch construction: pairs and arrays agree, decode/prefill split, validation."""

from __future__ import annotations

import numpy as np
import pytest

from simulator.latency import Batch, as_batch


def test_pairs_and_arrays_agree() -> None:
    pairs = [(100, 1), (0, 512), (7, 1), (0, 512), (4096, 2048), (5, 1)]
    a = Batch.of(pairs)
    b = Batch.from_arrays([c for c, _ in pairs], [n for _, n in pairs])
    for batch in (a, b):
        assert batch.size == 6
        assert batch.num_tokens == 1 + 512 + 1 + 512 + 2048 + 1
        assert batch.logit_tokens == 6
        assert sorted(batch.decode_kv_lens.tolist()) == [6, 8, 101]
        assert batch.prefill_groups == ((0, 512, 2), (4096, 2048, 1))
        assert batch.num_decode == 3
        assert batch.num_prefill == 3
    assert sorted(a.pairs()) == sorted(pairs)


def test_decode_only_fast_path_keeps_lengths() -> None:
    batch = Batch.of([(c, 1) for c in range(10)])
    assert batch.decode_kv_lens.tolist() == list(range(1, 11))
    assert batch.prefill_groups == ()
    assert batch.num_tokens == 10


def test_empty_batch() -> None:
    for batch in (Batch.of([]), Batch.from_arrays([], [])):
        assert batch.size == 0
        assert batch.num_tokens == 0
        assert batch.num_decode == 0


def test_logit_tokens_explicit_and_bounded() -> None:
    assert Batch.of([(0, 100), (5, 1)], logit_tokens=1).logit_tokens == 1
    with pytest.raises(ValueError, match="logit_tokens"):
        Batch.of([(0, 100)], logit_tokens=2)


@pytest.mark.parametrize("bad", [[(0, 0)], [(-1, 5)], [(3, 1), (2, -4)]])
def test_rejects_bad_entries(bad: list[tuple[int, int]]) -> None:
    with pytest.raises(ValueError, match="new_tokens >= 1"):
        Batch.of(bad)
    with pytest.raises(ValueError, match="new_tokens >= 1"):
        Batch.from_arrays([c for c, _ in bad], [n for _, n in bad])


def test_from_arrays_shape_mismatch() -> None:
    with pytest.raises(ValueError, match="same length"):
        Batch.from_arrays(np.zeros(3), np.ones(2))


def test_as_batch_passes_batches_through() -> None:
    batch = Batch.of([(1, 1)])
    assert as_batch(batch) is batch
    assert as_batch([(1, 1)]).size == 1
