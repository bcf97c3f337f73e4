"""The receive interval (``simulator/engine/receive.py``, SGLang ``--scheduler-recv-interval``):
a running engine looks at new arrivals after a prefill step, when idle, and otherwise once every
``interval`` decode-only steps; by hand."""

from __future__ import annotations

import pytest
from engine_helpers import BT, request

from hardware.schema import Catalog
from simulator.api import simulate
from simulator.config import ServingConfig
from simulator.engine.receive import ReceiveInterval
from simulator.workload.source import OpenLoopSource

MS = 1e-3


def test_looks_by_hand() -> None:
    looks = ReceiveInterval(3)
    assert looks.look(0.0, running=False) is None  # idle: look
    looks.ran({"a": 16}, 1)  # a prefill step: the next boundary looks
    assert looks.look(1 * MS, running=True) is None
    for t in (2, 3):
        looks.ran({"a": 1}, 1)
        assert looks.look(t * MS, running=True) == pytest.approx(1 * MS)  # still the 1 ms look
    assert looks.steps_to_look() == 1
    looks.ran({"a": 1}, 1)
    assert looks.look(4 * MS, running=True) is None  # the third decode step: look
    looks.ran({"a": 1}, 5)  # a run of 5 decode steps passes the interval
    assert looks.look(9 * MS, running=True) is None
    every = ReceiveInterval(1)
    every.ran({"a": 1}, 1)
    assert every.look(1 * MS, running=True) is None
    with pytest.raises(ValueError, match=">= 1"):
        ReceiveInterval(0)


def _ttfts(catalog: Catalog, interval: int | None) -> list[float]:
    """A decodes from 1 ms in 1 ms steps; B arrives at 2.5 ms."""
    config = ServingConfig(
        model="toy/Toy-1B", gpu="toy_gpu", latency_model="constant:0.001",
        overlap_scheduling=False, scheduler_recv_interval=interval,
        tokenize_us_per_prompt_token=0.0,  # by hand: arrivals reach the engine at once
    )  # fmt: skip
    reqs = [request(0, 0.0, 32, 40), request(1, 2.5 * MS, 32, 4)]
    result = simulate(config, OpenLoopSource(reqs, BT), seed=0, catalog=catalog)
    return [r.ttft_s for r in sorted(result.records, key=lambda r: r.arrival_s)]


def test_an_arrival_waits_for_the_next_look(catalog: Catalog) -> None:
    """A's prefill ends at 1 ms (a look follows it), then A decodes one step a millisecond.
    Every boundary a look: B is scheduled at 3 ms, its first token at 4 ms (1.5 ms TTFT). At
    interval 10 the next look is after 10 decode steps, at 11 ms: B's first token at 12 ms
    (9.5 ms)."""
    every = _ttfts(catalog, None)
    assert every == pytest.approx([1 * MS, 1.5 * MS])
    ten = _ttfts(catalog, 10)
    assert ten == pytest.approx([1 * MS, 9.5 * MS])


def test_a_busy_engine_keeps_its_accounts_and_waits_longer(catalog: Catalog) -> None:
    """Requests arriving every 4.3 ms (100-token answers, 1 ms steps: ~4 decode-only steps
    between arrivals) at interval 1 and 8: every request completes with the engine's
    invariants checked at each step, and at 8 the first tokens wait longer (an arrival waits
    for the 8th decode step after the last prefill) while the decode pace stays. (Arrivals
    every step would change nothing: a step with a prefill makes the next boundary a look.)"""
    reqs = [request(i, i * 4.3 * MS, 32, 100) for i in range(60)]
    summaries = {}
    for interval in (1, 8):
        config = ServingConfig(
            model="toy/Toy-1B", gpu="toy_gpu", latency_model="constant:0.001",
            scheduler_recv_interval=interval, max_running_requests=256,
        )  # fmt: skip
        source = OpenLoopSource(reqs, BT)
        result = simulate(config, source, seed=0, catalog=catalog, check_invariants=True)
        assert result.summary is not None
        assert result.summary.n_requests == 60
        summaries[interval] = result.summary
    assert summaries[8].ttft_ms.mean > 2 * summaries[1].ttft_ms.mean
    assert summaries[8].tpot_ms.mean == pytest.approx(summaries[1].tpot_ms.mean, rel=0.2)
