"""The event kernel: time order, FIFO ties, cancellation, no shared state between runs."""

from __future__ import annotations

import functools
import math

import pytest

from simulator.core import Kernel


def test_events_run_in_time_order_and_ties_in_scheduling_order() -> None:
    kernel = Kernel()
    seen: list[tuple[float, str]] = []
    for time_s, name in [(2.0, "c"), (1.0, "a"), (2.0, "d"), (1.0, "b"), (0.5, "first")]:
        kernel.at(time_s, functools.partial(seen.append, (time_s, name)))
    kernel.run()
    assert seen == [(0.5, "first"), (1.0, "a"), (1.0, "b"), (2.0, "c"), (2.0, "d")]
    assert kernel.now == 2.0
    assert kernel.n_events == 5


def test_handlers_see_the_clock_and_can_schedule_more() -> None:
    kernel = Kernel()
    times: list[float] = []

    def tick() -> None:
        times.append(kernel.now)
        if len(times) < 4:
            kernel.after(0.25, tick)

    kernel.at(1.0, tick)
    kernel.run()
    assert times == [1.0, 1.25, 1.5, 1.75]


def test_cancelled_events_never_run() -> None:
    kernel = Kernel()
    ran: list[str] = []
    keep = kernel.at(1.0, lambda: ran.append("keep"))
    drop = kernel.at(0.5, lambda: ran.append("drop"))
    kernel.cancel(drop)
    assert kernel.peek() == 1.0
    kernel.run()
    assert ran == ["keep"]
    assert keep != drop
    assert kernel.peek() == math.inf


def test_run_until_stops_before_later_events() -> None:
    kernel = Kernel()
    ran: list[float] = []
    for t in (1.0, 2.0, 3.0):
        kernel.at(t, functools.partial(ran.append, t))
    kernel.run(until_s=2.0)
    assert ran == [1.0, 2.0]
    kernel.run()
    assert ran == [1.0, 2.0, 3.0]


def test_scheduling_in_the_past_is_an_error() -> None:
    kernel = Kernel()
    kernel.at(1.0, lambda: None)
    kernel.run()
    with pytest.raises(ValueError, match="past"):
        kernel.at(0.5, lambda: None)


def test_two_kernels_do_not_share_sequence_numbers() -> None:
    first, second = Kernel(), Kernel()
    assert first.at(0.0, lambda: None) == second.at(0.0, lambda: None) == 0
