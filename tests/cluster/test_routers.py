"""The router contract every member of ``ROUTERS`` passes, and each load-only router's rule.

Routers are driven here with fake instance views (a load that the test sets); the tests that
need real instances go through ``simulate`` (``test_routers_simulate.py``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import ClassVar

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.cluster.router import ROUTERS, Router, make_router, parse_router_spec
from simulator.cluster.routers.balance import LengthBucketRouter
from simulator.cluster.routers.base import InstanceView
from simulator.config import ServingConfig
from simulator.testing import router as router_kit
from simulator.testing.router import View, drive, routing_workload
from simulator.workload.request import TraceRequest
from slo.inputfile import InputError, validate

ALL = sorted(ROUTERS)


def req(index: int, input_length: int = 100, blocks: tuple[int, ...] | None = None) -> TraceRequest:
    """A request; by default one block of its own (no prefix shared with any other)."""
    ids = blocks if blocks is not None else (1_000_000 + index,)
    return TraceRequest(index, float(index), input_length, 10, ids)


def build(spec: str, n: int, seed: int = 0) -> Router:
    return make_router(spec, n, np.random.default_rng(seed))


# ----- contract: every router (simulator/testing/router.py) ---------------------------------------
@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("check", sorted(router_kit.CHECKS))
def test_every_router_passes_the_contract(check: str, name: str) -> None:
    router_kit.CHECKS[check](name)


class _BrokenIndex(Router):
    """A broken router: it answers an index one past the last instance when all are idle."""

    name: ClassVar[str] = "broken_index"

    def route(self, request: TraceRequest, instances: Sequence[InstanceView]) -> int:
        del request
        return len(instances) if instances[0].outstanding_tokens == 0 else 0


def test_the_contract_catches_a_router_that_breaks_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(ROUTERS, _BrokenIndex.name, _BrokenIndex)
    with pytest.raises(AssertionError, match="broken_index: a request without blocks got index 3"):
        router_kit.CHECKS["routes_a_request_without_blocks"]("broken_index")


def test_a_load_aware_router_never_picks_the_strictly_most_loaded_instance() -> None:
    loads, requests = routing_workload(6, 500, seed=9)
    for name in ("least_load", "power_of_two"):
        choices = drive(build(name, 6), loads, requests)
        for row, choice in zip(loads, choices, strict=True):
            if row.count(max(row)) == 1:
                assert row[choice] != max(row), name
        if name == "least_load":
            assert all(row[c] == min(row) for row, c in zip(loads, choices, strict=True))


# ----- router specs in the config -----------------------------------------------------------------
@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("cache_aware:cache_threshold=0.5, balance_abs=32", {"cache_threshold": 0.5}),
        ("cache_aware:fallback=smallest_tree", {"fallback": "smallest_tree"}),
        ("length_bucket:boundaries=1024/8192", {"boundaries": (1024, 8192)}),
        ("length_bucket:boundaries=300", {"boundaries": (300,)}),
        ("cache_aware:", {"cache_threshold": 0.3}),
    ],
)
def test_specs_parse_into_typed_parameters(spec: str, expected: dict[str, object]) -> None:
    _, params = parse_router_spec(spec)
    for key, value in expected.items():
        assert getattr(params, key) == value


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("magic", "unknown router 'magic'"),
        ("cache_aware:cache_threshold", "expected key=value"),
        ("cache_aware:cache_threshold=1.5", "cache_threshold"),
        ("cache_aware:balance_rel=0.5", "balance_rel"),
        ("cache_aware:balance_abs=1,balance_abs=2", "given twice"),
        ("cache_aware:fallback=oldest", "fallback"),
        ("length_bucket:boundaries=8192/1024", "strictly increasing"),
        ("length_bucket:boundaries=a/b", "boundaries"),
        ("round_robin:k=1", "takes no parameters"),
    ],
)
def test_bad_specs_fail_with_one_line(spec: str, message: str) -> None:
    with pytest.raises(ValueError, match=message) as err:
        parse_router_spec(spec)
    assert "\n" not in str(err.value)
    with pytest.raises(InputError, match="router"):
        validate(ServingConfig, {"model": "m", "gpu": "g", "router": spec}, "config.yaml")


def test_a_router_refuses_another_routers_parameters() -> None:
    _, params = parse_router_spec("length_bucket")
    with pytest.raises(TypeError):
        ROUTERS["cache_aware"](2, np.random.default_rng(0), params)


# ----- the rules of the load-only routers ---------------------------------------------------------
def test_round_robin_is_exact_whatever_the_load() -> None:
    router = build("round_robin", 3)
    views = [View(100_000, 100), View(0, 0), View(5, 1)]
    assert [router.route(req(i), views) for i in range(7)] == [0, 1, 2, 0, 1, 2, 0]


def test_least_load_counts_tokens_then_requests_then_index() -> None:
    router = build("least_load", 4)
    assert router.route(req(0), [View(300, 1), View(100, 9), View(200, 0), View(100, 2)]) == 3
    assert router.route(req(1), [View(5, 1), View(5, 1), View(5, 1), View(5, 1)]) == 0
    assert router.route(req(2), [View(7, 3), View(5, 4), View(5, 4), View(6, 0)]) == 1


def test_random_is_uniform_and_depends_on_the_seed() -> None:
    views = [View()] * 4
    router = build("random", 4, seed=1)
    choices = [router.route(req(i), views) for i in range(8000)]
    counts = Counter(choices)
    assert all(abs(counts[i] - 2000) < 200 for i in range(4)), counts
    other = build("random", 4, seed=2)
    assert [other.route(req(i), views) for i in range(8000)] != choices


def test_power_of_two_picks_the_less_loaded_of_two_distinct_candidates() -> None:
    # Two instances: both are always the candidates, so it is least_load.
    router = build("power_of_two", 2)
    assert {router.route(req(i), [View(9), View(3)]) for i in range(50)} == {1}
    # Four instances loaded 0 < 1 < 2 < 3: instance k wins a pair iff the other is above it,
    # so over uniform distinct pairs P(k) = (3 - k) / 6.
    router = build("power_of_two", 4, seed=7)
    views = [View(k * 10, k) for k in range(4)]
    counts = Counter(router.route(req(i), views) for i in range(12_000))
    assert counts[3] == 0
    for k in range(3):
        assert abs(counts[k] / 12_000 - (3 - k) / 6) < 0.02, counts


def test_length_bucket_splits_instances_evenly_in_order() -> None:
    router = make_router("length_bucket:boundaries=100/1000", 8, np.random.default_rng(0))
    assert isinstance(router, LengthBucketRouter)
    assert router.groups == (range(2), range(2, 5), range(5, 8))
    few = make_router("length_bucket:boundaries=100/1000/5000", 2, np.random.default_rng(0))
    assert isinstance(few, LengthBucketRouter)
    assert few.groups == (range(1), range(1), range(1, 2), range(1, 2))


@pytest.mark.parametrize(
    ("length", "group"),
    [(1, 0), (99, 0), (100, 1), (999, 1), (1000, 2), (10**6, 2)],
)
def test_length_bucket_routes_by_prompt_length(length: int, group: int) -> None:
    router = build("length_bucket:boundaries=100/1000", 6)
    groups = [range(2), range(2, 4), range(4, 6)]
    # Load each group's first instance more, so the least loaded is its second instance.
    views = [View(50 if i % 2 == 0 else 10) for i in range(6)]
    choice = router.route(req(0, length), views)
    assert choice in groups[group]
    assert choice == groups[group][1]


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(1, 9),
    boundaries=st.lists(st.integers(1, 50_000), min_size=1, max_size=5, unique=True),
    length=st.integers(0, 100_000),
)
def test_length_bucket_groups_cover_every_instance(
    n: int, boundaries: list[int], length: int
) -> None:
    spec = "length_bucket:boundaries=" + "/".join(str(b) for b in sorted(boundaries))
    router = make_router(spec, n, np.random.default_rng(0))
    assert isinstance(router, LengthBucketRouter)
    covered = sorted({i for group in router.groups for i in group})
    assert covered == list(range(n))
    assert all(len(group) >= 1 for group in router.groups)
    if n >= len(router.groups):  # a partition: no instance serves two buckets
        assert sum(len(group) for group in router.groups) == n
    choice = router.route(req(0, length), [View()] * n)
    assert choice in router.groups[router.bucket(length)]
