"""``paused_gc``: collection off inside, back as it was after (nesting, errors, a caller's own
``gc.disable``), and a simulation's loop runs inside one."""

from __future__ import annotations

import gc
import math
from collections.abc import Iterator

import pytest

from simulator.api import simulate
from simulator.config import ServingConfig
from simulator.core import Kernel
from simulator.core.gc_pause import paused_gc
from simulator.workload.spec import WorkloadSpec


@pytest.fixture(autouse=True)
def _restore_gc() -> Iterator[None]:
    was = gc.isenabled()
    yield
    if was:
        gc.enable()
    else:
        gc.disable()


def test_collection_is_off_inside_and_on_again_after() -> None:
    gc.enable()
    with paused_gc():
        assert not gc.isenabled()
        with paused_gc():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the outer pause is still active
    assert gc.isenabled()


def test_an_error_inside_ends_the_pause() -> None:
    gc.enable()
    with pytest.raises(RuntimeError), paused_gc():
        raise RuntimeError("out of the loop")
    assert gc.isenabled()


def test_a_program_that_turned_collection_off_keeps_it_off() -> None:
    gc.disable()
    with paused_gc():
        assert not gc.isenabled()
    assert not gc.isenabled()


def test_simulate_runs_its_event_loop_with_collection_paused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: list[bool] = []
    run = Kernel.run

    def watched(kernel: Kernel, until_s: float = math.inf) -> None:
        seen.append(gc.isenabled())
        run(kernel, until_s)

    monkeypatch.setattr(Kernel, "run", watched)
    config = ServingConfig(
        model="Qwen/Qwen3-8B",
        gpu="h100_sxm",
        latency_model="constant:0.005",
        kv_capacity_tokens=65536,
    )
    workload = WorkloadSpec.model_validate(
        {
            "kind": "open_loop",
            "requests": 20,
            "arrival": {"process": "poisson", "rate_per_s": 30},
            "input_tokens": 200,
            "output_tokens": 8,
        }
    )
    gc.enable()
    result = simulate(config, workload, seed=0)
    assert result.summary is not None
    assert result.summary.n_requests == 20
    assert seen == [False]
    assert gc.isenabled()
