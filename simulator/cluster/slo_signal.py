"""The SLO-driven autoscaler's signal: latency percentiles of recently finished requests.

``RecentLatency`` reads the recorder's finished requests (an append-only list) as the simulated
clock passes them and keeps those that finished within the last ``window_s``; ``percentile``
is the p-th percentile of their TTFT or TPOT in milliseconds (``numpy`` ``linear`` method, as
``simulator.metrics`` computes SLO percentiles), and ``queue_share`` the part of their time
to first token spent queued — what more instances can remove (prefill compute they cannot).
A request enters the signal when it finishes, so the signal lags the load by a request's whole
time in the system (what a Prometheus histogram of finished requests gives Dynamo's planner or
an HPA external metric, too).
"""

from __future__ import annotations

import math
from collections import deque

import numpy as np

from simulator.records import Recorder

__all__ = ["RecentLatency"]


class RecentLatency:
    """TTFT and TPOT of the requests finished within a sliding window (module doc)."""

    def __init__(self, recorder: Recorder, window_s: float) -> None:
        self._recorder = recorder
        self._window_s = window_s
        self._seen = 0
        # finish s, ttft ms, tpot ms, queue ms
        self._recent: deque[tuple[float, float, float, float]] = deque()

    def update(self, now: float) -> int:
        """Take in what finished up to ``now``, drop what left the window; return how many
        requests the window holds."""
        records = self._recorder.records
        for record in records[self._seen :]:
            row = (record.finish_s, record.ttft_s * 1e3, record.tpot_s * 1e3, record.queue_s * 1e3)
            self._recent.append(row)
        self._seen = len(records)
        while self._recent and self._recent[0][0] <= now - self._window_s:
            self._recent.popleft()
        return len(self._recent)

    def percentile(self, metric: str, q: float) -> float:
        """The ``q``-th percentile of ``metric`` ('ttft_ms' or 'tpot_ms') over the window, ms
        (NaN when the window holds no request with that metric; one-token outputs have no
        TPOT)."""
        column = {"ttft_ms": 1, "tpot_ms": 2}[metric]
        values = [row[column] for row in self._recent if not math.isnan(row[column])]
        if not values:
            return math.nan
        return float(np.percentile(values, q))

    def queue_share(self) -> float:
        """Queued time over time to first token, summed over the window (NaN when empty)."""
        ttft = sum(row[1] for row in self._recent)
        if ttft <= 0:
            return math.nan
        return min(1.0, sum(row[3] for row in self._recent) / ttft)
