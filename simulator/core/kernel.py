"""The discrete-event kernel: a heap of ``(time, seq, handler)`` and a clock (SimPy-small).

Domain code (instances, routers, workload sources) never touches the heap: it calls ``at`` /
``after`` with a zero-argument handler and keeps the returned token if it may need to
``cancel`` the event. Events at the same time run in the order they were scheduled (``seq`` is
a per-kernel counter, so two simulations in one process never share state).

What the kernel is not: it knows no processes, resources or priorities, and it never reads the
wall clock. Time is a float in seconds from the start of the simulation.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable

__all__ = ["Handler", "Kernel"]

Handler = Callable[[], None]
"""What an event runs: a zero-argument callable (a bound method or a closure)."""


class Kernel:
    """One simulation's clock and future-event list."""

    __slots__ = ("_cancelled", "_heap", "_seq", "n_events", "now")

    def __init__(self) -> None:
        self.now: float = 0.0
        """Current simulation time in seconds (the time of the event being handled)."""
        self.n_events: int = 0
        """Events handled so far (cancelled ones excluded)."""
        self._heap: list[tuple[float, int, Handler]] = []
        self._seq = 0
        self._cancelled: set[int] = set()

    def at(self, time_s: float, handler: Handler) -> int:
        """Run ``handler`` at absolute time ``time_s`` (≥ now); return a token for ``cancel``."""
        if time_s < self.now:
            raise ValueError(f"cannot schedule in the past: {time_s} < now {self.now}")
        seq = self._seq
        self._seq = seq + 1
        heapq.heappush(self._heap, (time_s, seq, handler))
        return seq

    def after(self, delay_s: float, handler: Handler) -> int:
        """Run ``handler`` ``delay_s`` seconds from now (``delay_s`` ≥ 0)."""
        return self.at(self.now + delay_s, handler)

    def cancel(self, token: int) -> None:
        """Drop a scheduled event (lazily: it is skipped when it reaches the top of the heap).

        Cancelling an event that already ran is a programming error the kernel cannot detect;
        callers clear their tokens when the event fires.
        """
        self._cancelled.add(token)

    def peek(self) -> float:
        """Time of the next live event, ``inf`` if none."""
        heap, cancelled = self._heap, self._cancelled
        while heap and heap[0][1] in cancelled:
            cancelled.discard(heapq.heappop(heap)[1])
        return heap[0][0] if heap else math.inf

    def run(self, until_s: float = math.inf) -> None:
        """Handle events in time order until none is left or the next is after ``until_s``."""
        heap, cancelled, pop = self._heap, self._cancelled, heapq.heappop
        handled = 0
        while heap:
            if heap[0][0] > until_s:
                break
            time_s, seq, handler = pop(heap)
            if cancelled and seq in cancelled:
                cancelled.discard(seq)
                continue
            self.now = time_s
            handled += 1
            handler()
        self.n_events += handled

    def __len__(self) -> int:
        """Scheduled events, cancelled ones not yet skipped included."""
        return len(self._heap)
