"""The eviction-policy family: one protocol every policy implements (libCacheSim-like verbs).

A policy holds a set of resident blocks (dense integer ids, one slot each) up to ``capacity``
and decides which to drop. It never decides *whether* to admit: a prefix cache must keep every
block of the request it serves (that is why admission-filtering algorithms are excluded).

Who calls what, in the serve loop (``simulator/kvcache/replay.py``), per request:

    set_request_ctx(ctx)                 # before phase 1 (session / workload-aware policies)
    find(b) for every block              # phase 1: read-only probe, never changes state
    evict_n(n, pinned) ...               # phase 2: only when the request's misses do not fit
    record_request(blocks)               # after phase 2, before phase 3
    access(b, cost, next_access) ...     # phase 3: hit -> update state; miss -> insert
                                         #   (through access_request, one call per request)

``evict`` returns the victims it actually removed (observed identities; the serve loop never
peeks). A policy with ``supports_pinning = True`` never returns a block in ``pinned``; one with
``False`` may, and the serve loop counts it as a self-eviction.

Two optional fast paths let the serve loop avoid per-block method dispatch (the defaults are
exact, only slower): ``resident_view()`` hands out a live container whose ``in`` *is* ``find``,
and ``access_request`` replays a whole request in one call.

What a policy is not: it keeps no statistics (hit counts come from the serve loop's phase 1) and
reads no clock (time comes from ``RequestContext.timestamp_s``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Collection, Container, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from simulator.workload.future import NEVER  # the annotations' sentinel, re-exported

__all__ = ["NEVER", "EvictionPolicy", "RequestContext"]


@dataclass(slots=True)
class RequestContext:
    """What a policy may know about the request being served (set before phase 1)."""

    index: int
    """0-based position of the request in the workload (``TraceRequest.index``; skipped requests
    keep their number, so indices of served requests increase but may have gaps)."""
    timestamp_s: float
    """Arrival time of the request in seconds (one timestamp for all its blocks)."""
    n_blocks: int
    """Number of blocks of the request."""
    category: int = 0
    """Opaque workload category (from trace ``type``/``turn``); 0 = none."""
    session: int = -1
    """Conversation id; -1 = unknown (session policies then treat the request as its own)."""
    session_next_access: int = NEVER
    """``index`` of the session's next request (oracles), ``NEVER`` if none or not annotated
    (the replay annotates only for policies with ``needs_next_access``)."""


class EvictionPolicy(ABC):
    """Base class of every eviction policy; subclasses set ``name`` and implement the verbs.

    Constructor contract: ``Policy(capacity, rng=generator, **params)``; ``capacity`` in blocks
    (≥ 1); ``rng`` is the only source of randomness; ``params`` are the policy's own documented
    keyword parameters (unknown ones raise ``TypeError``).
    """

    name: ClassVar[str]
    supports_pinning: ClassVar[bool] = True
    """Whether ``evict`` honours ``pinned`` (False: victims may be in the request)."""
    needs_next_access: ClassVar[bool] = False
    """Oracles read ``next_access``; the replay then annotates the trace with the future."""
    clock: ClassVar[str] = "access order"
    """What the policy measures age in (``kvplan replay --list-policies``): ``access order``
    (queue/recency order only), ``block accesses``, ``requests``, ``wall seconds`` (trace
    timestamps), ``future`` (oracle access numbers) or ``priority`` (GDSF's inflation)."""

    def __init__(self, capacity: int, *, rng: np.random.Generator, **params: Any) -> None:
        if params:
            raise TypeError(f"{self.name}: unknown parameters {sorted(params)}")
        if capacity < 1:
            raise ValueError(f"{self.name}: capacity must be at least 1 block, got {capacity}")
        self.capacity = capacity
        self.rng = rng

    @abstractmethod
    def __len__(self) -> int:
        """Number of resident blocks."""

    @abstractmethod
    def find(self, block: int) -> bool:
        """Whether ``block`` is resident. Read-only: changes no policy state (update=False)."""

    @abstractmethod
    def access(self, block: int, cost: float, next_access: int) -> None:
        """Serve ``block``: update state on a hit, insert on a miss (space is guaranteed).

        ``cost`` is the block's cost-model weight; ``next_access`` the global index of its next
        access (``NEVER`` if none), meaningful only when ``needs_next_access``.
        """

    @abstractmethod
    def evict(self, pinned: Collection[int]) -> list[int]:
        """Remove at least one resident block; return the removed ids (never empty).

        Called (phase 2) only while some resident block is not in ``pinned``. A policy with
        ``supports_pinning`` never returns a pinned block; it skips pinned blocks without
        changing what it knows about them where its algorithm allows.
        """

    def evict_n(self, n: int, pinned: Collection[int]) -> list[int]:
        """Remove at least ``n`` blocks and return them in eviction order; the serve loop calls
        this (not ``evict``) once per allocation round. Precondition as for ``evict``, for
        ``n`` unpinned blocks. Batched policies override it; this default loops ``evict``."""
        victims: list[int] = []
        while len(victims) < n and len(self):
            freed = self.evict(pinned)
            if not freed:  # a broken policy: let the serve loop report it, do not spin
                break
            victims.extend(freed)
        return victims

    @abstractmethod
    def remove(self, block: int) -> None:
        """Drop ``block`` if resident (no-op otherwise); not an eviction."""

    def access_request(
        self,
        blocks: Sequence[int],
        costs: Sequence[float],
        next_access: Sequence[int] | None,
        deepest_first: bool,
    ) -> None:
        """Phase 3 of one request: ``access`` every block, deepest first or in prefix order.

        ``blocks`` are in prefix order; ``costs[i]`` is the cost of position ``i`` (the sequence
        may be longer than ``blocks``); ``next_access[i]`` likewise, ``None`` meaning ``NEVER``.
        Must be equivalent to the per-block loop below; policies override it only for speed.
        """
        order = range(len(blocks) - 1, -1, -1) if deepest_first else range(len(blocks))
        access = self.access
        if next_access is None:
            for i in order:
                access(blocks[i], costs[i], NEVER)
        else:
            for i in order:
                access(blocks[i], costs[i], next_access[i])

    def resident_view(self) -> Container[int] | None:
        """A live container whose ``in`` answers exactly as ``find`` does, or ``None``.

        Lets the serve loop probe a whole request with C-level membership tests. Return one
        only if ``find`` is a pure membership test of that container (no ghosts, no blocks
        kept elsewhere); the default ``None`` makes the loop call ``find`` per block.
        """
        return None

    def set_request_ctx(self, ctx: RequestContext) -> None:  # noqa: B027  (optional hook)
        """Hook before phase 1 of every served request; default ignores it."""

    def record_request(self, blocks: Sequence[int]) -> None:  # noqa: B027  (optional hook)
        """Hook after phase 2, before phase 3 (blocks not yet resident); default ignores it."""
