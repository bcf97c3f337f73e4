"""Interpolation grids over measured kernel times (``Grid``), made monotone and gap-filled.

``Grid`` holds one kernel configuration's times (a GEMM dtype; attention heads, KV heads, head
dim and KV dtype; an all-reduce GPU count) on sorted axes, gaps filled, for
``table.ProfileKernels`` to interpolate; ``table.ProfileTable`` builds one per configuration.

**Monotone grids.** Measured times are not monotone in size (an m = 4097 GEMM is slower than
m = 4353: tile and alignment effects, and noise). The engine's latency contract is (a step never
gets cheaper when it grows), so by default each grid is made non-decreasing along the axes a
batch grows in (GEMM m; attention batch and length; all-reduce bytes; not GEMM n and k, which
the model fixes) by isotonic regression of log time along each such axis (pool adjacent
violators: a run that gets cheaper is replaced by its mean). Measured points outside such runs
are kept exactly, and a violation is averaged out rather than biased one way (a running maximum
would carry one slow outlier up to every larger size).
``monotone=False`` keeps the measurements verbatim (exact at every measured point; what the
accuracy bench uses).
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Callable, Hashable, Sequence
from typing import cast

import numpy as np
import pandas as pd

__all__ = ["CellTimes", "Grid", "grid_key_int", "head_config_args"]

_Point = tuple[float, ...]
#: Brackets a grid keeps for ``lookup`` (dropped and recomputed alike past this).
_MAX_BRACKETS = 1 << 16
#: Seconds of many grid cells at once: ``(n, dims)`` coordinates in, ``(n,)`` seconds out.
CellTimes = Callable[[np.ndarray], np.ndarray]


def _one_cell_at_a_time(time: Callable[[_Point], float]) -> CellTimes:
    """``CellTimes`` from a timer of one cell (called with each row as a tuple of floats)."""

    def many(cells: np.ndarray) -> np.ndarray:
        return np.array([time(tuple(cell)) for cell in cells.tolist()], dtype=float)

    return many


class Grid:
    """Seconds of one kernel configuration on a complete rectangular grid, interpolated in
    log(time) over log(size).

    ``measured`` marks the cells that hold a measurement (the others were filled); ``monotone``
    lists the axes made non-decreasing by isotonic regression (module doc).
    """

    def __init__(
        self,
        axes: list[list[float]],
        seconds: np.ndarray,
        measured: np.ndarray,
        *,
        monotone: Sequence[int],
    ) -> None:
        self.axes = axes
        self.log_axes: list[list[float]] = [np.log(a).tolist() for a in axes]
        self.measured = measured
        log_seconds = np.log(seconds)
        if len(monotone):
            smoothed = log_seconds
            for axis in monotone:
                smoothed = _isotonic_along(smoothed, axis)
            changed = smoothed != log_seconds  # keep untouched points bit-exact
            seconds = np.where(changed, np.exp(smoothed), seconds)
            log_seconds = smoothed
        self.monotone = tuple(monotone)
        self.seconds = seconds
        self.log_seconds = log_seconds
        # ``lookup``'s flat views (C order: the offset of a cell is the sum of index × stride).
        self._strides = [math.prod(seconds.shape[d + 1 :]) for d in range(seconds.ndim)]
        self._flat: list[float] | None = None
        self._seconds_flat: list[float] = []
        self._measured_flat: list[bool] = []
        self._brackets: dict[tuple[int, float], list[tuple[int, float]]] = {}

    @classmethod
    def measure(
        cls,
        frame: pd.DataFrame,
        axes: Sequence[str],
        roofline: Callable[[_Point], float],
        *,
        monotone: Sequence[int],
        roofline_cells: CellTimes | None = None,
    ) -> Grid:
        """The grid of ``frame``'s rows; the profiled GPU's roofline fills unmeasured cells:
        ``roofline_cells`` (many cells per call) when given, else ``roofline`` cell by cell."""
        values = [np.unique(frame[a].to_numpy(dtype=float)) for a in axes]
        grid_axes: list[list[float]] = [v.tolist() for v in values]
        index = tuple(
            np.searchsorted(v, frame[a].to_numpy(dtype=float))
            for v, a in zip(values, axes, strict=True)
        )
        seconds = np.full(tuple(len(v) for v in values), np.nan)
        seconds[index] = frame["seconds"].to_numpy(dtype=float)
        measured = np.isfinite(seconds)
        _fill_gaps(seconds, measured, grid_axes, roofline_cells or _one_cell_at_a_time(roofline))
        return cls(grid_axes, seconds, measured, monotone=monotone)

    def carried(self, ratio: Callable[[_Point], float]) -> Grid:
        """This grid with every cell multiplied by ``ratio(cell)`` (then made monotone again):
        measurements carried to another configuration or GPU."""
        seconds = self.seconds.copy()
        for cell in np.ndindex(seconds.shape):
            seconds[cell] *= ratio(tuple(self.axes[d][i] for d, i in enumerate(cell)))
        return Grid(self.axes, seconds, self.measured, monotone=self.monotone)

    def lookup(self, point: Sequence[float]) -> tuple[float, _Point, bool, bool]:
        """``(seconds, anchor, inside, measured)``: interpolated at ``point`` clamped onto the
        grid (the anchor); ``inside`` if no clamping was needed; ``measured`` if every grid
        point used was measured (not a filled gap).

        The log time is the exactly rounded sum (``math.fsum``) over the corners around the
        anchor of ``((w_0 · w_1) · w_2) · log_seconds[corner]``, ``w_d`` the corner's weight
        along axis ``d``; cells are read from flat lists (Python floats) by stride offsets, and
        each axis's bracket of a coordinate is kept (the engine asks the same sizes again)."""
        flat = self._flat if self._flat is not None else self._flatten()
        anchor = tuple(min(max(x, ax[0]), ax[-1]) for x, ax in zip(point, self.axes, strict=True))
        inside = anchor == tuple(point)
        brackets = self._brackets
        per_axis = []
        for dim, x in enumerate(anchor):
            bracket = brackets.get((dim, x))
            if bracket is None:
                if len(brackets) >= _MAX_BRACKETS:
                    brackets.clear()
                bracket = brackets[dim, x] = self._bracket(dim, x)
            per_axis.append(bracket)
        measured_flat = self._measured_flat
        if all(len(b) == 1 for b in per_axis):  # a grid point: its stored value, not exp(log)
            offset = sum(b[0][0] for b in per_axis)
            return self._seconds_flat[offset], anchor, inside, measured_flat[offset]
        terms = []
        measured = True
        for corner in itertools.product(*per_axis):
            offset, weight = 0, 1.0
            for step, w in corner:
                offset += step
                weight *= w
            terms.append(weight * flat[offset])
            measured = measured and measured_flat[offset]
        return math.exp(math.fsum(terms)), anchor, inside, measured

    def _flatten(self) -> list[float]:
        """The flat lists ``lookup`` reads, built on first use (a grid only carried, never
        asked, costs nothing more); returns the log seconds."""
        self._seconds_flat = self.seconds.ravel().tolist()
        self._measured_flat = self.measured.ravel().tolist()
        flat: list[float] = self.log_seconds.ravel().tolist()
        self._flat = flat
        return flat

    def _bracket(self, dim: int, x: float) -> list[tuple[int, float]]:
        """``(stride offset, weight)`` of the one or two grid points around ``x`` on axis
        ``dim``, in axis order."""
        axis = self.axes[dim]
        stride = self._strides[dim]
        i = bisect.bisect_left(axis, x)
        if axis[i] == x:
            return [(i * stride, 1.0)]
        logs = self.log_axes[dim]
        t = (math.log(x) - logs[i - 1]) / (logs[i] - logs[i - 1])
        return [((i - 1) * stride, 1.0 - t), (i * stride, t)]


def _isotonic_along(values: np.ndarray, axis: int) -> np.ndarray:
    """``_isotonic`` of every 1-d run of ``values`` along ``axis``; runs that never decrease
    are returned as they are (what ``_isotonic`` gives them), so only the others are fitted."""
    runs = np.moveaxis(values, axis, -1)
    flat = runs.reshape(-1, runs.shape[-1]).copy()
    for row in np.flatnonzero((np.diff(flat, axis=1) < 0).any(axis=1)):
        flat[row] = _isotonic(flat[row])
    return np.moveaxis(flat.reshape(runs.shape), -1, axis)


def _isotonic(values: np.ndarray) -> np.ndarray:
    """Least-squares non-decreasing fit of a sequence (pool adjacent violators): runs that
    decrease are replaced by their mean; every other value is returned unchanged."""
    blocks: list[list[float]] = []  # [sum, count] per pooled block
    for value in values.tolist():
        blocks.append([value, 1.0])
        while len(blocks) > 1 and blocks[-2][0] / blocks[-2][1] > blocks[-1][0] / blocks[-1][1]:
            total, count = blocks.pop()
            blocks[-1][0] += total
            blocks[-1][1] += count
    out = values.copy()
    start = 0
    for total, count in blocks:
        end = start + int(count)
        if count > 1:
            out[start:end] = total / count
        start = end
    return out


def _fill_gaps(
    seconds: np.ndarray,
    measured: np.ndarray,
    axes: list[list[float]],
    roofline: CellTimes,
) -> None:
    """Fill unmeasured cells in place: roofline(cell) × measured(anchor) / roofline(anchor).

    The anchor is the nearest measured cell (log distance) with the same first coordinate (GEMM
    m, attention batch), else the nearest measured cell overall: searching one slice at a time
    keeps sparse grids (a few GEMM (n, k) pairs) cheap to build. ``roofline`` times a slice's
    cells in one call (a GEMM grid has ~10^5 gaps per GPU: one Python call each cost a second).
    """
    if measured.all():
        return
    values = [np.asarray(a, dtype=float) for a in axes]
    log_axes = [np.log(v) for v in values]

    def coordinates(cells: np.ndarray, of: list[np.ndarray]) -> np.ndarray:
        return np.column_stack([of[d][cells[:, d]] for d in range(len(axes))])

    everywhere = np.argwhere(measured)
    for first in range(seconds.shape[0]):
        missing = np.argwhere(~measured[first])
        if not len(missing):
            continue
        missing = np.column_stack([np.full(len(missing), first), missing])
        known = np.argwhere(measured[first])
        known = np.column_stack([np.full(len(known), first), known]) if len(known) else everywhere
        to, of = coordinates(missing, log_axes), coordinates(known, log_axes)
        distances = np.zeros((len(to), len(of)))
        for d in range(len(axes)):  # summed axis by axis, as (x - y)² over the last axis would be
            distances += (to[:, d, None] - of[None, :, d]) ** 2
        near = known[np.argmin(distances, axis=1)]
        ratio = seconds[tuple(near.T)] / np.maximum(roofline(coordinates(near, values)), 1e-12)
        seconds[tuple(missing.T)] = roofline(coordinates(missing, values)) * ratio


def grid_key_int(value: Hashable) -> int:
    """A grid key's number (pandas group keys are typed ``Hashable``; these are floats)."""
    return int(cast(float, value))


def head_config_args(key: tuple[Hashable, ...]) -> tuple[int, int, int, str]:
    heads, kv_heads, head_dim, kv_dtype = key
    return grid_key_int(heads), grid_key_int(kv_heads), grid_key_int(head_dim), str(kv_dtype)
