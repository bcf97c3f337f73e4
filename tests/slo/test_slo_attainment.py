"""Per-request attainment: tightest limit per metric, NaN = not applicable, brute-force check."""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slo import SloSpec, attainment, slo_met_mask

SPEC = SloSpec.model_validate(
    {"name": "t", "targets": {"ttft_ms": {"p90": 200, "p99": 500}, "tpot_ms": {"mean": 20}}}
)


def test_tightest_limit_is_the_per_request_bar() -> None:
    per_request = {
        "ttft_ms": [100.0, 200.0, 300.0, 100.0],  # 300 passes p99's 500 but not p90's 200
        "tpot_ms": [10.0, 20.0, 10.0, 21.0],
        "e2e_ms": [1e9, 1e9, 1e9, 1e9],  # not a target: ignored
    }
    assert slo_met_mask(per_request, SPEC).tolist() == [True, True, False, False]
    assert attainment(per_request, SPEC) == 0.5


def test_nan_is_not_applicable_and_inf_is_missed() -> None:
    per_request = {"ttft_ms": [100.0, math.inf, 100.0], "tpot_ms": [math.nan, 5.0, 25.0]}
    assert slo_met_mask(per_request, SPEC).tolist() == [True, False, False]
    assert attainment(per_request, SPEC) == pytest.approx(1 / 3)


def test_no_targets_means_everyone_attains() -> None:
    assert attainment({}, SloSpec(name="free")) == 1.0
    assert slo_met_mask({}, SloSpec(name="free")).size == 0


def test_zero_requests_attain_nothing() -> None:
    assert attainment({"ttft_ms": [], "tpot_ms": []}, SPEC) == 0.0


def test_missing_metric_and_length_mismatch_are_errors() -> None:
    with pytest.raises(KeyError, match="tpot_ms"):
        attainment({"ttft_ms": [1.0]}, SPEC)
    with pytest.raises(ValueError, match="differ in length"):
        attainment({"ttft_ms": [1.0, 2.0], "tpot_ms": [1.0]}, SPEC)
    with pytest.raises(ValueError, match="one-dimensional"):
        attainment({"ttft_ms": [[1.0]], "tpot_ms": [[1.0]]}, SPEC)


_value = st.one_of(st.floats(0, 1000, allow_nan=False), st.just(math.nan), st.just(math.inf))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(_value, _value), max_size=40))
def test_matches_brute_force(rows: list[tuple[float, float]]) -> None:
    per_request: dict[str, npt.ArrayLike] = {
        "ttft_ms": np.array([r[0] for r in rows]),
        "tpot_ms": [r[1] for r in rows],
    }

    def meets(ttft: float, tpot: float) -> bool:
        return (math.isnan(ttft) or ttft <= 200) and (math.isnan(tpot) or tpot <= 20)

    expected = [meets(*row) for row in rows]
    assert slo_met_mask(per_request, SPEC).tolist() == expected
    want = sum(expected) / len(expected) if expected else 0.0
    assert attainment(per_request, SPEC) == pytest.approx(want)
