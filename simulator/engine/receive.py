"""When a running engine looks at newly arrived requests: every step boundary, or, with a
receive interval (SGLang ``--scheduler-recv-interval``), after any step that ran a prefill, when
idle, and otherwise once every ``interval`` decode-only steps.

SGLang's scheduler loop asks its ``SchedulerRecvSkipper`` before reading its request socket:
a counter grows by the weight of the last forward pass (a decode step 1, an extend step far
more than any threshold, an idle pass 1) and requests are read only once it reaches the
interval, then it restarts. At load that holds a new request back by up to ``interval`` decode
steps before it can be scheduled — the price of polling the socket less often. Requests that
arrived before the last look stay visible (and wait for room as usual).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["ReceiveInterval"]


class ReceiveInterval:
    """The looks at new arrivals of one engine instance (module docstring); times in s."""

    __slots__ = ("interval", "last_s", "steps")

    def __init__(self, interval: int) -> None:
        if interval < 1:
            raise ValueError("receive interval must be >= 1")
        self.interval = interval
        """Decode-only steps between two looks (1: every step boundary)."""
        self.last_s = 0.0
        """When the engine last looked."""
        self.steps = 0
        """Decode-only steps since then."""

    def look(self, now: float, running: bool) -> float | None:
        """A step boundary at ``now`` of an engine with requests ``running`` (or not): None
        where it looks at new arrivals (recorded), else the time of the last look — requests
        queued after it are not seen yet."""
        if self.interval <= 1 or not running or self.steps >= self.interval:
            self.last_s, self.steps = now, 0
            return None
        return self.last_s

    def steps_to_look(self) -> int:
        """Decode-only steps until the next look (at least 1)."""
        return max(1, self.interval - self.steps)

    def ran(self, batch: Mapping[Any, int], k: int) -> None:
        """``k`` steps of ``batch`` (request → new tokens) ended: a prefill makes the next
        boundary a look; decode-only steps count towards it."""
        if self.interval <= 1:
            return
        if any(n > 1 for n in batch.values()):
            self.steps = self.interval
        else:
            self.steps += k
