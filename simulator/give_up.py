"""Giving up on a simulation once its SLO attainment can no longer be met.

A capacity search spends most of its time in overloaded simulations that fail their SLO, and an
overloaded simulation is the slowest kind (long queues, every request in every step). Yet the
failure is often certain early: an SLO with an attainment floor ``A`` (the share of requests
that must meet every per-request bar) fails as soon as so many of its ``N`` requests have
*certainly* missed a bar that fewer than ``A · N`` are left to meet them. ``WatchedSource``
wraps an open-loop source, watches arrivals and finishes from the outside, and raises
``Decided`` (out of ``simulate``) at that moment; the caller records the simulation as failing.

When a request has certainly missed (``MissRule``): with per-request bars on TTFT ``T``, TPOT
``P``, worst inter-token gap ``I`` or end-to-end latency ``E`` (seconds), a request of ``n``
output tokens that meets every bar finishes within ``E``, and within ``T + (n − 1) · min(P, I)``
of its arrival (TTFT plus ``n − 1`` gaps; ``n = 1``: within ``T``). So a request that has not
finished by then, or finished later, has missed one. Only that is counted — never a guess —
so a simulation given up on would have failed in full: the capacity found is unchanged.
Rejected requests (which miss everything) are not told apart from finished ones at the
source, so they are not counted: giving up only comes later.

Arrival times are the driver's: a timestamp earlier than the previous arrival is served at the
previous arrival's time. What this is not: an SLO evaluator (``slo`` is); it never decides that
a simulation passes.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from simulator.api import WorkloadBuilder
from simulator.cluster.overlong import tokens_of
from simulator.workload.request import TraceRequest
from simulator.workload.source import OpenLoopSource, RequestSource

__all__ = ["Decided", "MissRule", "Watched", "WatchedSource"]

#: Relative slack on a deadline, so that float rounding in the records' latencies can never make
#: a request counted here meet its bar there.
_SLACK = 1e-9


class Decided(Exception):  # noqa: N818  (a signal, not an error)
    """Raised out of ``simulate`` when the attainment floor can no longer be met.

    ``arrived``: requests that had arrived by then (the part of the workload simulated);
    ``missed``: those that had certainly missed a bar; ``n_requests``: the requests counted.
    """

    def __init__(self, arrived: int = 0, missed: int = 0, n_requests: int = 0) -> None:
        super().__init__(f"{missed} of {n_requests} requests missed after {arrived} arrived")
        self.arrived = arrived
        self.missed = missed
        self.n_requests = n_requests


@dataclass(frozen=True, slots=True)
class MissRule:
    """An attainment floor and the per-request bars it counts (seconds; None = no bar)."""

    floor: float
    """Share of requests that must meet every bar, in (0, 1]."""
    ttft_s: float | None = None
    tpot_s: float | None = None
    itl_s: float | None = None
    e2e_s: float | None = None
    max_context_tokens: int | None = None
    """Requests longer than this (prompt + output tokens) are left out of the count: the run
    drops them before they reach the engine (``drop_overlong_requests``), so they are not in
    the attainment's denominator either. None: every request counts."""

    def __post_init__(self) -> None:
        if not 0 < self.floor <= 1:
            raise ValueError(f"attainment floor must be in (0, 1], got {self.floor}")

    def deadline_s(self, output_tokens: int) -> float:
        """Seconds after arrival past which a request of ``output_tokens`` has certainly missed
        a bar (``math.inf`` when the bars do not bound its end-to-end latency)."""
        bounds = [self.e2e_s] if self.e2e_s is not None else []
        if self.ttft_s is not None:
            if output_tokens <= 1:
                bounds.append(self.ttft_s)
            else:
                gaps = [b for b in (self.tpot_s, self.itl_s) if b is not None]
                if gaps:
                    bounds.append(self.ttft_s + (output_tokens - 1) * min(gaps))
        return min(bounds, default=math.inf) * (1 + _SLACK) + _SLACK

    @property
    def bounded(self) -> bool:
        """Whether any request can be counted (the bars bound some end-to-end latency)."""
        return self.e2e_s is not None or (
            self.ttft_s is not None and (self.tpot_s is not None or self.itl_s is not None)
        )

    def counts(self, request: TraceRequest) -> bool:
        """Whether ``request`` is one of the requests the floor is a share of."""
        limit = self.max_context_tokens
        return limit is None or tokens_of(request) <= limit


class WatchedSource:
    """``source`` (open loop, ``n_requests`` requests) raising ``Decided`` (module docstring)."""

    def __init__(self, source: OpenLoopSource, rule: MissRule, n_requests: int) -> None:
        self.block_tokens = source.block_tokens
        self._source = source
        self._rule = rule
        # Fewer requests than this can meet every bar: the floor is out of reach. The margin
        # keeps a share exactly at the floor (which meets it) on the safe side of rounding.
        self._n = n_requests
        self._least_met = rule.floor * n_requests - 1e-6
        self._missed = 0
        self._arrived = 0
        self._due: list[tuple[float, int]] = []
        """(deadline, request index) of the requests with a finite deadline, earliest first."""
        self._settled: set[int] = set()
        """Requests of ``_due`` already settled (finished, or counted) before their deadline
        comes up in ``_check``."""
        self._deadline: dict[int, float] = {}
        """Request index -> its deadline (absolute seconds), while it is in the system."""

    def start(self) -> Iterator[TraceRequest]:
        """The requests; the driver pulls each at the previous one's arrival."""
        now = 0.0
        for request in self._source.start():
            self._check(now)
            if not self._rule.counts(request):
                yield request  # dropped downstream: no deadline, never finishes
                continue
            self._arrived += 1
            now = max(now, request.timestamp_s)
            deadline = now + self._rule.deadline_s(max(1, request.output_length))
            self._deadline[request.index] = deadline
            if deadline < math.inf:
                heapq.heappush(self._due, (deadline, request.index))
            yield request

    def on_finish(self, request: TraceRequest, now_s: float) -> TraceRequest | None:
        """Count a request that finished past its deadline; an open loop triggers nothing."""
        index = request.index
        deadline = self._deadline.pop(index)
        if index in self._settled:
            self._settled.discard(index)  # counted while it ran past its deadline
        elif deadline < math.inf:
            self._missed += now_s > deadline
            self._settled.add(index)  # its entry in ``_due`` is skipped when it comes up
        self._check(now_s)
        return None

    def _check(self, now: float) -> None:
        due, settled = self._due, self._settled
        while due and due[0][0] < now:
            _, index = heapq.heappop(due)
            if index in settled:
                settled.discard(index)  # it finished: already judged in ``on_finish``
                continue
            settled.add(index)  # still running past its deadline: a certain miss
            self._missed += 1
        if self._n - self._missed < self._least_met:
            raise Decided(self._arrived, self._missed, self._n)


class Watched:
    """A workload builder whose sources are ``WatchedSource``s.

    ``counts`` caches the number of requests across the simulations of one search (a list,
    empty until the first build counts them): every simulation rebuilds the same requests.
    """

    def __init__(self, workload: WorkloadBuilder, rule: MissRule, counts: list[int]) -> None:
        self.workload = workload
        self.rule = rule
        self.counts = counts

    def build(self, rng: np.random.Generator) -> RequestSource:
        """The inner workload's source, watched."""
        source = self.workload.build(rng)
        assert isinstance(source, OpenLoopSource)  # capacity search checked it
        if not self.counts:
            # Open-loop sources re-iterate; requests the run drops are not counted.
            self.counts.append(sum(1 for r in source.start() if self.rule.counts(r)))
        return WatchedSource(source, self.rule, self.counts[0])
