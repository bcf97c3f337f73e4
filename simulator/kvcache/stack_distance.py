"""Exact LRU hit and compute-saving ratios for every cache size in one pass (Mattson's stack
algorithm adapted to the request-level serve loop of ``simulator.kvcache.replay``).

Why it works (the inclusion property, request-level): let S be the recency stack of every block
ever accessed, updated by the phase-3 access order (deepest first: the root ends on top). If no
request is skipped, the LRU cache of capacity C after every request holds exactly the top C
blocks of S. Induction: a request α with |α| ≤ C moves α to the top of S, keeping the others
in order; phase 2 evicts the least recent blocks *outside* α until α fits (pinned or not: an
LRU self-eviction only reorders α, never changes the set), so what stays is α plus the most
recent C - |α| others, the top C of the new S. Phase 1 probes before any change, so block b of
request r hits at capacity C iff its stack position p(b) (0 = top, before r) is < C.

Skipped requests break inclusion: a request with d distinct blocks is served (and moves S) only
at C ≥ d, so the stack itself depends on C below ``d_max`` (the largest request). Hence:

- **C ≥ d_max**: one pass with every request; a probe of request r (d_r distinct blocks) counts
  as a hit for every C ≥ max(p + 1, d_r) and as a probe for every C ≥ d_r: two histograms
  give every C at once. Exact; the hit ratio is non-decreasing here.
- **C < d_max**: the served set is constant between consecutive distinct request sizes
  t_k ≤ C < t_{k+1}; one pass over the requests with d ≤ t_k is exact on that interval. The
  analyzer runs such passes for a grid of small sizes (each pass costs one full pass).

``stop-at-first-miss`` counts a block only if it and every block before it hit: its threshold
is the running maximum of the request's thresholds. Ids need not be prefix-unique (LRU is a
function of the id sequence), and duplicates inside a request are handled as the serve loop
does (distinct count for the skip rule, every probe counted).

The hot loop is a Fenwick tree over access slots in numba: O(N log N) for N block accesses.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from simulator.core.jit import cached_njit

__all__ = ["StackPass", "distinct_per_request", "stack_pass"]

#: Threshold of a probe that never hits (cold miss, or a request not served in this pass).
NEVER_HIT = np.iinfo(np.int64).max


@cached_njit(nogil=True)
def _kernel(
    ids: NDArray[np.int64],
    offsets: NDArray[np.int64],
    served: NDArray[np.bool_],
    n_ids: int,
    deepest_first: bool,
) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int64]]:
    """Per access: stack position before its request (-1 cold/unserved) and hit threshold
    (all-blocks mode); per request: distinct blocks."""
    n = len(ids)
    n_req = len(offsets) - 1
    tree = np.zeros(n + 2, dtype=np.int64)  # Fenwick over slots 1..n (one slot per access)
    slot = np.zeros(n_ids, dtype=np.int64)  # current slot of each id; 0 = never accessed
    mark = np.full(n_ids, -1, dtype=np.int64)
    position = np.full(n, -1, dtype=np.int64)
    threshold = np.full(n, NEVER_HIT, dtype=np.int64)
    distinct = np.zeros(n_req, dtype=np.int64)
    live = 0
    clock = 0
    for r in range(n_req):
        lo = offsets[r]
        hi = offsets[r + 1]
        d = 0
        for i in range(lo, hi):
            b = ids[i]
            if mark[b] != r:
                mark[b] = r
                d += 1
        distinct[r] = d
        if not served[r]:
            continue
        for i in range(lo, hi):  # phase 1: positions before the request
            s = slot[ids[i]]
            if s > 0:
                below = 0  # slots <= s
                j = s
                while j > 0:
                    below += tree[j]
                    j -= j & -j
                p = live - below
                position[i] = p
                threshold[i] = max(p + 1, d)
        for k in range(hi - lo):  # phase 3: LRU accesses in replay order
            i = hi - 1 - k if deepest_first else lo + k
            b = ids[i]
            s = slot[b]
            if s > 0:
                j = s
                while j <= n:
                    tree[j] -= 1
                    j += j & -j
            else:
                live += 1
            clock += 1
            slot[b] = clock
            j = clock
            while j <= n:
                tree[j] += 1
                j += j & -j
    return position, threshold, distinct


@cached_njit(nogil=True)
def _distinct(ids: NDArray[np.int64], offsets: NDArray[np.int64], n_ids: int) -> NDArray[np.int64]:
    mark = np.full(n_ids, -1, dtype=np.int64)
    out = np.zeros(len(offsets) - 1, dtype=np.int64)
    for r in range(len(offsets) - 1):
        for i in range(offsets[r], offsets[r + 1]):
            if mark[ids[i]] != r:
                mark[ids[i]] = r
                out[r] += 1
    return out


def distinct_per_request(
    ids: NDArray[np.int64], offsets: NDArray[np.int64], n_ids: int
) -> NDArray[np.int64]:
    """Distinct blocks of each request (dense ids ``0 .. n_ids - 1``)."""
    return _distinct(
        np.ascontiguousarray(ids, dtype=np.int64),
        np.ascontiguousarray(offsets, dtype=np.int64),
        int(n_ids),
    )


@cached_njit(nogil=True)
def _running_max(threshold: NDArray[np.int64], offsets: NDArray[np.int64]) -> NDArray[np.int64]:
    out = threshold.copy()
    for r in range(len(offsets) - 1):
        top = 0
        for i in range(offsets[r], offsets[r + 1]):
            top = max(top, out[i])
            out[i] = top
    return out


@dataclass(frozen=True, slots=True, eq=False)
class StackPass:
    """One pass: per access its stack position and hit threshold, per request its distinct
    block count. ``threshold[i] = T`` means access i hits for every capacity C ≥ T."""

    position: NDArray[np.int64]
    """Blocks above the accessed one in the recency stack before its request; -1 = cold or
    the request was not served in this pass."""
    threshold: NDArray[np.int64]
    """Smallest capacity at which the access hits (all-blocks matching); ``NEVER_HIT`` if none."""
    distinct: NDArray[np.int64]
    """Distinct blocks per request (the skip rule: served iff distinct ≤ C)."""

    def stop_at_first_miss(self, offsets: NDArray[np.int64]) -> NDArray[np.int64]:
        """Thresholds under ``stop-at-first-miss`` matching (running max per request)."""
        return _running_max(self.threshold, offsets)


def stack_pass(
    ids: NDArray[np.int64],
    offsets: NDArray[np.int64],
    n_ids: int,
    *,
    served: NDArray[np.bool_] | None = None,
    deepest_first: bool = True,
) -> StackPass:
    """Run the stack algorithm over dense ids ``0 .. n_ids - 1``.

    ``offsets`` (n_requests + 1, starting at 0) delimits requests in ``ids``; ``served`` (default:
    all) selects the requests this pass serves (the others are neither probed nor applied).
    """
    if served is None:
        served = np.ones(len(offsets) - 1, dtype=np.bool_)
    position, threshold, distinct = _kernel(
        np.ascontiguousarray(ids, dtype=np.int64),
        np.ascontiguousarray(offsets, dtype=np.int64),
        np.ascontiguousarray(served, dtype=np.bool_),
        int(n_ids),
        bool(deepest_first),
    )
    return StackPass(position, threshold, distinct)
