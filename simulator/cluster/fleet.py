"""What an autoscaled fleet did: instance counts over time, the bill, and per-window figures.

``FleetLog`` is written by the autoscaler (``autoscale.py``): the counts of serving, starting
and draining instances after every change, and the instance-seconds paid for. ``FleetSummary``
prices it; ``FleetSummary.windows`` cuts the run into windows (by arrival time) with the
time-averaged fleet and the latency of the requests that arrived in each.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from simulator.metrics import Cost
from simulator.records import RequestRecord

__all__ = ["FleetLog", "FleetSummary", "FleetWindow", "fleet_summary"]


@dataclass
class FleetLog:
    """What the autoscaler did: instance counts after every change, and the bill."""

    times_s: list[float] = field(default_factory=list)
    serving: list[int] = field(default_factory=list)
    starting: list[int] = field(default_factory=list)
    draining: list[int] = field(default_factory=list)
    instance_seconds: float = 0.0
    """Instance-seconds paid for (starting, serving or draining), up to the last tick."""
    n_started: int = 0
    n_stopped: int = 0
    startup_s: float = 0.0

    def paid_at(self, index: int) -> int:
        """Instances paid for after change ``index``."""
        return self.serving[index] + self.starting[index] + self.draining[index]

    def mean_between(self, start_s: float, end_s: float) -> tuple[float, float]:
        """Time-averaged (serving, paid for) instances over ``[start_s, end_s)``; the counts
        after change k hold from ``times_s[k]`` to the next change."""
        if end_s <= start_s:
            return 0.0, 0.0
        serving = paid = 0.0
        ends = [*self.times_s[1:], math.inf]
        for k, (begin, until) in enumerate(zip(self.times_s, ends, strict=True)):
            overlap = min(until, end_s) - max(begin, start_s)
            if overlap > 0:
                serving += self.serving[k] * overlap
                paid += self.paid_at(k) * overlap
        span = end_s - start_s
        return serving / span, paid / span


@dataclass(frozen=True, slots=True)
class FleetWindow:
    """One window of an autoscaled run (requests by arrival time; latencies in ms)."""

    start_s: float
    end_s: float
    requests: int
    """Finished requests that arrived in the window."""
    serving: float
    """Serving instances, time-averaged over the window."""
    paid: float
    """Instances paid for (starting, serving, draining), time-averaged."""
    ttft_p90_ms: float
    tpot_p90_ms: float
    attainment: float | None = None
    """Share of the window's requests marked in ``met`` (None: no mask given, or no request)."""


@dataclass(frozen=True)
class FleetSummary:
    """An autoscaled run's fleet: counts over time and what the period cost."""

    log: FleetLog
    period_s: float
    """From time 0 to the last finish, seconds."""
    mean_instances: float
    """Instances paid for, averaged over the period."""
    usd_for_period: float
    average_cost: Cost
    """The hourly price averaged over the period (GPUs and DRAM scale with the instances paid
    for; an L3 tier is paid throughout)."""

    def to_dict(self) -> dict[str, object]:
        """JSON-ready: the timeline as parallel lists, and the bill."""
        log = self.log
        return {
            "period_s": self.period_s,
            "mean_instances": self.mean_instances,
            "usd_for_period": self.usd_for_period,
            "usd_per_hour": self.average_cost.usd_per_hour,
            "instances_started": log.n_started,
            "instances_stopped": log.n_stopped,
            "startup_s": log.startup_s,
            "timeline": {
                "time_s": list(log.times_s),
                "serving": list(log.serving),
                "starting": list(log.starting),
                "draining": list(log.draining),
            },
        }

    def windows(
        self,
        records: Sequence[RequestRecord],
        window_s: float,
        met: np.ndarray | None = None,
    ) -> list[FleetWindow]:
        """The run cut into ``window_s`` windows from 0 to the period's end; ``met`` (one bool
        per record, e.g. "met every SLO target") gives each window its share as
        ``attainment``."""
        arrivals = np.array([r.arrival_s for r in records])
        ttft = np.array([r.ttft_s for r in records]) * 1e3
        tpot = np.array([r.tpot_s for r in records]) * 1e3  # NaN for one-token answers
        out = []
        start = 0.0
        while start < self.period_s:
            end = min(start + window_s, self.period_s)
            inside = (arrivals >= start) & (arrivals < end)
            serving, paid = self.log.mean_between(start, end)
            out.append(
                FleetWindow(
                    start,
                    end,
                    int(inside.sum()),
                    serving,
                    paid,
                    _p90(ttft[inside]),
                    _p90(tpot[inside]),
                    float(met[inside].mean()) if met is not None and inside.any() else None,
                )
            )
            start = end
        return out


def fleet_summary(log: FleetLog, largest: Cost, instances: int, period_s: float) -> FleetSummary:
    """The bill of ``log`` over ``period_s``, pricing an instance at ``largest`` (the cost of
    ``instances`` of them) ÷ ``instances`` for its GPUs and DRAM."""
    seconds = max(period_s, 1e-9)
    share = log.instance_seconds / (instances * seconds)
    average = Cost(
        largest.gpus,
        largest.gpu_usd_per_hour * share,
        largest.dram_usd_per_hour * share,
        largest.l3_usd_per_hour,
    )
    return FleetSummary(
        log=log,
        period_s=period_s,
        mean_instances=log.instance_seconds / seconds,
        usd_for_period=average.usd_per_hour * seconds / 3600.0,
        average_cost=average,
    )


def _p90(values: np.ndarray) -> float:
    """The 90th percentile of the finite values (NaN when there are none)."""
    finite = values[np.isfinite(values)]
    return float(np.percentile(finite, 90)) if finite.size else math.nan
