"""``Host``: what code outside ``EngineInstance`` may read and change on an instance.

The decode-side admission of a handed-off request (``remote.admit_remote``) and the
consistency checks (``invariants.check_instance``) work on an instance's queues and KV tiers;
this protocol names exactly those members, so they do not depend on the instance's private
state. ``SchedulerHost`` (``scheduler.py``) is the scheduler's narrower view.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from simulator.engine.kvmanager import KVManager
    from simulator.engine.request import EngineRequest

__all__ = ["Host"]


class Host(Protocol):
    """The queues, limits and KV tiers of one engine instance."""

    kv: KVManager
    """The instance's L1 / L2 tiers (and the shared L3)."""
    block_tokens: int
    """Tokens per KV block."""
    max_running: int
    """Most requests in ``running`` at once."""
    prefetching: dict[int, EngineRequest]
    """Requests whose L3 → L2 prefetch is in flight, by index."""
    waiting: deque[EngineRequest]
    """FCFS queue of requests not admitted yet (a preempted one re-enters at the front)."""
    running: list[EngineRequest]
    """Admitted requests, in admission order (preemption takes from the tail)."""
    swapped: deque[EngineRequest]
    """Requests swapped out to L2."""
    sending: dict[int, EngineRequest]
    """PD prefill side: prefilled requests holding their KV here until sent, by index."""

    @property
    def now(self) -> float:
        """Current simulated time (s)."""
        ...
