"""The contract every eviction policy passes, run over every entry of ``POLICIES``.

What is checked (``simulator/kvcache/policies/base.py`` states the contract):
- ``find`` is read-only: probing changes neither later evictions nor later replays;
- through the serve loop the cache never exceeds its capacity, phase 3 never evicts
  (``n_unexpected_eviction == 0``) and every block of a request is resident after its access;
- ``evict``/``evict_n`` return resident ids, shrink ``len`` by as many, and never return a
  pinned block when ``supports_pinning``;
- ``remove`` drops a resident block and ignores an absent one;
- a run is deterministic for a seed, in every match mode and replay order.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest
from kvcache_helpers import random_prefix_trace

from simulator.kvcache.policies import POLICIES, EvictionPolicy, make_policy
from simulator.kvcache.replay import ReplayResult, replay
from simulator.workload.future import build_future
from simulator.workload.request import TraceRequest

NAMES = sorted(POLICIES)
CAPACITY = 24


def _trace(seed: int, n: int = 160) -> list[TraceRequest]:
    return random_prefix_trace(np.random.default_rng(seed), n, max_new=8, sessions=7)


def _warm(name: str, seed: int = 1, n: int = 120) -> tuple[EvictionPolicy, list[TraceRequest]]:
    """A policy that served ``n`` requests (full, with a history), and the whole trace."""
    trace = _trace(seed)
    policy = make_policy(name, CAPACITY, seed=seed)
    replay(trace[:n], policy)
    return policy, trace


def _drain(policy: EvictionPolicy) -> list[int]:
    victims: list[int] = []
    while len(policy):
        victims += policy.evict_n(1, ())
    return victims


@pytest.mark.parametrize("name", NAMES)
def test_registry_entry_is_consistent(name: str) -> None:
    cls = POLICIES[name]
    assert cls.name == name
    assert issubclass(cls, EvictionPolicy)
    with pytest.raises(TypeError):
        cls(4, rng=np.random.default_rng(0), no_such_parameter=1)
    with pytest.raises(ValueError, match="capacity"):
        cls(0, rng=np.random.default_rng(0))


@pytest.mark.parametrize("name", NAMES)
def test_find_is_read_only(name: str) -> None:
    probed, trace = _warm(name)
    untouched, _ = _warm(name)
    universe = {b for r in trace for b in r.block_ids} | {10**6}
    resident = {b for b in universe if probed.find(b)}
    for _ in range(3):
        for block in sorted(universe):
            probed.find(block)
    view = probed.resident_view()
    if view is not None:
        assert {b for b in universe if b in view} == resident
    assert len(probed) == len(untouched) == len(resident)
    # the future is unchanged: the same replay of the rest, then the same eviction order
    assert replay(trace[120:], probed) == replay(trace[120:], untouched)
    assert _drain(probed) == _drain(untouched)


def _checked(trace: list[TraceRequest], policy: EvictionPolicy) -> Iterator[TraceRequest]:
    """Yield the trace, checking after each request what the serve loop left behind."""
    for request in trace:
        yield request
        # resumed once the loop has served (or skipped) ``request``
        assert len(policy) <= policy.capacity
        if len(set(request.block_ids)) <= policy.capacity:
            assert all(policy.find(b) for b in request.block_ids)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("seed", [2, 3])
@pytest.mark.parametrize("pin", [True, False])
def test_serve_loop_invariants(name: str, seed: int, pin: bool) -> None:
    trace = _trace(seed, 220)
    policy = make_policy(name, 16, seed=seed)
    checked = _checked(trace, policy)
    # Oracles get their future up front, so the trace still streams through the checks.
    future = build_future(trace).rows() if policy.needs_next_access else None
    result = replay(checked, policy, pin=pin, future=future)  # verify=True: loss raises
    assert next(checked, None) is None  # drained: every check ran
    assert result.n_unexpected_eviction == 0
    assert result.n_req + result.n_req_skipped == len(trace)
    assert result.n_req_skipped > 0  # the trace has requests longer than 16 blocks
    assert 0.0 <= result.block_hit_ratio <= 1.0
    if pin and policy.supports_pinning:
        assert result.n_self_eviction == 0
    assert result.n_eviction >= result.n_self_eviction


@pytest.mark.parametrize("name", NAMES)
def test_evict_returns_resident_blocks_and_shrinks(name: str) -> None:
    policy, trace = _warm(name)
    universe = {b for r in trace for b in r.block_ids}
    for n in (1, 3, 5):
        before = {b for b in universe if policy.find(b)}
        victims = policy.evict_n(n, ())
        assert len(victims) >= min(n, len(before))
        assert len(set(victims)) == len(victims)
        assert set(victims) <= before
        assert len(policy) == len(before) - len(victims)
        assert not any(policy.find(v) for v in victims)
    before_one = len(policy)
    victims = policy.evict(())
    assert victims
    assert len(policy) == before_one - len(victims)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("seed", [4, 5, 6])
def test_pinned_blocks_are_never_evicted(name: str, seed: int) -> None:
    if not POLICIES[name].supports_pinning:
        pytest.skip(f"{name} does not support pinning")
    policy, trace = _warm(name, seed=seed)
    universe = sorted({b for r in trace for b in r.block_ids})
    resident = [b for b in universe if policy.find(b)]
    rng = np.random.default_rng(seed)
    pinned = set(rng.choice(resident, size=len(resident) // 2, replace=False).tolist())
    n = len(resident) - len(pinned)
    victims = policy.evict_n(n, pinned)
    assert not set(victims) & pinned
    assert len(victims) >= n
    assert all(policy.find(b) for b in pinned)


@pytest.mark.parametrize("name", NAMES)
def test_remove(name: str) -> None:
    policy, trace = _warm(name)
    universe = sorted({b for r in trace for b in r.block_ids})
    resident = [b for b in universe if policy.find(b)]
    size = len(policy)
    policy.remove(resident[0])
    assert not policy.find(resident[0])
    assert len(policy) == size - 1
    policy.remove(resident[0])
    policy.remove(10**6)
    assert len(policy) == size - 1
    for block in resident[1:]:
        policy.remove(block)
    assert len(policy) == 0
    # still a working cache afterwards
    result = replay(trace[120:], policy)
    assert result.n_unexpected_eviction == 0


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("match", ["all", "stop-at-first-miss"])
@pytest.mark.parametrize("order", ["deepest-first", "prefix-order"])
def test_deterministic_for_a_seed(name: str, match: str, order: str) -> None:
    def run(seed: int) -> ReplayResult:
        return replay(
            _trace(7),
            make_policy(name, CAPACITY, seed=seed),
            match=match,  # type: ignore[arg-type]
            replay_order=order,  # type: ignore[arg-type]
        )

    first = run(11)
    assert run(11) == first
    assert first.n_unexpected_eviction == 0
    assert first.n_req > 0


@pytest.mark.parametrize("name", NAMES)
def test_capacity_one(name: str) -> None:
    policy = make_policy(name, 1)
    blocks = [1, 1, 2, 1, 3, 3]
    requests = [TraceRequest(i, float(i), 1, 1, (b,), session_id=b) for i, b in enumerate(blocks)]
    result = replay(requests, policy)
    assert result.n_blocks == 6
    assert result.n_unexpected_eviction == 0
    assert len(policy) == 1
    assert policy.find(3)
