"""Routers: the registry and the two built-in policies."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from engine_helpers import request

from simulator.cluster import ROUTERS


@dataclass
class _View:
    n_outstanding: int


def test_round_robin_cycles_regardless_of_load() -> None:
    router = ROUTERS["round_robin"](3, np.random.default_rng(0))
    views = [_View(100), _View(0), _View(5)]
    assert [router.route(request(i, 0.0, 16, 1), views) for i in range(7)] == [0, 1, 2, 0, 1, 2, 0]


def test_least_load_picks_the_shortest_queue_lowest_index_on_ties() -> None:
    router = ROUTERS["least_load"](4, np.random.default_rng(0))
    assert router.route(request(0, 0.0, 16, 1), [_View(3), _View(1), _View(2), _View(1)]) == 1
    assert router.route(request(1, 0.0, 16, 1), [_View(0), _View(0), _View(0), _View(0)]) == 0
