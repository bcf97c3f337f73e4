"""The contract every router of ``ROUTERS`` passes (``cluster/routers/base.py``).

Routers are driven with stand-in instance views whose loads the check sets (a router may read only
``n_outstanding`` and ``outstanding_tokens``); what needs real instances is tested through
``simulate``. Checks: registered under its name with described parameters; a valid index for 1–8
instances under random loads and shared prefixes; index 0 for one instance; only the routable prefix
of an autoscaled pool, and ``forget`` of a stopped instance; deterministic for a seed; views left
unchanged; a request without blocks is routed; a valid ``ServingConfig.router``; an unknown
parameter refused by name.

Each check takes a registry name and raises ``AssertionError`` naming what broke.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from simulator.cluster.router import ROUTERS, Router, make_router, parse_router_spec
from simulator.config import ServingConfig
from simulator.testing._check import fail_unless, must_raise
from simulator.workload.request import TraceRequest

__all__ = ["CHECKS", "View", "check_router", "drive", "routing_workload"]


@dataclass
class View:
    """A stand-in instance: the loads a router reads, set by the caller."""

    outstanding_tokens: int = 0
    n_outstanding: int = 0


def _request(index: int, input_length: int, blocks: tuple[int, ...]) -> TraceRequest:
    return TraceRequest(index, float(index), input_length, 10, blocks)


def drive(router: Router, loads: list[list[int]], requests: list[TraceRequest]) -> list[int]:
    """Route ``requests[i]`` with instance ``j`` at ``loads[i][j]`` outstanding tokens (and
    ``loads[i][j] // 100`` outstanding requests); the choices, in order."""
    out = []
    for request, row in zip(requests, loads, strict=True):
        views = [View(tokens, tokens // 100) for tokens in row]
        out.append(router.route(request, views))
    return out


def routing_workload(
    n: int, n_requests: int, seed: int
) -> tuple[list[list[int]], list[TraceRequest]]:
    """Random loads (0–20,000 tokens per instance) and requests sharing a few prefixes (so a
    cache-aware router has something to match), 1–40,000 prompt tokens each."""
    rng = np.random.default_rng(seed)
    loads = rng.integers(0, 20_000, size=(n_requests, n)).tolist()
    requests = []
    for i in range(n_requests):
        root = int(rng.integers(4))
        depth = int(rng.integers(0, 6))
        blocks = (*tuple(root * 100 + d for d in range(depth)), 1_000_000 + i)
        requests.append(_request(i, int(rng.integers(1, 40_000)), blocks))
    return loads, requests


def _build(spec: str, n: int, seed: int = 0) -> Router:
    return make_router(spec, n, np.random.default_rng(seed))


def registered_under_its_name(name: str) -> None:
    """The registry key is the class's name and the bare spec parses to its default params."""
    fail_unless(ROUTERS[name].name == name, f"{name}: registered under another name")
    cls, params = parse_router_spec(name)
    fail_unless(cls is ROUTERS[name], f"{name}: the spec parses to another class")
    fail_unless(params == cls.params_model(), f"{name}: the bare spec is not the defaults")


def every_parameter_is_described(name: str) -> None:
    """Every field of the parameters model has a description (``--help`` shows it)."""
    for field_name, field in ROUTERS[name].params_model.model_fields.items():
        fail_unless(bool(field.description), f"{name}.{field_name} has no description")


def returns_a_valid_index(name: str) -> None:
    """An index in ``[0, n)`` for 1, 2, 3 and 8 instances; always 0 for one instance."""
    for n in (1, 2, 3, 8):
        loads, requests = routing_workload(n, 300, seed=n)
        choices = drive(_build(name, n), loads, requests)
        fail_unless(all(0 <= c < n for c in choices), f"{name}: an index outside [0, {n})")
    loads, requests = routing_workload(1, 100, seed=5)
    fail_unless(set(drive(_build(name, 1), loads, requests)) == {0}, f"{name}: one instance")


def deterministic_for_a_seed(name: str) -> None:
    """The same seed and inputs give the same choices."""
    loads, requests = routing_workload(5, 400, seed=11)
    first = drive(_build(name, 5, seed=3), loads, requests)
    fail_unless(drive(_build(name, 5, seed=3), loads, requests) == first, f"{name}: not repeatable")


def never_changes_the_views(name: str) -> None:
    """Routing reads the instance views and changes none of them."""
    loads, requests = routing_workload(4, 50, seed=2)
    router = _build(name, 4)
    for request, row in zip(requests, loads, strict=True):
        views = [View(t, t // 100) for t in row]
        router.route(request, views)
        after = [(v.outstanding_tokens, v.n_outstanding) for v in views]
        fail_unless(after == [(t, t // 100) for t in row], f"{name}: routing changed a view")


def routes_within_the_routable_prefix(name: str) -> None:
    """With 3 of 5 instances routable (an autoscaled pool), every index is below 3; after
    instances 3 and 4 stop (``forget``) and come back, all 5 are used again."""
    loads, requests = routing_workload(5, 300, seed=8)
    router = _build(name, 5)
    shrunk = [row[:3] for row in loads[:150]]
    choices = drive(router, shrunk, requests[:150])
    fail_unless(all(0 <= c < 3 for c in choices), f"{name}: routed outside the routable prefix")
    router.forget(3)
    router.forget(4)
    choices = drive(router, loads[150:], requests[150:])
    fail_unless(all(0 <= c < 5 for c in choices), f"{name}: an index outside [0, 5) after regrow")


def routes_a_request_without_blocks(name: str) -> None:
    """An empty prompt (no blocks) still gets an instance."""
    choice = _build(name, 3).route(_request(0, 0, ()), [View(), View(), View()])
    fail_unless(0 <= choice < 3, f"{name}: a request without blocks got index {choice}")


def is_a_serving_config_choice(name: str) -> None:
    """``ServingConfig.router`` accepts the name."""
    config = ServingConfig(model="m", gpu="g", router=name)
    fail_unless(config.router == name, f"{name}: not kept by ServingConfig")


def refuses_unknown_parameters_by_name(name: str) -> None:
    """``name:bogus=1`` is a one-line ``ValueError`` naming the router and the parameter."""
    must_raise(
        ValueError,
        lambda: parse_router_spec(f"{name}:bogus=1"),
        match=rf"router '{re.escape(name)}': unknown parameter 'bogus'",
        what=f"{name}: an unknown parameter",
    )


#: Every check of the contract by name.
CHECKS: dict[str, Callable[[str], None]] = {
    check.__name__: check
    for check in (
        registered_under_its_name,
        every_parameter_is_described,
        returns_a_valid_index,
        deterministic_for_a_seed,
        never_changes_the_views,
        routes_within_the_routable_prefix,
        routes_a_request_without_blocks,
        is_a_serving_config_choice,
        refuses_unknown_parameters_by_name,
    )
}


def check_router(name: str) -> None:
    """Run every check of the contract on the router registered as ``name``."""
    for check in CHECKS.values():
        check(name)
