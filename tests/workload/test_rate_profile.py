"""Load over time: a rate profile is a time change of the arrivals (``rate_profile.py``)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from simulator.workload.rate_profile import RateProfile, TimeWarp
from simulator.workload.spec import WorkloadSpec, load_workload
from slo.inputfile import InputError, validate

TRACE = "\n".join(
    f'{{"timestamp": {1000 * k}, "input_length": 100, "output_length": 5, "hash_ids": [{k}]}}'
    for k in range(6)
)


def test_a_time_change_by_hand() -> None:
    # Scale 1 for 100 s, idle for 100 s, twice the rate until 300 s, then 4 times for good.
    warp = TimeWarp([(100.0, 1.0), (200.0, 0.0), (300.0, 2.0), (400.0, 4.0)], periodic=False)
    assert warp(0.0) == 0.0
    assert warp(50.0) == 50.0
    assert warp(150.0) == pytest.approx(225.0)  # 100 s of process clock, then 50 at rate 2
    assert warp(300.0) == pytest.approx(300.0)  # end of the rate-2 piece
    assert warp(700.0) == pytest.approx(400.0)  # end of the rate-4 piece (Λ = 700)
    assert warp(740.0) == pytest.approx(410.0)  # the last scale holds after it
    assert [warp.multiplier(t) for t in (0.0, 150.0, 250.0, 1e6)] == [1.0, 0.0, 2.0, 4.0]
    real = [warp(float(u)) for u in range(0, 800, 7)]
    assert real == sorted(real)


def test_a_periodic_warp_repeats_its_cycle() -> None:
    warp = TimeWarp([(10.0, 2.0), (20.0, 1.0)], periodic=True)  # Λ over a cycle = 30
    for u in (0.0, 5.0, 17.5, 29.0):
        assert warp(u + 30.0) == pytest.approx(warp(u) + 20.0)
        assert warp(u + 90.0) == pytest.approx(warp(u) + 60.0)
    assert warp.multiplier(25.0) == 2.0


def _open_loop(profile: dict[str, object], requests: int) -> list[float]:
    spec = WorkloadSpec.model_validate(
        {
            "kind": "open_loop",
            "requests": requests,
            "arrival": {"process": "poisson", "rate_per_s": 10.0, "profile": profile},
            "input_tokens": 100,
            "output_tokens": 10,
        }
    )
    return [r.timestamp_s for r in spec.build(np.random.default_rng(0)).start()]


def test_poisson_arrivals_follow_the_pieces() -> None:
    pieces = [
        {"until_s": 600, "scale": 0.5},
        {"until_s": 1200, "scale": 0.0},
        {"until_s": 1800, "scale": 2.0},
    ]
    times = np.array(_open_loop({"pieces": pieces}, 12_000))
    assert np.all(np.diff(times) >= 0)
    first = np.count_nonzero(times < 600)
    assert first == pytest.approx(10 * 0.5 * 600, rel=0.06)  # 3,000 expected (σ ≈ 55)
    assert np.count_nonzero((times >= 600) & (times < 1200)) == 0  # the idle piece
    # The process clock reaches ~1,200 s (12,000 arrivals at 10/s): 300 s of it in the first
    # piece, the other ~900 at twice the rate, i.e. ~450 real seconds after 1,200.
    assert times[-1] == pytest.approx(1200 + 450, rel=0.03)


def test_a_diurnal_cycle_peaks_where_it_says_and_averages_its_mean() -> None:
    # A one-hour "day" in one-minute slots, peaking at 30 min, 0.2x to 1.8x of 10/s.
    profile = {"diurnal": {"low": 0.2, "high": 1.8, "peak_s": 1800, "period_s": 3600,
                           "step_s": 60}}  # fmt: skip
    times = np.array(_open_loop(profile, 72_000))
    per_cycle = np.count_nonzero(times < 3600)
    assert per_cycle == pytest.approx(36_000, rel=0.03)  # mean multiplier (0.2 + 1.8) / 2 = 1
    slots = np.bincount((times[times < 3600] // 60).astype(int), minlength=60)
    assert abs(int(np.argmax(slots)) - 30) <= 2
    assert slots[28:32].mean() / slots[[0, 1, 58, 59]].mean() == pytest.approx(9.0, rel=0.25)
    assert times[-1] == pytest.approx(7200, rel=0.03)  # two cycles for twice the requests


def test_a_trace_keeps_its_order_under_a_profile(tmp_path: Path) -> None:
    (tmp_path / "t.jsonl").write_text(TRACE + "\n")
    (tmp_path / "w.yaml").write_text(
        "kind: trace\npath: t.jsonl\n"
        "rate_profile: {pieces: [{until_s: 2, scale: 1}, {until_s: 4, scale: 2}]}\n"
    )
    source = load_workload(tmp_path / "w.yaml").build(np.random.default_rng(0))
    times = [r.timestamp_s for r in source.start()]
    # Trace seconds 0..5 (JSONL timestamps are ms): 1:1 up to 2 s, then twice as dense up to
    # real 4 s (trace 2..6): trace t ↦ 2 + (t − 2) / 2.
    assert times == pytest.approx([0.0, 1.0, 2.0, 2.5, 3.0, 3.5])


@pytest.mark.parametrize(
    ("profile", "message"),
    [
        ({}, "exactly one of 'pieces' or 'diurnal'"),
        ({"pieces": []}, "at least one piece"),
        ({"pieces": [{"until_s": 10, "scale": 1}, {"until_s": 5, "scale": 1}]}, "increase"),
        ({"pieces": [{"until_s": 10, "scale": 0}]}, "must be > 0"),
        ({"pieces": [{"until_s": 10, "scale": -1}]}, "scale"),
        ({"diurnal": {"low": 2, "high": 1}}, "must not exceed high"),
        ({"diurnal": {"low": 0, "high": 1, "step_s": 0.001}}, "slots"),
        ({"diurnal": {"low": 0, "high": 1, "peak": 3}}, "peak: unknown key"),
    ],
)
def test_bad_profiles_are_one_line_errors(profile: dict[str, object], message: str) -> None:
    data = {
        "kind": "open_loop",
        "requests": 10,
        "arrival": {"process": "poisson", "rate_per_s": 1.0, "profile": profile},
        "input_tokens": 10,
        "output_tokens": 1,
    }
    with pytest.raises(InputError, match=message) as info:
        validate(WorkloadSpec, data, "w.yaml")
    assert "\n" not in str(info.value)
    assert str(info.value).startswith("w.yaml: open_loop.arrival.profile")


def test_a_profile_is_a_frozen_value() -> None:
    profile = RateProfile.model_validate({"pieces": [{"until_s": 1, "scale": 1.0}]})
    assert profile.warp()(math.pi) == pytest.approx(math.pi)
