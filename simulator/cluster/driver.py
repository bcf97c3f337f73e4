"""The cluster driver: arrivals from a source, routed to one pool of instances, on one kernel.

It pulls the source's known arrivals one at a time (so a trace streams), asks the router
where each request goes, feeds closed-loop follow-ups back in when requests finish (or are
rejected), and samples queue lengths every ``sample_interval_s`` while anything is pending —
one record per run of grid points with no event between them, so an idle gap costs one.

Kept open for what comes next (PD disaggregation, several pools, a shared L3 pool across
pools): the driver only needs instances with ``on_arrival`` / ``n_outstanding`` and queues.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence

from simulator.cluster.router import Router
from simulator.core import Kernel
from simulator.core.gc_pause import paused_gc
from simulator.engine.instance import EngineInstance
from simulator.engine.request import EngineRequest
from simulator.records import Recorder
from simulator.workload.request import TraceRequest
from simulator.workload.source import RequestSource

__all__ = ["Cluster"]


class Cluster:
    """One pool of instances behind one router (see the module docstring)."""

    def __init__(
        self,
        kernel: Kernel,
        instances: Sequence[EngineInstance],
        router: Router,
        source: RequestSource,
        recorder: Recorder,
        *,
        sample_interval_s: float = 1.0,
        on_first_token: Callable[[TraceRequest, float, float], None] | None = None,
    ) -> None:
        """``on_first_token(request, first_token_s, now_s)``: told of every first token, at
        the end of the step that produced it (``simulate``'s argument)."""
        if sample_interval_s <= 0:
            raise ValueError("sample_interval_s must be > 0")
        self.kernel = kernel
        self.instances = list(instances)
        self.router = router
        self.source = source
        self.recorder = recorder
        self.sample_interval_s = sample_interval_s
        self.n_out_of_order = 0
        """Arrivals whose timestamp was earlier than the previous one (served at that time)."""
        self.routable = len(self.instances)
        """The router chooses among the first ``routable`` instances (an autoscaler moves it)."""
        self._follow_ups_pending = 0
        self._stream: Iterator[TraceRequest] = iter(())
        self._next: TraceRequest | None = None
        for instance in self.instances:
            instance.on_finish = self._finished
        if on_first_token is not None:
            hook = on_first_token

            def first_token(request: TraceRequest, first_token_s: float) -> None:
                hook(request, first_token_s, kernel.now)

            for instance in self.instances:
                instance.on_first_token = first_token

    def run(self) -> None:
        """Simulate until every request has finished (automatic garbage collection held off
        meanwhile: the loop makes no reference cycles, ``core/gc_pause.py``)."""
        self._stream = self.source.start()
        self._pull()
        self.kernel.at(0.0, self._sample)
        with paused_gc():
            self.kernel.run()

    # ----- arrivals -----------------------------------------------------------------------------
    def _pull(self) -> None:
        self._schedule(next(self._stream, None))

    def _schedule(self, request: TraceRequest | None) -> None:
        self._next = request
        if request is None:
            return
        when = request.timestamp_s
        if when < self.kernel.now:
            self.n_out_of_order += 1
            when = self.kernel.now
        self.kernel.at(when, self._arrive_next)

    def _arrive_next(self) -> None:
        """Deliver the pending arrival and every other one at the same instant in one event, so
        requests that arrive together reach the engines before any step starts and share its
        batch (as a real engine's scheduler would see them)."""
        request = self._next
        assert request is not None
        self._arrive(request)
        now = self.kernel.now
        following = next(self._stream, None)
        while following is not None and following.timestamp_s <= now:
            if following.timestamp_s < now:
                self.n_out_of_order += 1
            self._arrive(following)
            following = next(self._stream, None)
        self._schedule(following)

    def arrivals_done(self) -> bool:
        """No request will arrive any more: the stream is drained and no follow-up is due."""
        return self._next is None and self._follow_ups_pending == 0

    def _arrive(self, request: TraceRequest) -> None:
        routable = (
            self.instances
            if self.routable == len(self.instances)
            else self.instances[: self.routable]
        )
        index = self.router.route(request, routable)
        before = self.recorder.n_rejected
        self.instances[index].on_arrival(request)
        if self.recorder.n_rejected != before:
            self._follow_up(request)

    def _finished(self, req: EngineRequest) -> None:
        self._follow_up(req.trace)

    def _follow_up(self, request: TraceRequest) -> None:
        follow = self.source.on_finish(request, self.kernel.now)
        if follow is not None:
            when = max(follow.timestamp_s, self.kernel.now)
            self._follow_ups_pending += 1
            self.kernel.at(when, lambda: self._arrive_follow_up(follow))

    def _arrive_follow_up(self, request: TraceRequest) -> None:
        self._follow_ups_pending -= 1
        self._arrive(request)

    # ----- sampling -----------------------------------------------------------------------------
    def _sample(self) -> None:
        """Sample the queues at this grid point and at every later one before the next event.

        No event happens before ``kernel.peek()``, so the queues stay as they are until then:
        one record stands for all those grid points (its weight), and the next sample is
        scheduled at the first grid point at or after that event. Memory and time follow the
        events, not the simulated span (a trace with epoch timestamps, or hours idle between
        requests, costs one record per idle gap), and every metric is what one sample per
        grid point gives: the grid points, the values they see and the order of a sample
        among events at the same instant are those of a chain of ``after(interval)`` samples.
        """
        waiting = prefetch = running = swapped = 0
        for instance in self.instances:
            waiting += len(instance.waiting)
            prefetch += len(instance.prefetching)
            running += len(instance.running)
            swapped += len(instance.swapped)
        now = self.kernel.now
        upcoming = self.kernel.peek()
        queues = (waiting, prefetch, running, swapped)
        if upcoming == math.inf:
            self.recorder.sample(now, queues)
            return  # nothing left to happen: the run is over
        last, weight = _last_point_before(now, self.sample_interval_s, upcoming)
        self.recorder.sample(now, queues, weight=weight)
        self.kernel.at(last + self.sample_interval_s, self._sample)


#: Grid points stepped one addition at a time (as chained ``after`` calls place them) before
#: a long gap is crossed arithmetically; busy runs never reach it, so their sample times are
#: bit-identical to a plain chain's.
_EXACT_STEPS = 4096


def _last_point_before(now: float, step: float, upcoming: float) -> tuple[float, float]:
    """The last grid point ``now + k·step`` (k ≥ 0) before ``upcoming`` (> it when k = 0 only
    if ``upcoming`` ≤ ``now + step``), and the number of grid points from ``now`` to it."""
    last, count = now, 1.0
    for _ in range(_EXACT_STEPS):
        following = last + step
        if following >= upcoming:
            return last, count
        last, count = following, count + 1.0
    jump = max(math.floor((upcoming - last) / step) - 1, 0)
    while last + (jump + 1) * step < upcoming:  # floor's rounding, in either direction
        jump += 1
    while jump > 0 and last + jump * step >= upcoming:
        jump -= 1
    return last + jump * step, count + jump
