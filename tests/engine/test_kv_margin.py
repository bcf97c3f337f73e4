"""KV-capacity margin: ``kv_capacity_scale`` and ``kv_margin`` (``simulator/kv_margin.py``)."""

from __future__ import annotations

import math

import pytest

from hardware.schema import Catalog
from simulator.api import simulate
from simulator.config import ServingConfig
from simulator.kv_margin import EDGE_RATIO, kv_margin
from simulator.workload.closed_loop import closed_loop_workload
from simulator.workload.spec import WorkloadSpec
from slo.inputfile import InputError, validate

#: 8 users of 1,000 + 100 tokens, 5 requests each: at full length they hold 8 x 1,104 tokens
#: (69 blocks of 16 each), 8,832 in all.
LOOP = closed_loop_workload(users=8, requests=40, input_tokens=1000, output_tokens=100)


def _config(pool: int, **overrides: object) -> ServingConfig:
    return ServingConfig.model_validate(
        {
            "model": "toy/Toy-1B",
            "gpu": "toy_gpu",
            "latency_model": "linear:0.004,0.00005",
            "kv_capacity_tokens": pool,
            **overrides,
        }
    )


def test_the_scale_multiplies_the_pool_and_the_sentence_says_so(catalog: Catalog) -> None:
    """Half of a 1,000-token pool holds no 600-token prompt: rejected at arrival, where the
    whole pool admits it."""
    one = WorkloadSpec.model_validate(
        {"kind": "closed_loop", "users": 1, "requests": 1, "input_tokens": 600, "output_tokens": 4}
    )
    whole = simulate(_config(1000), one, seed=0, catalog=catalog)
    half = simulate(_config(1000, kv_capacity_scale=0.5), one, seed=0, catalog=catalog)
    assert whole.summary is not None
    assert whole.summary.n_rejected == 0
    assert half.summary is not None
    assert half.summary.n_rejected == 1
    assert half.reason.endswith("; x0.5 (kv_capacity_scale) = 500 tokens")


@pytest.mark.parametrize("scale", [0.0, -1.0, 101.0, math.inf])
def test_a_scale_out_of_range_is_an_input_error(scale: float) -> None:
    fields = {"model": "toy/Toy-1B", "gpu": "toy_gpu", "kv_capacity_scale": scale}
    with pytest.raises(InputError, match="kv_capacity_scale"):
        validate(ServingConfig, fields, "deploy.yaml")


def test_a_loop_that_fits_with_room_is_not_on_the_edge(catalog: Catalog) -> None:
    """20,000 tokens hold every user at full length with the pool 10% smaller: identical runs."""
    config = _config(20_000)
    nominal = simulate(config, LOOP, seed=0, catalog=catalog)
    margin = kv_margin(config, LOOP, nominal, seed=0, catalog=catalog, fraction=0.1)
    assert not margin.edge
    for run in (margin.smaller, margin.larger):
        assert run.ratios == {"ttft_ms.mean": 1.0, "ttft_ms.p90": 1.0, "tpot_ms.p50": 1.0}
    assert margin.sentence().endswith("not capacity-bound")


def test_a_loop_at_its_kv_edge_is_flagged(catalog: Catalog) -> None:
    """8,000 tokens hold 7 of the 8 users at full length (8,832 tokens): requests queue for
    memory, and 10% more or less pool moves a TTFT figure by more than ``EDGE_RATIO``; the
    line says the prediction sits on the edge."""
    config = _config(8_000)
    nominal = simulate(config, LOOP, seed=0, catalog=catalog)
    margin = kv_margin(config, LOOP, nominal, seed=0, catalog=catalog, fraction=0.1)
    assert margin.edge
    moves = [
        abs(math.log(value))
        for run in (margin.smaller, margin.larger)
        for key, value in (run.ratios or {}).items()
        if key.startswith("ttft")
    ]
    assert max(moves) >= math.log(EDGE_RATIO)
    assert "on the KV-capacity edge" in margin.sentence()
    data = margin.to_dict()
    assert data["edge"] is True
    assert data["smaller"]["kv_capacity_scale"] == pytest.approx(0.9)


def test_a_variant_that_cannot_run_puts_the_prediction_on_the_edge(catalog: Catalog) -> None:
    """A pool 90% smaller holds less than one block: it cannot run, and says why."""
    config = _config(100)
    one = closed_loop_workload(users=1, requests=2, input_tokens=8, output_tokens=4)
    nominal = simulate(config, one, seed=0, catalog=catalog)
    margin = kv_margin(config, one, nominal, seed=0, catalog=catalog, fraction=0.9)
    assert margin.smaller.ratios is None
    assert "less than one" in margin.smaller.reason
    assert margin.edge
    assert "cannot run" in margin.sentence()


def test_fraction_outside_zero_one_is_refused(catalog: Catalog) -> None:
    config = _config(20_000)
    nominal = simulate(config, LOOP, seed=0, catalog=catalog)
    with pytest.raises(ValueError, match="fraction"):
        kv_margin(config, LOOP, nominal, seed=0, catalog=catalog, fraction=1.0)
