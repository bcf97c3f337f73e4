"""Workload files of the synthetic open-loop shapes build sources that stream: building holds
no request, every pass over the source draws the same requests afresh, and a simulation sees
exactly what the eager ``list(...)`` of the generator gave."""

from __future__ import annotations

import itertools
import tracemalloc
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from simulator.workload.request import TraceRequest
from simulator.workload.source import OpenLoopSource
from simulator.workload.spec import OpenLoopWorkload, WorkloadSpec
from simulator.workload.synthetic import open_loop

OPEN_LOOP: dict[str, Any] = {
    "kind": "open_loop",
    "requests": 300,
    "arrival": {"process": "gamma", "rate_per_s": 5, "cv": 2},
    "input_tokens": {"dist": "lognormal", "median": 800, "sigma": 0.7, "max": 8000},
    "output_tokens": {"dist": "uniform", "low": 10, "high": 200},
    "system_prompt": {"count": 3, "tokens": 600},
}
SESSIONS: dict[str, Any] = {
    "kind": "sessions",
    "sessions": 40,
    "arrival": {"process": "poisson", "rate_per_s": 0.5},
    "turns": {"dist": "uniform", "low": 1, "high": 6},
    "user_tokens": 300,
    "output_tokens": 120,
    "think_time_s": {"dist": "exponential", "mean": 10},
}


def _fields(requests: list[TraceRequest]) -> list[tuple[Any, ...]]:
    return [(r.timestamp_s, r.input_length, r.output_length, tuple(r.block_ids)) for r in requests]


@pytest.mark.parametrize("shape", [OPEN_LOOP, SESSIONS], ids=["open_loop", "sessions"])
def test_every_pass_draws_the_same_requests(shape: dict[str, Any]) -> None:
    source = WorkloadSpec.model_validate(shape).build(np.random.default_rng(7))
    assert isinstance(source, OpenLoopSource)
    first = list(source.start())
    assert len(first) > 0
    assert _fields(list(source.start())) == _fields(first)


def test_the_stream_is_the_eager_workload() -> None:
    """What ``build`` gave before it streamed: the list of the generator's requests."""
    spec = WorkloadSpec.model_validate(OPEN_LOOP)
    streamed = list(spec.build(np.random.default_rng(3)).start())
    root = spec.root
    assert isinstance(root, OpenLoopWorkload)
    eager = list(
        open_loop(
            n_requests=root.requests,
            arrivals=root.arrival.build(),
            input_tokens=root.input_tokens.build(Path(".")),
            output_tokens=root.output_tokens.build(Path(".")),
            block_tokens=root.block_tokens,
            rng=np.random.default_rng(3),
            system_prompts=(3, 600),
        )
    )
    assert _fields(streamed) == _fields(eager)


def test_building_ten_million_requests_holds_none_of_them() -> None:
    shape = OPEN_LOOP | {"requests": 10_000_000}
    tracemalloc.start()
    try:
        source = WorkloadSpec.model_validate(shape).build(np.random.default_rng(1))
        head = list(itertools.islice(source.start(), 5))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(head) == 5
    assert peak < 64 * 2**20  # the eager list of 1e7 requests took gigabytes
