"""``kvplan analyze``'s computation: a trace's whole LRU curve and its reuse distributions.

``analyze(arrays, ...)`` returns an ``Analysis``: the exact LRU curve sampled at log-spaced
sizes (plus every size of the exact low grid), the capacity that reaches 90/95/99 % of the
maximum hit ratio (and of the maximum compute saving) in blocks, tokens and — given a model's
KV bytes per token — GiB, and the distributions of ``trace_stats``. ``to_json`` is its
machine-readable form. No I/O and no presentation here (the CLI renders it).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from simulator.kvcache.cost import UNIFORM, CostModel
from simulator.kvcache.lru_curve import CurvePoint, LruCurve, TraceArrays, capacity_for, lru_curve
from simulator.kvcache.stack_distance import distinct_per_request
from simulator.kvcache.trace_stats import TraceStats, trace_stats

__all__ = ["FRACTIONS", "Analysis", "CapacityRow", "analyze", "curve_sizes", "to_json"]

#: Fractions of the maximum ratio whose capacity is reported.
FRACTIONS = (0.90, 0.95, 0.99)
_GIB = float(1 << 30)


@dataclass(frozen=True, slots=True)
class CapacityRow:
    """Smallest LRU capacity reaching ``fraction`` of the maximum ratio."""

    fraction: float
    metric: str
    """``block_hit_ratio`` or ``compute_saving_ratio``."""
    ratio: float
    """The ratio reached at that capacity."""
    blocks: int
    tokens: int
    gib: float | None
    """KV-cache size in GiB for the given model (``None`` without one)."""


@dataclass(frozen=True, slots=True, eq=False)
class Analysis:
    """What ``kvplan analyze`` reports."""

    n_requests: int
    n_blocks: int
    """Block accesses."""
    n_unique_blocks: int
    block_size_tokens: int
    kv_bytes_per_token: float | None
    cost_model: str
    curve: LruCurve
    points: list[CurvePoint]
    """The curve at ``curve_sizes`` (exact values)."""
    capacities: list[CapacityRow]
    stats: TraceStats

    @property
    def max_point(self) -> CurvePoint:
        """Every block cached (capacity = unique blocks)."""
        return self.curve.at(max(self.n_unique_blocks, self.curve.d_max, 1))


def curve_sizes(d_max: int, n_ids: int, n_points: int) -> list[int]:
    """About ``n_points`` log-spaced capacities from ``d_max`` to ``n_ids`` (both included)."""
    if n_ids <= d_max:
        return [max(d_max, 1)]
    grid = np.geomspace(max(d_max, 1), n_ids, num=max(n_points, 2))
    return sorted({int(np.rint(x)) for x in grid} | {d_max, n_ids})


def default_low_sizes(d_max: int) -> list[int]:
    """Powers of two from 16 below ``d_max`` (one extra pass each; small caches skip requests,
    which the single pass cannot represent)."""
    return [1 << k for k in range(4, 40) if (1 << k) < d_max]


def analyze(
    arrays: TraceArrays,
    block_size_tokens: int,
    *,
    cost_model: CostModel = UNIFORM,
    stop_at_first_miss: bool = False,
    deepest_first: bool = True,
    kv_bytes_per_token: float | None = None,
    n_points: int = 48,
    low_sizes: list[int] | None = None,
) -> Analysis:
    """Analyse a trace (see the module doc); ``low_sizes`` defaults to ``default_low_sizes``."""
    distinct = distinct_per_request(arrays.ids, arrays.offsets, arrays.n_ids)
    d_max = int(distinct.max()) if len(distinct) else 0
    curve = lru_curve(
        arrays,
        cost_model=cost_model,
        stop_at_first_miss=stop_at_first_miss,
        deepest_first=deepest_first,
        low_sizes=default_low_sizes(d_max) if low_sizes is None else low_sizes,
    )
    sizes = sorted(set(curve.low) | set(curve_sizes(d_max, arrays.n_ids, n_points)))
    points = [curve.at(size) for size in sizes]
    capacities = []
    for metric in ("block_hit_ratio", "compute_saving_ratio"):
        for fraction in FRACTIONS:
            blocks = capacity_for(curve, fraction, saving=metric == "compute_saving_ratio")
            tokens = blocks * block_size_tokens
            gib = tokens * kv_bytes_per_token / _GIB if kv_bytes_per_token else None
            ratio = getattr(curve.at(blocks), metric)
            capacities.append(CapacityRow(fraction, metric, ratio, blocks, tokens, gib))
    positions = curve.full.position if curve.full is not None else None
    return Analysis(
        n_requests=arrays.n_requests,
        n_blocks=len(arrays.ids),
        n_unique_blocks=arrays.n_ids,
        block_size_tokens=block_size_tokens,
        kv_bytes_per_token=kv_bytes_per_token,
        cost_model=cost_model.spec,
        curve=curve,
        points=points,
        capacities=capacities,
        stats=trace_stats(arrays, positions),
    )


def _point(p: CurvePoint) -> dict[str, float | int]:
    return {
        "cache_size": p.cache_size,
        "block_hit_ratio": p.block_hit_ratio,
        "compute_saving_ratio": p.compute_saving_ratio,
        "n_block_hits": p.n_block_hits,
        "n_blocks": p.n_blocks,
    }


def to_json(analysis: Analysis) -> dict[str, object]:
    """A JSON-ready dict of the whole analysis."""
    stats = asdict(analysis.stats)
    sharing = analysis.stats.sharing
    stats["sharing"]["shared_block_share"] = sharing.shared_block_share
    stats["sharing"]["shared_access_share"] = sharing.shared_access_share
    return {
        "n_requests": analysis.n_requests,
        "n_blocks": analysis.n_blocks,
        "n_unique_blocks": analysis.n_unique_blocks,
        "block_size_tokens": analysis.block_size_tokens,
        "kv_bytes_per_token": analysis.kv_bytes_per_token,
        "cost_model": analysis.cost_model,
        "exact_from_blocks": analysis.curve.d_max,
        "max": _point(analysis.max_point),
        "curve": [_point(p) for p in analysis.points],
        "capacity": [asdict(row) for row in analysis.capacities],
        "stats": stats,
    }
