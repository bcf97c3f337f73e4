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

At the first token (``WatchedSource.first_token_hook``, for a caller that passes it to
``simulate(..., on_first_token=...)``): a request with no first token by its arrival plus the
TTFT bar has certainly missed it, and one with its first token at ``f`` must finish by
``f + (n − 1) · P`` (TPOT runs from the recorded first token to the recorded finish; the
worst gap is measured between step ends, so it tightens nothing here). Near the capacity most
misses are TTFT misses of requests that then run for seconds, so deciding them here stops a
failing simulation far sooner. Capacity probes use the hook; without it a request is judged
only by its finish, as above — a trial's own simulation (``optimizer.objective``) is watched
that way, so which trials are given up, and so every study, stays as it was.

Arrival times are the driver's: a timestamp earlier than the previous arrival is served at the
previous arrival's time. What this is not: an SLO evaluator (``slo`` is); it never decides that
a simulation passes.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

from simulator.api import WorkloadBuilder, build_source
from simulator.cluster.overlong import tokens_of
from simulator.workload.request import TraceRequest
from simulator.workload.source import OpenLoopSource

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
        return _padded(min(bounds, default=math.inf))

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
        self._first_tokens = False
        """Whether first tokens are reported (``first_token_hook``): TTFT is then judged."""
        self._due: list[tuple[float, int]] = []
        """(deadline, request index), earliest first; an entry whose deadline is no longer its
        request's ``_open`` deadline (it reached that milestone, or was judged) is skipped."""
        self._open: dict[int, tuple[float, float, float, int]] = {}
        """Request index -> (deadline of its next milestone, deadline of its finish, arrival
        (absolute seconds), output tokens), while it is in the system and not yet judged."""

    def first_token_hook(self) -> Callable[[TraceRequest, float, float], None]:
        """The callback for ``simulate(..., on_first_token=...)``; asked for before the run.

        From then on a request is also judged at its first token: one that has none by
        ``arrival + ttft_s`` has certainly missed TTFT (the record's ``first_token_s`` can only
        be later), and one whose first token came in time must finish within
        ``(n − 1) · tpot_s`` of it (TPOT is measured from the first token), which is sooner
        than ``deadline_s`` allows whenever its TTFT beat the bar.
        """
        self._first_tokens = True
        return self.on_first_token

    def start(self) -> Iterator[TraceRequest]:
        """The requests; the driver pulls each at the previous one's arrival."""
        now = 0.0
        rule, ttft = self._rule, self._rule.ttft_s
        for request in self._source.start():
            self._check(now)
            if not rule.counts(request):
                yield request  # dropped downstream: no deadline, never finishes
                continue
            self._arrived += 1
            now = max(now, request.timestamp_s)
            tokens = max(1, request.output_length)
            finish = now + rule.deadline_s(tokens)
            milestone = finish
            if self._first_tokens and ttft is not None:
                milestone = min(finish, now + _padded(ttft))
            self._open[request.index] = (milestone, finish, now, tokens)
            if milestone < math.inf:
                heapq.heappush(self._due, (milestone, request.index))
            yield request

    def on_first_token(self, request: TraceRequest, first_token_s: float, now_s: float) -> None:
        """``request`` has its first token at ``first_token_s`` (as recorded; the run is at
        ``now_s``): judge its TTFT and tighten its finish deadline — once ``first_token_hook``
        was asked for (else arrivals set no TTFT deadline, and this does nothing)."""
        if not self._first_tokens:
            return
        index = request.index
        entry = self._open.get(index)
        if entry is not None:
            _, finish, arrival, tokens = entry
            ttft, tpot = self._rule.ttft_s, self._rule.tpot_s
            if ttft is not None and first_token_s > arrival + _padded(ttft):
                del self._open[index]  # a certain TTFT miss
                self._missed += 1
            else:
                if tpot is not None and tokens > 1:
                    finish = min(finish, first_token_s + _padded((tokens - 1) * tpot))
                self._open[index] = (finish, finish, arrival, tokens)
                if finish < math.inf:
                    heapq.heappush(self._due, (finish, index))
        self._check(now_s)

    def on_finish(self, request: TraceRequest, now_s: float) -> TraceRequest | None:
        """Count a request that finished past its deadline; an open loop triggers nothing."""
        entry = self._open.pop(request.index, None)
        if entry is not None:  # not judged yet (else: counted while it ran past a deadline)
            self._missed += now_s > entry[1]
        self._check(now_s)
        return None

    def _check(self, now: float) -> None:
        due, open_ = self._due, self._open
        while due and due[0][0] < now:
            deadline, index = heapq.heappop(due)
            entry = open_.get(index)
            if entry is None or entry[0] != deadline:
                continue  # judged already, or past that milestone in time
            del open_[index]  # still short of its milestone past its deadline: a certain miss
            self._missed += 1
        if self._n - self._missed < self._least_met:
            raise Decided(self._arrived, self._missed, self._n)


def _padded(seconds: float) -> float:
    """``seconds`` with the rounding slack (``_SLACK``) on top."""
    return seconds * (1 + _SLACK) + _SLACK


class Watched:
    """A workload builder whose sources are ``WatchedSource``s.

    ``counts`` caches the number of requests across the simulations of one search (a list,
    empty until the first build counts them): every simulation rebuilds the same requests.
    """

    def __init__(self, workload: WorkloadBuilder, rule: MissRule, counts: list[int]) -> None:
        self.workload = workload
        self.rule = rule
        self.counts = counts

    def source(self, seed: int) -> WatchedSource:
        """The watched source ``simulate(..., seed=seed)`` would build from this builder (to
        take its ``first_token_hook`` before the run)."""
        source = build_source(self, seed)
        assert isinstance(source, WatchedSource)
        return source

    def build(self, rng: np.random.Generator) -> WatchedSource:
        """The inner workload's source, watched."""
        source = self.workload.build(rng)
        assert isinstance(source, OpenLoopSource)  # capacity search checked it
        if not self.counts:
            # Open-loop sources re-iterate; requests the run drops are not counted.
            self.counts.append(sum(1 for r in source.start() if self.rule.counts(r)))
        return WatchedSource(source, self.rule, self.counts[0])
