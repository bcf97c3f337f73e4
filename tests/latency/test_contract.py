"""The contract every latency model in ``LATENCY_MODELS`` satisfies (see ``base.py``).

The checks live in ``simulator/testing/latency.py``; here they run over every registry entry ×
the deployments in ``specs.DEPLOYMENTS`` (dense, TP with fp8, MoE, MLA on another GPU), plus a
property test. A model whose spec needs an argument lists it in ``SPEC_ARGS``.
"""

from __future__ import annotations

import functools
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simulator.latency import LATENCY_MODELS, LatencyModel, make_latency_model
from simulator.testing import latency as kit
from simulator.testing.latency import RTOL

from .specs import DEPLOYMENTS

#: Spec arguments for models that need one (e.g. 'calibrated': a fit file).
SPEC_ARGS: dict[str, str] = {}

CASES = [(name, key) for name in sorted(LATENCY_MODELS) for key in DEPLOYMENTS]


def _spec(name: str) -> str:
    return f"{name}:{SPEC_ARGS[name]}" if name in SPEC_ARGS else name


def _build(name: str, key: str) -> LatencyModel:
    return make_latency_model(_spec(name), DEPLOYMENTS[key])


@pytest.mark.parametrize("case", CASES, ids=[f"{n}-{k}" for n, k in CASES])
@pytest.mark.parametrize("check", sorted(kit.CHECKS))
def test_every_model_passes_the_contract(check: str, case: tuple[str, str]) -> None:
    kit.CHECKS[check](functools.partial(_build, *case))


class _LongContextDiscount:
    """A broken model: a real one, but a context past 64 k tokens is priced as 16 k."""

    def __init__(self, inner: LatencyModel) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def step_seconds(self, batch: Any) -> float:
        capped = [(16_384 if c > 65_536 else c, n) for c, n in batch]
        return float(self.inner.step_seconds(capped))


def test_the_contract_catches_a_model_that_breaks_it() -> None:
    def build() -> LatencyModel:
        return _LongContextDiscount(_build("roofline", next(iter(DEPLOYMENTS))))  # type: ignore[return-value]

    with pytest.raises(AssertionError, match="falls with context"):
        kit.CHECKS["monotone_in_context"](build)
    kit.CHECKS["monotone_in_new_tokens"](build)  # below 64 k it is the real model


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
