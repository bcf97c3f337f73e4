"""The contract every latency model in ``LATENCY_MODELS`` satisfies (see ``base.py``).

Parametrised over every registry entry × the deployments in ``specs.DEPLOYMENTS`` (dense, TP with
fp8, MoE, MLA on another GPU). A model whose spec needs an argument lists it in ``SPEC_ARGS``.
"""

from __future__ import annotations

import itertools

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simulator.latency import LATENCY_MODELS, Batch, LatencyModel, make_latency_model
from simulator.latency.transfer import Link

from .specs import DEPLOYMENTS

#: Spec arguments for models that need one (e.g. 'calibrated': a fit file).
SPEC_ARGS: dict[str, str] = {}
#: Relative slack for "non-decreasing" (float rounding of cached sums).
RTOL = 1e-9

CASES = [(name, key) for name in sorted(LATENCY_MODELS) for key in DEPLOYMENTS]


def _spec(name: str) -> str:
    return f"{name}:{SPEC_ARGS[name]}" if name in SPEC_ARGS else name


def _build(name: str, key: str) -> LatencyModel:
    return make_latency_model(_spec(name), DEPLOYMENTS[key])


@pytest.fixture(params=CASES, ids=[f"{n}-{k}" for n, k in CASES])
def model(request: pytest.FixtureRequest) -> LatencyModel:
    name, key = request.param
    return _build(name, key)


def _nondecreasing(values: list[float]) -> bool:
    return all(b >= a * (1 - RTOL) for a, b in itertools.pairwise(values))


def test_satisfies_protocol(model: LatencyModel) -> None:
    assert isinstance(model, LatencyModel)
    assert model.name.split(":")[0] in LATENCY_MODELS


def test_empty_batch_costs_nothing(model: LatencyModel) -> None:
    assert model.step_seconds([]) == 0.0
    assert model.step_seconds(Batch.of([])) == 0.0
    assert model.breakdown([]).total == 0.0


def test_positive_and_finite(model: LatencyModel) -> None:
    for batch in ([(0, 1)], [(5000, 1)] * 64, [(0, 8192)], [(100_000, 16)]):
        seconds = model.step_seconds(batch)
        assert 0 < seconds < 60


def test_monotone_in_new_tokens(model: LatencyModel) -> None:
    for cache_len in (0, 4096, 65536):
        values = [model.step_seconds([(cache_len, n)]) for n in (1, 2, 3, 16, 128, 1024, 8192)]
        assert _nondecreasing(values), (cache_len, values)
    assert model.step_seconds([(0, 8192)]) > 2 * model.step_seconds([(0, 16)])


def test_monotone_in_context(model: LatencyModel) -> None:
    for new in (1, 512):
        lens = (0, 1, 15, 16, 17, 1000, 4095, 4096, 4097, 32768, 131071)
        values = [model.step_seconds([(c, new)]) for c in lens]
        assert _nondecreasing(values), (new, values)
        assert values[-1] > values[0]


def test_deterministic_and_order_independent(model: LatencyModel) -> None:
    batches = [[(c, 1) for c in range(50, 5000, 50)], [(0, 2000), (300, 1)], [(9, 1)]]
    first = [model.step_seconds(b) for b in batches]
    again = [model.step_seconds(b) for b in reversed(batches)][::-1]
    assert first == again
    name = model.name.split(":")[0]
    key = next(k for k, d in DEPLOYMENTS.items() if d is model.deployment)
    fresh = _build(name, key)
    assert [fresh.step_seconds(b) for b in batches] == first


def test_breakdown_matches_step(model: LatencyModel) -> None:
    batch = [(c, 1) for c in range(1, 3000, 7)] + [(1024, 4096), (0, 33)]
    assert model.breakdown(batch).total == pytest.approx(model.step_seconds(batch), rel=1e-9)
    assert all(v >= 0 for v in model.breakdown(batch).seconds.values())


def test_transfer_seconds(model: LatencyModel) -> None:
    link = Link("test", gb_per_s=10.0, latency_s=1e-5)
    assert model.transfer_seconds(0, link) == 0.0
    assert model.transfer_seconds(1e9, link) == pytest.approx(0.1 + 1e-5)


_pairs = st.lists(st.tuples(st.integers(0, 200_000), st.integers(1, 4096)), min_size=1, max_size=24)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=st.sampled_from(CASES), pairs=_pairs, data=st.data())
def test_adding_or_growing_a_request_never_cheapens(
    case: tuple[str, str], pairs: list[tuple[int, int]], data: st.DataObject
) -> None:
    model = _build(*case)
    before = model.step_seconds(pairs)
    extra = data.draw(st.tuples(st.integers(0, 200_000), st.integers(1, 4096)))
    assert model.step_seconds([*pairs, extra]) >= before * (1 - RTOL)
    i = data.draw(st.integers(0, len(pairs) - 1))
    grow_cache = data.draw(st.integers(0, 50_000))
    grow_new = data.draw(st.integers(0, 2048))
    if pairs[i][1] == 1:
        # A decode stays a decode: decode and prefill attention are separate kernel launches in
        # this model, so turning the only decode of a mixed batch into a 2-token chunk can save
        # a launch (a modelling choice, not a cost inversion within one kernel class).
        grow_new = 0
    grown = list(pairs)
    grown[i] = (pairs[i][0] + grow_cache, pairs[i][1] + grow_new)
    assert model.step_seconds(grown) >= before * (1 - RTOL)


@pytest.mark.parametrize("case", CASES)
def test_decodes_split_across_kv_buckets_cost_no_less(case: tuple[str, str]) -> None:
    """Two decodes at KV 1 and 2 fall into two buckets; merging their launches must not also
    credit away one request's work (it did for fitted models with per-request terms)."""
    model = _build(*case)
    same = model.step_seconds([(0, 1), (0, 1)])
    split = model.step_seconds([(1, 1), (0, 1)])
    assert split >= same * (1 - RTOL)
