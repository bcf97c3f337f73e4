"""The router contract every member of ``ROUTERS`` passes, and each load-only router's rule.

Routers are driven here with fake instance views (a load that the test sets); the tests that
need real instances go through ``simulate`` (``test_routers_simulate.py``).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.cluster.router import ROUTERS, Router, make_router, parse_router_spec
from simulator.cluster.routers.balance import LengthBucketRouter
from simulator.config import ServingConfig
from simulator.workload.request import TraceRequest
from slo.inputfile import InputError, validate

ALL = sorted(ROUTERS)


@dataclass
class View:
    """A fake instance: the loads a router reads, set by the test."""

    outstanding_tokens: int = 0
    n_outstanding: int = 0


def req(index: int, input_length: int = 100, blocks: tuple[int, ...] | None = None) -> TraceRequest:
    """A request; by default one block of its own (no prefix shared with any other)."""
    ids = blocks if blocks is not None else (1_000_000 + index,)
    return TraceRequest(index, float(index), input_length, 10, ids)


def build(spec: str, n: int, seed: int = 0) -> Router:
    return make_router(spec, n, np.random.default_rng(seed))


def drive(router: Router, loads: list[list[int]], requests: list[TraceRequest]) -> list[int]:
    """Route ``requests[i]`` with instance ``j`` at ``loads[i][j]`` outstanding tokens (and
    ``loads[i][j] // 100`` outstanding requests); the choices, in order."""
    out = []
    for request, row in zip(requests, loads, strict=True):
        views = [View(tokens, tokens // 100) for tokens in row]
        out.append(router.route(request, views))
    return out


def _workload(n: int, n_requests: int, seed: int) -> tuple[list[list[int]], list[TraceRequest]]:
    rng = np.random.default_rng(seed)
    loads = rng.integers(0, 20_000, size=(n_requests, n)).tolist()
    # A few shared prefixes so that cache_aware has something to match.
    requests = []
    for i in range(n_requests):
        root = int(rng.integers(4))
        depth = int(rng.integers(0, 6))
        blocks = (*tuple(root * 100 + d for d in range(depth)), 1000000 + i)
        requests.append(req(i, int(rng.integers(1, 40_000)), blocks))
    return loads, requests


# ----- contract: every router ---------------------------------------------------------------------
@pytest.mark.parametrize("name", ALL)
def test_every_router_is_registered_under_its_name(name: str) -> None:
    assert ROUTERS[name].name == name
    cls, params = parse_router_spec(name)
    assert cls is ROUTERS[name]
    assert params == cls.params_model()


@pytest.mark.parametrize("name", ALL)
def test_every_parameter_is_described(name: str) -> None:
    for field_name, field in ROUTERS[name].params_model.model_fields.items():
        assert field.description, f"{name}.{field_name} has no description"


@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("n", [1, 2, 3, 8])
def test_every_router_returns_a_valid_index(name: str, n: int) -> None:
    loads, requests = _workload(n, 300, seed=n)
    choices = drive(build(name, n), loads, requests)
    assert all(0 <= c < n for c in choices)


@pytest.mark.parametrize("name", ALL)
def test_one_instance_always_gets_index_0(name: str) -> None:
    loads, requests = _workload(1, 100, seed=5)
    assert set(drive(build(name, 1), loads, requests)) == {0}


@pytest.mark.parametrize("name", ALL)
def test_every_router_is_deterministic_for_a_seed(name: str) -> None:
    loads, requests = _workload(5, 400, seed=11)
    first = drive(build(name, 5, seed=3), loads, requests)
    again = drive(build(name, 5, seed=3), loads, requests)
    assert first == again


@pytest.mark.parametrize("name", ALL)
def test_routing_never_changes_the_views(name: str) -> None:
    loads, requests = _workload(4, 50, seed=2)
    router = build(name, 4)
    for request, row in zip(requests, loads, strict=True):
        views = [View(t, t // 100) for t in row]
        router.route(request, views)
        assert [(v.outstanding_tokens, v.n_outstanding) for v in views] == [
            (t, t // 100) for t in row
        ]


@pytest.mark.parametrize("name", ALL)
def test_a_request_without_blocks_is_routed(name: str) -> None:
    router = build(name, 3)
    assert 0 <= router.route(req(0, 0, ()), [View(), View(), View()]) < 3


@pytest.mark.parametrize("name", ALL)
def test_every_router_is_a_valid_serving_config_choice(name: str) -> None:
    assert ServingConfig(model="m", gpu="g", router=name).router == name


@pytest.mark.parametrize("name", ALL)
def test_parameters_are_rejected_by_name(name: str) -> None:
    with pytest.raises(ValueError, match=rf"router '{name}': unknown parameter 'bogus'"):
        parse_router_spec(f"{name}:bogus=1")


def test_a_load_aware_router_never_picks_the_strictly_most_loaded_instance() -> None:
    loads, requests = _workload(6, 500, seed=9)
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
