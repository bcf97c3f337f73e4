"""Distributions a cache planner reads off a trace (``kvplan analyze``), all vectorised numpy.

- reuse distance: the LRU stack distance of every re-access (distinct blocks touched since the
  block's previous access; what LRU capacity would have kept it), in blocks;
- reuse time: between consecutive accesses of a block by different requests, in seconds and
  in requests; block lifetime: first to last access of a block accessed by ≥ 2 requests;
- prefix sharing: blocks (and accesses to blocks) that more than one session touches; a trace
  without session ids (Mooncake) counts each request as its own session;
- session footprint: distinct blocks per session; request lengths: blocks, input and output
  tokens per request.

Every distribution is a ``Distribution``: count, mean, percentiles, max and counts in
power-of-two buckets.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from simulator.kvcache.lru_curve import TraceArrays

__all__ = ["Distribution", "SharingStats", "TraceStats", "distribution", "trace_stats"]

PERCENTILES = (50.0, 90.0, 99.0, 99.9)


@dataclass(frozen=True, slots=True)
class Distribution:
    """Summary of non-negative samples; ``buckets[k]`` counts samples in [2^(k-1), 2^k) for
    k ≥ 1 and exact zeros (and fractions below 1) in bucket 0."""

    n: int
    mean: float
    percentiles: dict[str, float]
    """``"p50"``, ``"p90"``, ``"p99"``, ``"p99.9"``."""
    max: float
    buckets: list[int]

    def bucket_labels(self) -> list[str]:
        """``"<1"``, ``"1"``, ``"2-3"``, ``"4-7"``, … for ``buckets``."""
        labels = ["<1"]
        for k in range(1, len(self.buckets)):
            lo, hi = 1 << (k - 1), (1 << k) - 1
            labels.append(str(lo) if lo == hi else f"{lo}-{hi}")
        return labels


def distribution(samples: NDArray[np.floating] | NDArray[np.integer]) -> Distribution:
    """Summarise ``samples`` (empty -> all zeros)."""
    values = np.asarray(samples, dtype=np.float64)
    if not len(values):
        return Distribution(0, 0.0, {f"p{p:g}": 0.0 for p in PERCENTILES}, 0.0, [])
    pct = np.percentile(values, PERCENTILES)
    exponents = np.where(values >= 1.0, np.floor(np.log2(np.maximum(values, 1.0))) + 1, 0)
    buckets = np.bincount(exponents.astype(np.int64)).tolist()
    return Distribution(
        n=len(values),
        mean=float(values.mean()),
        percentiles={f"p{p:g}": float(v) for p, v in zip(PERCENTILES, pct, strict=True)},
        max=float(values.max()),
        buckets=buckets,
    )


@dataclass(frozen=True, slots=True)
class SharingStats:
    """Blocks touched by more than one session."""

    n_sessions: int
    sessions_known: bool
    """False when the trace has no session ids (each request counted as its own session)."""
    n_blocks: int
    """Distinct blocks."""
    shared_blocks: int
    accesses: int
    shared_accesses: int

    @property
    def shared_block_share(self) -> float:
        return self.shared_blocks / self.n_blocks if self.n_blocks else 0.0

    @property
    def shared_access_share(self) -> float:
        return self.shared_accesses / self.accesses if self.accesses else 0.0


@dataclass(frozen=True, slots=True)
class TraceStats:
    """Everything but the curve."""

    reuse_distance_blocks: Distribution
    reuse_time_s: Distribution
    reuse_time_requests: Distribution
    lifetime_s: Distribution
    lifetime_requests: Distribution
    sharing: SharingStats
    session_footprint_blocks: Distribution
    request_blocks: Distribution
    input_tokens: Distribution
    output_tokens: Distribution


def _session_keys(arrays: TraceArrays) -> tuple[NDArray[np.int64], bool]:
    """One key per request: its session, or (no session ids) a unique key per request."""
    known = bool((arrays.sessions >= 0).any())
    keys = arrays.sessions.copy()
    unknown = keys < 0
    # requests without a session are their own session, keyed below every real id
    keys[unknown] = -1 - np.flatnonzero(unknown)
    return keys, known


def trace_stats(arrays: TraceArrays, positions: NDArray[np.int64] | None) -> TraceStats:
    """Compute every distribution; ``positions`` = stack positions of the all-requests pass
    (``LruCurve.full.position``), -1 for first accesses."""
    ids, sizes = arrays.ids, arrays.sizes
    request_of = np.repeat(np.arange(arrays.n_requests, dtype=np.int64), sizes)
    # consecutive accesses of one block: sort by (id, access index)
    order = np.argsort(ids, kind="stable")
    same = ids[order[1:]] == ids[order[:-1]]
    prev_req, next_req = request_of[order[:-1]][same], request_of[order[1:]][same]
    cross = prev_req != next_req  # repeats inside one request are not reuse across requests
    prev_req, next_req = prev_req[cross], next_req[cross]
    ts = arrays.timestamps
    # first / last access of each id: the ends of its run in the stable sort (no ufunc.at)
    sorted_ids = ids[order]
    starts = np.flatnonzero(np.r_[True, sorted_ids[1:] != sorted_ids[:-1]])
    ends = np.r_[starts[1:], len(sorted_ids)] - 1
    first_req = request_of[order[starts]]
    last_req = request_of[order[ends]]
    reused = last_req > first_req
    keys, known = _session_keys(arrays)
    session_keys, session_rank = np.unique(keys, return_inverse=True)
    # distinct (session, block) pairs as one int64 key each, deduplicated by one sort
    # (numpy's hash-based ``unique`` is far slower on 10 M keys)
    pairs = np.sort(session_rank[request_of] * max(arrays.n_ids, 1) + ids)
    pairs = pairs[np.r_[True, pairs[1:] != pairs[:-1]]] if len(pairs) else pairs
    pair_block, pair_session = pairs % max(arrays.n_ids, 1), pairs // max(arrays.n_ids, 1)
    shared = np.bincount(pair_block, minlength=arrays.n_ids) > 1
    footprint = np.bincount(pair_session, minlength=len(session_keys))
    reuse = positions[positions >= 0] if positions is not None else np.zeros(0)
    return TraceStats(
        reuse_distance_blocks=distribution(reuse),
        reuse_time_s=distribution(ts[next_req] - ts[prev_req]),
        reuse_time_requests=distribution(next_req - prev_req),
        lifetime_s=distribution(ts[last_req[reused]] - ts[first_req[reused]]),
        lifetime_requests=distribution(last_req[reused] - first_req[reused]),
        sharing=SharingStats(
            n_sessions=len(session_keys),
            sessions_known=known,
            n_blocks=arrays.n_ids,
            shared_blocks=int(shared.sum()),
            accesses=len(ids),
            shared_accesses=int(shared[ids].sum()),
        ),
        session_footprint_blocks=distribution(footprint),
        request_blocks=distribution(sizes),
        input_tokens=distribution(arrays.input_length),
        output_tokens=distribution(arrays.output_length),
    )
