"""The time integral of an instance's L1 use, for its time-averaged KV utilisation.

L1 use (blocks held by in-flight requests over L1's capacity) is piecewise constant between
the moments the instance marks (``mark``: a step starts or ends, a request leaves) and grows
roughly linearly through a decode run, which ``run_ended`` integrates with the trapezoid rule.
What this module is not: it does not read queues or requests, only the tier's counts.
"""

from __future__ import annotations

import math

from simulator.engine.tiers import CacheTier

__all__ = ["KvUseIntegral"]


class KvUseIntegral:
    """∫ (L1 in use / capacity) dt from time 0, updated at marks."""

    __slots__ = ("_area", "_l1", "_last_s", "_last_u")

    def __init__(self, l1: CacheTier) -> None:
        self._l1 = l1
        self._area = 0.0
        """Integral up to ``_last_s`` (seconds × share)."""
        self._last_s = 0.0
        self._last_u = 0.0
        """Share in use since ``_last_s``."""

    def mark(self, now: float) -> None:
        """L1 use may have changed at ``now``: close the constant piece since the last mark."""
        self._area += self._last_u * (now - self._last_s)
        self._last_s = now
        l1 = self._l1
        self._last_u = (len(l1.pins) + l1.private) / l1.capacity  # ``in_use()``, inlined

    def run_ended(self, end_s: float) -> None:
        """A decode run ended at ``end_s``: its use grew from the last mark's to today's."""
        u0 = self._last_u
        u1 = self._l1.in_use() / self._l1.capacity
        self._area += 0.5 * (u0 + u1) * (end_s - self._last_s)
        self._last_s, self._last_u = end_s, u1

    def average(self, until_s: float) -> float:
        """Time-averaged share of L1 in use from 0 to ``until_s`` (0 when ``until_s`` ≤ 0)."""
        area = self._area + self._last_u * max(0.0, until_s - self._last_s)
        return area / until_s if until_s > 0 else 0.0

    def check(self) -> None:
        """Raise ``AssertionError`` if the integral is NaN."""
        if math.isnan(self._area):
            raise AssertionError("KV utilisation integral is NaN")
