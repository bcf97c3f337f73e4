"""Load that changes over time: a rate multiplier m(t) applied to an arrival process or a trace.

A profile is piecewise constant. Written as ``pieces`` (``[{until_s: 3600, scale: 0.5}, ...]``;
the last scale holds after the last piece) or as a ``diurnal`` day (a cosine between ``low``
and ``high`` peaking at ``peak_s``, one value per ``step_s`` slot, repeating every
``period_s``)::

    arrival: {process: poisson, rate_per_s: 4,
              profile: {diurnal: {low: 0.2, high: 1.5, peak_s: 50400}}}

Semantics (a time change, exact for any process): arrivals are generated on the process's own
clock u at its constant rate, and an arrival at u reaches the system at the real time T with
Λ(T) = u, where Λ(T) = ∫₀ᵀ m(s) ds. A Poisson process at rate λ becomes the non-homogeneous
Poisson process of rate λ·m(t); a trace keeps its order and its burst structure while its rate
follows m. A piece with scale 0 has no arrivals. What the time change does not touch: a
session's think time between turns and a trace's per-request lengths (real seconds and tokens
stay what they are).

The diurnal slots make the curve piecewise constant (``step_s``, default 5 minutes: the
cosine moves at most 2.6% of its swing within a slot).
"""

from __future__ import annotations

import bisect
import itertools
import math
from typing import Self

import numpy as np
from pydantic import Field, model_validator

from simulator.workload.spec_base import MAX_SECONDS, FrozenSpec

__all__ = ["DiurnalSpec", "PieceSpec", "RateProfile"]

#: Most pieces a profile may have (a day in 1-second slots is 86,400).
MAX_PIECES = 100_000


class PieceSpec(FrozenSpec):
    """The rate multiplier up to a time (from the previous piece's end, or 0)."""

    until_s: float = Field(gt=0, le=MAX_SECONDS, description="End of the piece, seconds.")
    scale: float = Field(ge=0, le=1e6, description="Rate multiplier in the piece (0 = idle).")


class DiurnalSpec(FrozenSpec):
    """A day-shaped curve: ``low + (high − low) · (1 + cos(2π (t − peak_s) / period_s)) / 2``."""

    low: float = Field(ge=0, le=1e6, description="Multiplier at the trough.")
    high: float = Field(gt=0, le=1e6, description="Multiplier at the peak (≥ low).")
    peak_s: float = Field(
        default=14 * 3600.0, ge=0, le=MAX_SECONDS, description="Time of the peak, seconds."
    )
    period_s: float = Field(
        default=86_400.0, gt=0, le=MAX_SECONDS, description="Length of one cycle, seconds."
    )
    step_s: float = Field(
        default=300.0, gt=0, le=MAX_SECONDS, description="Width of a constant slot, seconds."
    )

    @model_validator(mode="after")
    def _ordered(self) -> Self:
        if self.low > self.high:
            raise ValueError(f"low ({self.low:g}) must not exceed high ({self.high:g})")
        if self.period_s / self.step_s > MAX_PIECES:
            raise ValueError(
                f"period_s / step_s: {self.period_s / self.step_s:,.0f} slots; at most "
                f"{MAX_PIECES:,} are supported"
            )
        return self

    def pieces(self) -> list[tuple[float, float]]:
        """One cycle as (end s, scale) slots; the last slot ends at ``period_s``."""
        n = max(1, math.ceil(self.period_s / self.step_s))
        ends = np.minimum(np.arange(1, n + 1) * self.step_s, self.period_s)
        mids = (ends - np.diff(ends, prepend=0.0) / 2) - self.peak_s
        shape = (1 + np.cos(2 * np.pi * mids / self.period_s)) / 2
        scales = self.low + (self.high - self.low) * shape
        return [(float(e), float(s)) for e, s in zip(ends, scales, strict=True)]


class RateProfile(FrozenSpec):
    """A rate multiplier over time: ``pieces`` or ``diurnal`` (module docstring)."""

    pieces: list[PieceSpec] | None = Field(
        default=None, description="Piecewise-constant multipliers; the last one holds after it."
    )
    diurnal: DiurnalSpec | None = Field(default=None, description="A repeating day-like curve.")

    @model_validator(mode="after")
    def _one_shape(self) -> Self:
        if (self.pieces is None) == (self.diurnal is None):
            raise ValueError("a rate profile takes exactly one of 'pieces' or 'diurnal'")
        if self.pieces is not None:
            if not self.pieces:
                raise ValueError("pieces: expected at least one piece")
            if len(self.pieces) > MAX_PIECES:
                raise ValueError(f"pieces: at most {MAX_PIECES:,} are supported")
            ends = [p.until_s for p in self.pieces]
            if any(b <= a for a, b in itertools.pairwise(ends)):
                raise ValueError("pieces: until_s must increase from piece to piece")
            if self.pieces[-1].scale <= 0:
                raise ValueError("pieces: the last scale holds forever, so it must be > 0")
        return self

    def warp(self) -> TimeWarp:
        """The time change u → T of this profile (module docstring)."""
        if self.diurnal is not None:
            return TimeWarp(self.diurnal.pieces(), periodic=True)
        assert self.pieces is not None
        return TimeWarp([(p.until_s, p.scale) for p in self.pieces], periodic=False)


class TimeWarp:
    """Λ⁻¹ for a piecewise-constant multiplier: process-clock seconds → real seconds.

    ``pieces`` are (end s, scale) in order, the first starting at 0. Non-periodic: the last
    scale holds after the last end (it is > 0). Periodic: the pieces repeat with the last end
    as the period (their total Λ is > 0).
    """

    def __init__(self, pieces: list[tuple[float, float]], *, periodic: bool) -> None:
        self.ends = [0.0] + [end for end, _ in pieces]
        self.scales = [scale for _, scale in pieces]
        cumulative = [0.0]
        for (end, scale), start in zip(pieces, self.ends, strict=False):
            cumulative.append(cumulative[-1] + (end - start) * scale)
        self.cumulative = cumulative
        self.periodic = periodic
        if periodic and cumulative[-1] <= 0:
            raise ValueError("a periodic rate profile needs some load in its period")

    def __call__(self, u: float) -> float:
        """The real time at which the process-clock time ``u`` (≥ 0) arrives."""
        offset = 0.0
        total = self.cumulative[-1]
        if u >= total:
            if not self.periodic:
                return self.ends[-1] + (u - total) / self.scales[-1]
            cycles = math.floor(u / total)
            offset, u = cycles * self.ends[-1], u - cycles * total
            if u >= total:  # the floor's rounding: u is the cycle's end
                return offset + self.ends[-1]
        # The piece k with cumulative[k] <= u < cumulative[k + 1]: its Λ grows, so its scale is
        # > 0 (pieces of scale 0 have equal cumulative ends and are never picked).
        k = bisect.bisect_right(self.cumulative, u) - 1
        return offset + self.ends[k] + (u - self.cumulative[k]) / self.scales[k]

    def multiplier(self, t: float) -> float:
        """m(t): the rate multiplier at real time ``t``."""
        if self.periodic:
            t = math.fmod(t, self.ends[-1])
        elif t >= self.ends[-1]:
            return self.scales[-1]
        k = bisect.bisect_right(self.ends, t) - 1
        return self.scales[min(k, len(self.scales) - 1)]
