"""The exact LRU miss-ratio curve of a trace, every cache size at once (``kvplan analyze``).

``TraceArrays`` is a trace as flat numpy arrays (dense block ids, request offsets, per-request
timestamps, sessions and lengths); ``lru_curve`` runs the stack algorithm of
``simulator.kvcache.stack_distance`` and returns an ``LruCurve`` whose ``at(C)`` equals what
``replay`` with ``lru`` at capacity C reports (block hits, probes, saved and total cost) —
exactly, for every C ≥ ``d_max`` (the largest request's distinct blocks) from one pass, and
for the sizes below ``d_max`` listed in ``low_sizes`` from one extra pass per distinct set of
served requests (see the stack-distance module for why small caches need them).
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from simulator.kvcache.cost import UNIFORM, CostModel
from simulator.kvcache.stack_distance import NEVER_HIT, StackPass, stack_pass
from simulator.workload.request import TraceRequest

__all__ = ["CurvePoint", "LruCurve", "TraceArrays", "capacity_for", "lru_curve"]


@dataclass(frozen=True, slots=True, eq=False)
class TraceArrays:
    """A trace as flat arrays; block ids renumbered densely ``0 .. n_ids - 1`` (first seen)."""

    ids: NDArray[np.int64]
    offsets: NDArray[np.int64]
    """Request r's blocks are ``ids[offsets[r]:offsets[r + 1]]``."""
    n_ids: int
    timestamps: NDArray[np.float64]
    """Arrival time of each request, seconds."""
    sessions: NDArray[np.int64]
    """Session id of each request, -1 = unknown."""
    input_length: NDArray[np.int64]
    output_length: NDArray[np.int64]

    @property
    def n_requests(self) -> int:
        return len(self.offsets) - 1

    @property
    def sizes(self) -> NDArray[np.int64]:
        """Blocks per request."""
        return np.diff(self.offsets)

    @classmethod
    def from_requests(cls, requests: Iterable[TraceRequest]) -> TraceArrays:
        """One pass over ``requests`` (any iterable; nothing but the arrays is kept)."""
        flat, counts, sessions, inputs, outputs = (array("q") for _ in range(5))
        times = array("d")
        for request in requests:
            flat.extend(request.block_ids)
            counts.append(len(request.block_ids))
            times.append(request.timestamp_s)
            sessions.append(request.session_id)
            inputs.append(request.input_length)
            outputs.append(request.output_length)
        raw = np.frombuffer(flat, dtype=np.int64) if flat else np.zeros(0, dtype=np.int64)
        uniq, first, dense = np.unique(raw, return_index=True, return_inverse=True)
        # renumber in first-seen order (stable, readable ids in dumps), not sorted order
        rank = np.empty(len(uniq), dtype=np.int64)
        rank[np.argsort(first, kind="stable")] = np.arange(len(uniq), dtype=np.int64)
        offsets = np.zeros(len(counts) + 1, dtype=np.int64)
        np.cumsum(np.frombuffer(counts, dtype=np.int64), out=offsets[1:])

        def ints(values: array[int]) -> NDArray[np.int64]:
            return np.array(values, dtype=np.int64)

        return cls(
            ids=rank[dense].astype(np.int64),
            offsets=offsets,
            n_ids=len(uniq),
            timestamps=np.array(times, dtype=np.float64),
            sessions=ints(sessions),
            input_length=ints(inputs),
            output_length=ints(outputs),
        )

    def positions(self) -> NDArray[np.int64]:
        """0-based position of every access inside its request."""
        return np.arange(len(self.ids), dtype=np.int64) - np.repeat(self.offsets[:-1], self.sizes)


@dataclass(frozen=True, slots=True)
class CurvePoint:
    """What an LRU replay at one capacity counts (the ``ReplayResult`` fields)."""

    cache_size: int
    n_block_hits: int
    n_blocks: int
    saved_cost: float
    total_cost: float

    @property
    def block_hit_ratio(self) -> float:
        return self.n_block_hits / self.n_blocks if self.n_blocks else 0.0

    @property
    def compute_saving_ratio(self) -> float:
        return self.saved_cost / self.total_cost if self.total_cost else 0.0


@dataclass(frozen=True, slots=True, eq=False)
class LruCurve:
    """Cumulative counts by capacity: index C holds the counts of capacity C (C ≤ ``n_ids``)."""

    hits: NDArray[np.int64]
    probes: NDArray[np.int64]
    saved: NDArray[np.float64]
    total: NDArray[np.float64]
    d_max: int
    """Largest distinct block count of a request; the arrays are exact for C ≥ ``d_max``."""
    n_ids: int
    low: dict[int, CurvePoint] = field(default_factory=dict)
    """Exact points below ``d_max`` (from extra passes)."""
    full: StackPass | None = None
    """The all-requests pass (positions feed the reuse-distance distribution)."""

    def at(self, cache_size: int) -> CurvePoint:
        """The LRU counts at ``cache_size`` blocks; ``KeyError`` below ``d_max`` unless that
        size was computed (``low_sizes``)."""
        if cache_size < self.d_max:
            return self.low[cache_size]
        c = min(cache_size, self.n_ids)
        return CurvePoint(
            cache_size,
            int(self.hits[c]),
            int(self.probes[c]),
            float(self.saved[c]),
            float(self.total[c]),
        )

    def exact_sizes(self) -> list[int]:
        """Sizes with exact values: the low grid, then ``d_max .. n_ids``."""
        return sorted(self.low) + list(range(self.d_max, max(self.d_max, self.n_ids) + 1))


def _counts(
    arrays: TraceArrays,
    sp: StackPass,
    costs: NDArray[np.float64],
    stop_at_first_miss: bool,
    served: NDArray[np.bool_],
) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.float64], NDArray[np.float64]]:
    """Cumulative hits / probes / saved / total indexed by capacity 0 .. n_ids."""
    top = arrays.n_ids + 1
    thr = sp.stop_at_first_miss(arrays.offsets) if stop_at_first_miss else sp.threshold
    hit = thr != NEVER_HIT
    capped = np.minimum(thr[hit], top)
    hits = np.cumsum(np.bincount(capped, minlength=top + 1))[:top]
    saved = np.cumsum(np.bincount(capped, weights=costs[hit], minlength=top + 1))[:top]
    d = np.minimum(np.where(served, sp.distinct, top), top)
    sizes = arrays.sizes
    request_of = np.repeat(np.arange(arrays.n_requests), sizes)
    per_request_cost = np.bincount(request_of, weights=costs, minlength=arrays.n_requests)
    probes = np.cumsum(np.bincount(d, weights=sizes, minlength=top + 1))[:top]
    total = np.cumsum(np.bincount(d, weights=per_request_cost, minlength=top + 1))[:top]
    as_float = np.float64
    return (
        hits.astype(np.int64),
        probes.astype(np.int64),
        saved.astype(as_float),
        total.astype(as_float),
    )


def lru_curve(
    arrays: TraceArrays,
    *,
    cost_model: CostModel = UNIFORM,
    stop_at_first_miss: bool = False,
    deepest_first: bool = True,
    low_sizes: Sequence[int] = (),
) -> LruCurve:
    """The exact LRU curve (see the module doc); ``low_sizes`` below ``d_max`` get extra passes."""
    n_max = int(arrays.sizes.max()) if arrays.n_requests else 0
    table = np.array(cost_model.table(n_max), dtype=np.float64) if n_max else np.zeros(0)
    costs = table[arrays.positions()] if len(arrays.ids) else np.zeros(0)
    full = stack_pass(arrays.ids, arrays.offsets, arrays.n_ids, deepest_first=deepest_first)
    everyone = np.ones(arrays.n_requests, dtype=np.bool_)
    hits, probes, saved, total = _counts(arrays, full, costs, stop_at_first_miss, everyone)
    d_max = int(full.distinct.max()) if arrays.n_requests else 0
    low: dict[int, CurvePoint] = {}
    by_served: dict[int, list[int]] = {}
    for size in sorted({s for s in low_sizes if 1 <= s < d_max}):
        # the served set at C is {d <= C}; key it by the largest request size it admits
        admitted = int(full.distinct[full.distinct <= size].max(initial=0))
        by_served.setdefault(admitted, []).append(size)
    for admitted, sizes in by_served.items():
        served = full.distinct <= admitted
        sp = stack_pass(
            arrays.ids, arrays.offsets, arrays.n_ids, served=served, deepest_first=deepest_first
        )
        h, p, s, t = _counts(arrays, sp, costs, stop_at_first_miss, served)
        for size in sizes:
            c = min(size, arrays.n_ids)
            low[size] = CurvePoint(size, int(h[c]), int(p[c]), float(s[c]), float(t[c]))
    return LruCurve(hits, probes, saved, total, d_max, arrays.n_ids, low, full)


def capacity_for(curve: LruCurve, fraction: float, *, saving: bool = False) -> int:
    """Smallest capacity (blocks) whose ratio reaches ``fraction`` of the maximum (the ratio
    with every block cached), searched over the exact sizes; ``saving`` uses the compute-saving
    ratio instead of the block hit ratio."""
    best = curve.at(max(curve.n_ids, curve.d_max))
    goal = fraction * (best.compute_saving_ratio if saving else best.block_hit_ratio)
    for size in sorted(curve.low):
        point = curve.low[size]
        if (point.compute_saving_ratio if saving else point.block_hit_ratio) >= goal:
            return size
    lo = curve.d_max
    top = max(curve.n_ids, curve.d_max)
    # hits are non-decreasing and the denominators constant from d_max on: bisect
    num = curve.saved if saving else curve.hits
    den = curve.total if saving else curve.probes
    if den[min(lo, curve.n_ids)] == 0:
        return lo
    target = goal * float(den[min(lo, curve.n_ids)])
    index = int(np.searchsorted(num[lo : top + 1], target - 1e-9 * max(target, 1.0)))
    return min(lo + index, top)
