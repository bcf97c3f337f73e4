"""Pareto fronts, knee points and hypervolume over plain objective vectors.

Everything here works on *minimisation* vectors: callers flip the sign of maximised objectives
first (``to_minimisation``). Independent of Optuna, so the same code ranks trials from any
storage and scores the exhaustive grid in ``bench/search_quality.py``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

__all__ = [
    "hypervolume",
    "knee_index",
    "non_dominated",
    "to_minimisation",
]

FloatArray = npt.NDArray[np.float64]


def to_minimisation(values: Sequence[Sequence[float]], directions: Sequence[str]) -> FloatArray:
    """Rows of objective values as minimisation vectors (maximised columns negated)."""
    signs = np.array([1.0 if d == "minimize" else -1.0 for d in directions])
    rows: FloatArray = np.asarray(values, dtype=float).reshape(-1, len(directions))
    out: FloatArray = rows * signs
    return out


def non_dominated(points: FloatArray) -> list[int]:
    """Indices of the non-dominated rows (minimisation), in input order.

    Duplicate points are all kept (none dominates the other). O(n² · d), fine for the few
    thousand trials a study holds.
    """
    n = len(points)
    keep: list[int] = []
    for i in range(n):
        p = points[i]
        dominated = np.any(np.all(points <= p, axis=1) & np.any(points < p, axis=1))
        if not dominated:
            keep.append(i)
    return keep


def knee_index(points: FloatArray) -> int:
    """The balanced point of a front: closest to the ideal point after min-max normalisation.

    Each objective is scaled to [0, 1] over the front (a constant objective contributes 0), then
    the row with the smallest Euclidean distance to the all-zeros ideal is returned (ties: first).
    """
    if len(points) == 0:
        raise ValueError("knee of an empty front")
    low = points.min(axis=0)
    span = points.max(axis=0) - low
    span[span == 0] = 1.0
    scaled = (points - low) / span
    return int(np.argmin(np.linalg.norm(scaled, axis=1)))


def hypervolume(points: FloatArray, reference: Sequence[float]) -> float:
    """Volume dominated by ``points`` and bounded by ``reference`` (minimisation, any dimension).

    Points not strictly better than the reference in every objective contribute nothing.
    Exact, by recursive slicing along the last objective: fine for fronts of a few hundred
    points in up to 4 objectives.
    """
    ref = np.asarray(reference, dtype=float)
    pts = np.asarray(points, dtype=float).reshape(-1, len(ref))
    pts = pts[np.all(pts < ref, axis=1)]
    if len(pts) == 0:
        return 0.0
    return _hv(pts[non_dominated(pts)], ref)


def _hv(points: FloatArray, ref: FloatArray) -> float:
    if points.shape[1] == 1:
        return float(ref[0] - points[:, 0].min())
    order = np.argsort(points[:, -1])
    pts = points[order]
    volume = 0.0
    for i, row in enumerate(pts):
        upper = pts[i + 1, -1] if i + 1 < len(pts) else ref[-1]
        depth = upper - row[-1]
        if depth <= 0:
            continue
        slab = pts[: i + 1, :-1]
        volume += depth * _hv(slab[non_dominated(slab)], ref[:-1])
    return volume
