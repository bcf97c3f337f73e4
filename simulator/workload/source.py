"""Request sources: where arrivals come from, open or closed loop.

A source is event-driven: ``start()`` yields the requests whose arrival times are known up
front, in non-decreasing time order (a trace, an open-loop generator, the first request of
every closed-loop user); ``on_finish(request, now)`` is called when a request finishes and may
return a follow-up request (a closed-loop user's next turn) with ``timestamp_s ≥ now``.

What a source is not: it does not schedule events or know instances; the cluster driver pulls
from ``start()`` one arrival at a time, so a long trace is never held in memory.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Protocol, runtime_checkable

from simulator.workload.request import TraceRequest

__all__ = ["OpenLoopSource", "RequestSource"]


@runtime_checkable
class RequestSource(Protocol):
    """Arrivals for one simulation (see the module docstring)."""

    block_tokens: int
    """Tokens per block of the requests' ``block_ids`` (the engine's unit of prefix reuse)."""

    def start(self) -> Iterator[TraceRequest]:
        """Requests known in advance, in non-decreasing ``timestamp_s`` (called once)."""
        ...

    def on_finish(self, request: TraceRequest, now_s: float) -> TraceRequest | None:
        """A request finished at ``now_s``; return the next one it triggers, if any."""
        ...


class OpenLoopSource:
    """A fixed sequence of requests (a trace or a synthetic open-loop workload)."""

    def __init__(self, requests: Iterable[TraceRequest], block_tokens: int) -> None:
        if block_tokens < 1:
            raise ValueError("block_tokens must be ≥ 1")
        self._requests = requests
        self.block_tokens = block_tokens

    def start(self) -> Iterator[TraceRequest]:
        """The requests, as given."""
        return iter(self._requests)

    def on_finish(self, request: TraceRequest, now_s: float) -> TraceRequest | None:
        """Open loop: finishing triggers nothing."""
        del request, now_s
        return None
