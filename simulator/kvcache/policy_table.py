"""What each policy needs and guarantees: the table ``kvplan replay --list-policies`` prints.

Columns: pins honoured (verified, not assumed: ``PINS_VERIFIED`` is exactly the set of policies
that ``tests/kvcache/test_pin_safety.py`` replayed with pinning on — random prefix traces and the
bundled Mooncake traces at small caches — and saw no self-eviction; the test fails if a policy
is added without being replayed, or if a listed one self-evicts), needs future (an oracle:
the replay annotates next accesses), needs request context (overrides ``set_request_ctx`` or
``record_request``: sessions, categories, timestamps, prefix-tree nodes), clock (what the
policy measures age in, ``EvictionPolicy.clock``) and parameters (``--algo name:key=value``).
"""

from __future__ import annotations

from dataclasses import dataclass

from simulator.kvcache.params import policy_params
from simulator.kvcache.policies import POLICIES, EvictionPolicy

__all__ = ["PINS_VERIFIED", "PolicyInfo", "policy_table"]

#: Policies replayed with pinning by the pin-safety test and found never to self-evict.
PINS_VERIFIED: frozenset[str] = frozenset(
    {
        "arc", "asym_cache", "belady", "belady_compute", "clock", "fifo", "gdsf", "gdsf_compute",
        "lfu", "lirs", "lru", "partial_node_random_compute", "partial_node_random_freq",
        "random_compute", "random_compute_small_queue", "s3fifo", "s3fifod", "session_belady",
        "session_arc", "session_lru", "session_random_compute", "session_s3fifo", "sieve",
        "slru", "twoq", "workload_aware", "wtinylfu",
    }
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class PolicyInfo:
    """One row of the policy table."""

    name: str
    pins_honoured: bool
    """Declared (``supports_pinning``) and verified by replay (``PINS_VERIFIED``)."""
    needs_future: bool
    needs_context: bool
    clock: str
    params: str
    """``key=<type, default>`` of every constructor parameter, or ``-``."""


def _uses_context(cls: type[EvictionPolicy]) -> bool:
    return (
        cls.set_request_ctx is not EvictionPolicy.set_request_ctx
        or cls.record_request is not EvictionPolicy.record_request
    )


def policy_table() -> list[PolicyInfo]:
    """Every registered policy, in registry order."""
    return [
        PolicyInfo(
            name=name,
            pins_honoured=cls.supports_pinning and name in PINS_VERIFIED,
            needs_future=cls.needs_next_access,
            needs_context=_uses_context(cls),
            clock=cls.clock,
            params=" ".join(p.describe() for p in policy_params(cls).values()) or "-",
        )
        for name, cls in POLICIES.items()
    ]
