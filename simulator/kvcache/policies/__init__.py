"""Eviction policies: the ``EvictionPolicy`` protocol and the registry ``POLICIES``.

``POLICIES`` maps a policy's ``name`` to its class; CLI choices and search-space names derive
from it, and the contract suite (``tests/kvcache/test_policy_contract.py``) runs over every entry.
Adding a policy = one module with one class + one name in the tuple below.
"""

from __future__ import annotations

import numpy as np

from simulator.kvcache.policies.base import NEVER, EvictionPolicy, RequestContext
from simulator.kvcache.policies.clock import Clock
from simulator.kvcache.policies.fifo import FIFO
from simulator.kvcache.policies.lfu import LFU
from simulator.kvcache.policies.lru import LRU
from simulator.kvcache.policies.sieve import Sieve
from simulator.kvcache.policies.slru import SLRU

# --- advanced policies (owned by the advanced-policies engineer): imports go here -------------
# isort: split
from simulator.kvcache.policies.arc import Arc
from simulator.kvcache.policies.asym_cache import AsymCache
from simulator.kvcache.policies.belady import Belady, BeladyCompute
from simulator.kvcache.policies.gdsf import Gdsf, GdsfCompute
from simulator.kvcache.policies.lirs import Lirs
from simulator.kvcache.policies.partial_node import PartialNodeRandomCompute, PartialNodeRandomFreq
from simulator.kvcache.policies.random_compute import RandomCompute, RandomComputeSmallQueue
from simulator.kvcache.policies.s3fifo import S3Fifo
from simulator.kvcache.policies.s3fifod import S3FifoD
from simulator.kvcache.policies.session import SessionBelady, SessionLru
from simulator.kvcache.policies.session_variants import (
    SessionArc,
    SessionRandomCompute,
    SessionS3Fifo,
)
from simulator.kvcache.policies.twoq import TwoQ
from simulator.kvcache.policies.workload_aware import WorkloadAware
from simulator.kvcache.policies.wtinylfu import WTinyLfu

# --- end advanced policies --------------------------------------------------------------------

__all__ = ["NEVER", "POLICIES", "EvictionPolicy", "RequestContext", "make_policy"]

_CLASSES: tuple[type[EvictionPolicy], ...] = (
    LRU,
    FIFO,
    Clock,
    Sieve,
    SLRU,
    LFU,
    # --- advanced policies: one class per line below ---------------------------------------
    Arc,
    TwoQ,
    Lirs,
    S3Fifo,
    S3FifoD,
    WTinyLfu,
    Gdsf,
    GdsfCompute,
    Belady,
    BeladyCompute,
    RandomCompute,
    RandomComputeSmallQueue,
    PartialNodeRandomCompute,
    PartialNodeRandomFreq,
    AsymCache,
    SessionLru,
    SessionBelady,
    SessionRandomCompute,
    SessionS3Fifo,
    SessionArc,
    WorkloadAware,
    # --- end advanced policies ---------------------------------------------------------------
)

#: Every policy by name (``lru``, ``fifo``, …); a plain dict, no other registration step.
POLICIES: dict[str, type[EvictionPolicy]] = {cls.name: cls for cls in _CLASSES}


def make_policy(name: str, capacity: int, *, seed: int = 0, **params: object) -> EvictionPolicy:
    """Build policy ``name`` with ``capacity`` blocks and its own generator seeded by ``seed``.

    Raises ``KeyError`` naming the known policies for an unknown name.
    """
    try:
        cls = POLICIES[name]
    except KeyError:
        raise KeyError(f"unknown policy {name!r}; known: {', '.join(sorted(POLICIES))}") from None
    return cls(capacity, rng=np.random.default_rng(seed), **params)
