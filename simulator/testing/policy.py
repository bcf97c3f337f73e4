"""The contract every eviction policy of ``POLICIES`` passes (``kvcache/policies/base.py``).

- ``find`` is read-only: probing changes neither later evictions nor later replays;
- through the serve loop the cache never exceeds its capacity, phase 3 never evicts
  (``n_unexpected_eviction == 0``) and every block of a request is resident after its access;
- ``evict`` / ``evict_n`` return resident ids, shrink ``len`` by as many, and never return a
  pinned block when ``supports_pinning``;
- ``remove`` drops a resident block and ignores an absent one;
- a run is deterministic for a seed, in every match mode and replay order.

Each check takes a registry name and raises ``AssertionError`` naming what broke.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator

import numpy as np

from simulator.kvcache.policies import POLICIES, EvictionPolicy, make_policy
from simulator.kvcache.replay import ReplayResult, replay
from simulator.testing._check import fail_unless, must_raise
from simulator.testing.traces import random_prefix_trace
from simulator.workload.future import build_future
from simulator.workload.request import TraceRequest

__all__ = ["CHECKS", "check_policy"]

#: Blocks in the cache of the warm-up checks.
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


def registry_entry_is_consistent(name: str) -> None:
    """Registered under its own name; unknown parameters and a zero capacity are refused."""
    cls = POLICIES[name]
    fail_unless(cls.name == name, f"{name}: registered under another name ({cls.name!r})")
    fail_unless(issubclass(cls, EvictionPolicy), f"{name}: not an EvictionPolicy")
    rng = np.random.default_rng(0)
    must_raise(
        TypeError, lambda: cls(4, rng=rng, no_such_parameter=1), what=f"{name}: bad parameter"
    )
    must_raise(ValueError, lambda: cls(0, rng=rng), match="capacity", what=f"{name}: capacity 0")


def find_is_read_only(name: str) -> None:
    """Probing every block three times changes nothing that follows."""
    probed, trace = _warm(name)
    untouched, _ = _warm(name)
    universe = {b for r in trace for b in r.block_ids} | {10**6}
    resident = {b for b in universe if probed.find(b)}
    # Ascending, descending, then shuffled: a find that refreshed recency would leave the
    # shuffled order behind, which no replay produces.
    ascending = sorted(universe)
    shuffled = np.random.default_rng(0).permutation(ascending).tolist()
    for order in (ascending, ascending[::-1], shuffled):
        for block in order:
            probed.find(block)
    view = probed.resident_view()
    if view is not None:
        fail_unless(
            {b for b in universe if b in view} == resident,
            f"{name}: resident_view disagrees with find",
        )
    fail_unless(len(probed) == len(untouched) == len(resident), f"{name}: find changed the size")
    fail_unless(
        _drain(copy.deepcopy(probed)) == _drain(copy.deepcopy(untouched)),
        f"{name}: find changed the eviction order",
    )
    fail_unless(
        replay(trace[120:], probed) == replay(trace[120:], untouched),
        f"{name}: find changed a later replay",
    )
    fail_unless(
        _drain(probed) == _drain(untouched),
        f"{name}: find changed the eviction order after a replay",
    )


def _checked(
    trace: list[TraceRequest], policy: EvictionPolicy, name: str
) -> Iterator[TraceRequest]:
    """Yield the trace, checking after each request what the serve loop left behind."""
    for request in trace:
        yield request
        # resumed once the loop has served (or skipped) ``request``
        fail_unless(len(policy) <= policy.capacity, f"{name}: over capacity")
        if len(set(request.block_ids)) <= policy.capacity:
            fail_unless(
                all(policy.find(b) for b in request.block_ids),
                f"{name}: a block of request {request.index} is not resident after its access",
            )


def serve_loop_invariants(name: str) -> None:
    """Capacity, residency and the RESULT counters through the serve loop, pinned or not."""
    for seed in (2, 3):
        for pin in (True, False):
            trace = _trace(seed, 220)
            policy = make_policy(name, 16, seed=seed)
            checked = _checked(trace, policy, name)
            # Oracles get their future up front, so the trace still streams through the checks.
            future = build_future(trace).rows() if policy.needs_next_access else None
            result = replay(checked, policy, pin=pin, future=future)  # verify=True: loss raises
            where = f"{name} (seed {seed}, pin {pin})"
            fail_unless(next(checked, None) is None, f"{where}: the trace was not drained")
            fail_unless(result.n_unexpected_eviction == 0, f"{where}: phase 3 evicted")
            fail_unless(
                result.n_req + result.n_req_skipped == len(trace), f"{where}: requests lost"
            )
            fail_unless(result.n_req_skipped > 0, f"{where}: no long request was skipped")
            fail_unless(0.0 <= result.block_hit_ratio <= 1.0, f"{where}: hit ratio out of [0, 1]")
            if pin and policy.supports_pinning:
                fail_unless(result.n_self_eviction == 0, f"{where}: evicted a pinned block")
            fail_unless(result.n_eviction >= result.n_self_eviction, f"{where}: eviction counters")


def evict_returns_resident_blocks_and_shrinks(name: str) -> None:
    """``evict_n(n)`` returns ≥ min(n, size) distinct resident ids and forgets them."""
    policy, trace = _warm(name)
    universe = {b for r in trace for b in r.block_ids}
    for n in (1, 3, 5):
        before = {b for b in universe if policy.find(b)}
        victims = policy.evict_n(n, ())
        where = f"{name}: evict_n({n})"
        fail_unless(len(victims) >= min(n, len(before)), f"{where}: too few victims")
        fail_unless(len(set(victims)) == len(victims), f"{where}: a victim twice")
        fail_unless(set(victims) <= before, f"{where}: a victim that was not resident")
        fail_unless(len(policy) == len(before) - len(victims), f"{where}: size not shrunk")
        fail_unless(not any(policy.find(v) for v in victims), f"{where}: a victim still found")
    before_one = len(policy)
    victims = policy.evict(())
    fail_unless(bool(victims), f"{name}: evict() on a full cache returned nothing")
    fail_unless(len(policy) == before_one - len(victims), f"{name}: evict() size")


def pinned_blocks_are_never_evicted(name: str) -> None:
    """With half the resident blocks pinned, evicting the rest never returns a pinned one."""
    if not POLICIES[name].supports_pinning:
        return  # the policy says it cannot honour pins; the engine refuses it for L1/L2
    for seed in (4, 5, 6):
        policy, trace = _warm(name, seed=seed)
        universe = sorted({b for r in trace for b in r.block_ids})
        resident = [b for b in universe if policy.find(b)]
        rng = np.random.default_rng(seed)
        pinned = set(rng.choice(resident, size=len(resident) // 2, replace=False).tolist())
        n = len(resident) - len(pinned)
        victims = policy.evict_n(n, pinned)
        fail_unless(not set(victims) & pinned, f"{name} (seed {seed}): evicted a pinned block")
        fail_unless(len(victims) >= n, f"{name} (seed {seed}): too few unpinned victims")
        fail_unless(all(policy.find(b) for b in pinned), f"{name}: a pinned block was lost")


def remove_keeps_the_books(name: str) -> None:
    """``remove`` drops a resident block, ignores an absent one, and leaves a working cache."""
    policy, trace = _warm(name)
    universe = sorted({b for r in trace for b in r.block_ids})
    resident = [b for b in universe if policy.find(b)]
    size = len(policy)
    policy.remove(resident[0])
    fail_unless(not policy.find(resident[0]), f"{name}: removed block still found")
    fail_unless(len(policy) == size - 1, f"{name}: remove did not shrink by one")
    policy.remove(resident[0])
    policy.remove(10**6)
    fail_unless(len(policy) == size - 1, f"{name}: removing an absent block changed the size")
    for block in resident[1:]:
        policy.remove(block)
    fail_unless(len(policy) == 0, f"{name}: not empty after removing every block")
    result = replay(trace[120:], policy)
    fail_unless(result.n_unexpected_eviction == 0, f"{name}: broken after removals")


def deterministic_for_a_seed(name: str) -> None:
    """The same seed gives the same replay in every match mode and replay order."""
    for match in ("all", "stop-at-first-miss"):
        for order in ("deepest-first", "prefix-order"):

            def run(seed: int, match: str = match, order: str = order) -> ReplayResult:
                return replay(
                    _trace(7),
                    make_policy(name, CAPACITY, seed=seed),
                    match=match,  # type: ignore[arg-type]
                    replay_order=order,  # type: ignore[arg-type]
                )

            first = run(11)
            where = f"{name} ({match}, {order})"
            fail_unless(run(11) == first, f"{where}: two runs with one seed differ")
            fail_unless(first.n_unexpected_eviction == 0, f"{where}: phase 3 evicted")
            fail_unless(first.n_req > 0, f"{where}: nothing served")


def capacity_one(name: str) -> None:
    """A one-block cache serves every one-block request and keeps the latest block."""
    policy = make_policy(name, 1)
    blocks = [1, 1, 2, 1, 3, 3]
    requests = [TraceRequest(i, float(i), 1, 1, (b,), session_id=b) for i, b in enumerate(blocks)]
    result = replay(requests, policy)
    fail_unless(result.n_blocks == 6, f"{name}: capacity 1 served {result.n_blocks} of 6 blocks")
    fail_unless(result.n_unexpected_eviction == 0, f"{name}: capacity 1, phase 3 evicted")
    fail_unless(len(policy) == 1, f"{name}: capacity 1 holds {len(policy)} blocks")
    fail_unless(policy.find(3), f"{name}: capacity 1 lost the latest block")


#: Every check of the contract by name.
CHECKS: dict[str, Callable[[str], None]] = {
    check.__name__: check
    for check in (
        registry_entry_is_consistent,
        find_is_read_only,
        serve_loop_invariants,
        evict_returns_resident_blocks_and_shrinks,
        pinned_blocks_are_never_evicted,
        remove_keeps_the_books,
        deterministic_for_a_seed,
        capacity_one,
    )
}


def check_policy(name: str) -> None:
    """Run every check of the contract on the policy registered as ``name``."""
    for check in CHECKS.values():
        check(name)
