"""Session-level eviction: the victim is a conversation, not a block (PrefixSim sessionCache).

Each session *claims* the distinct blocks of its latest turn; a block's claim count is the
number of sessions whose latest turn holds it. ``record_request`` claims the new turn's path
*before* releasing the previous turn's, so blocks the two turns share never touch zero.
Evicting a session releases all its claims and frees exactly the resident blocks whose count
drops to 0: a shared system prompt stays while any conversation still holds it.

Resident blocks with no claim (*orphans*: blocks a conversation's new turn dropped, blocks
accessed without ``record_request``, pinned blocks of an evicted session) are freed first,
oldest orphan first, before any session is chosen.

``evict`` frees at least one block: a chosen session that frees nothing (all its blocks are
claimed by others or pinned) is dropped and the next one is tried. Pinned blocks are never
freed; one whose claims reach 0 during the eviction becomes an orphan (the request being
served re-claims it in ``record_request``). Evicting a whole session may free more blocks
than asked for; the serve loop only needs *at least* its deficit.

Sessions come from ``RequestContext.session``; without one (``-1``) each request is its own
session and the policy warns once. Session keys for those are negative ints below -1.
"""

from __future__ import annotations

import warnings
from abc import abstractmethod
from collections import OrderedDict
from collections.abc import Collection, Iterable, Sequence
from typing import Any, ClassVar

import numpy as np

from simulator.kvcache.policies._common import KeyedHeap, ResidentKeysPolicy, nothing_evictable
from simulator.kvcache.policies.base import NEVER, RequestContext

__all__ = ["NO_SESSION_WARNING", "SessionBelady", "SessionLru"]

#: What a session policy warns (after its name) the first time a request has no session id.
NO_SESSION_WARNING = "requests carry no session id; each request is its own session"


class _SessionPolicy(ResidentKeysPolicy):
    """Claims, orphans and the eviction loop; subclasses order the sessions."""

    def __init__(self, capacity: int, *, rng: np.random.Generator, **params: Any) -> None:
        super().__init__(capacity, rng=rng, **params)
        self._resident: set[int] = set()
        self._claims: dict[int, int] = {}
        self._paths: dict[int, tuple[int, ...]] = {}  # session -> distinct blocks, latest turn
        self._orphans: OrderedDict[int, None] = OrderedDict()  # unclaimed resident, oldest first
        self._current: int | None = None
        self._current_next = NEVER  # session_next_access of the request being served
        self._next_anonymous = -2
        self._warned = False

    # -- the session order, implemented by subclasses -------------------------------------
    @abstractmethod
    def _touch(self, session: int, next_access: int) -> None:
        """The session is being served (``next_access``: request index of its next turn)."""

    @abstractmethod
    def _pop_victim_session(self) -> int | None:
        """Remove and return the next session to evict; ``None`` when there is none."""

    # -- hooks -----------------------------------------------------------------------------
    def set_request_ctx(self, ctx: RequestContext) -> None:
        session = ctx.session if ctx.session >= 0 else self._anonymous_session()
        self._current = session
        self._current_next = ctx.session_next_access
        self._paths.setdefault(session, ())
        self._touch(session, ctx.session_next_access)

    def _anonymous_session(self) -> int:
        if not self._warned:
            self._warned = True
            warnings.warn(
                f"{self.name}: {NO_SESSION_WARNING}",
                RuntimeWarning,
                stacklevel=3,
            )
        session = self._next_anonymous
        self._next_anonymous -= 1
        return session

    def record_request(self, blocks: Sequence[int]) -> None:
        if self._current is None:  # a driver without set_request_ctx
            self._current, self._current_next = self._anonymous_session(), NEVER
        session, self._current = self._current, None
        if session not in self._paths:  # the session itself was evicted in phase 2
            self._touch(session, self._current_next)
        path = tuple(dict.fromkeys(blocks))
        for block in path:
            self._claims[block] = self._claims.get(block, 0) + 1
            self._orphans.pop(block, None)
        old = self._paths.get(session, ())
        self._paths[session] = path
        for block in old:
            if self._release(block) and block in self._resident:
                self._orphans[block] = None

    def _release(self, block: int) -> bool:
        """Drop one claim on ``block``; True if none is left."""
        count = self._claims[block] - 1
        if count:
            self._claims[block] = count
            return False
        del self._claims[block]
        return True

    # -- verbs -----------------------------------------------------------------------------
    def access(self, block: int, cost: float, next_access: int) -> None:
        del cost, next_access  # sessions, not blocks, carry the order
        if block not in self._resident:
            self._resident.add(block)
            if block not in self._claims:
                self._orphans[block] = None

    def _replay(self, blocks: Iterable[int]) -> None:
        access = self.access  # per block, as the base loop did: claims need no inlining
        for block in blocks:
            access(block, 0.0, NEVER)

    def evict_n(self, n: int, pinned: Collection[int]) -> list[int]:
        unpinned_orphans = (b for b in self._orphans if b not in pinned)
        victims = [b for b, _ in zip(unpinned_orphans, range(n), strict=False)]
        for block in victims:
            del self._orphans[block]
            self._resident.remove(block)
        while len(victims) < n:
            session = self._pop_victim_session()
            if session is None:
                break
            for block in self._paths.pop(session, ()):
                if self._release(block) and block in self._resident:
                    if block in pinned:
                        self._orphans[block] = None
                    else:
                        self._resident.remove(block)
                        victims.append(block)
        if not victims and n > 0 and self._resident:
            raise nothing_evictable(self.name)
        return victims

    def remove(self, block: int) -> None:
        self._resident.discard(block)
        self._orphans.pop(block, None)


class SessionLru(_SessionPolicy):
    """Evict the least recently served session. No parameters; honours pins."""

    name = "session_lru"

    def __init__(self, capacity: int, *, rng: np.random.Generator, **params: Any) -> None:
        super().__init__(capacity, rng=rng, **params)
        self._order: OrderedDict[int, None] = OrderedDict()  # LRU first

    def _touch(self, session: int, next_access: int) -> None:
        del next_access  # recency only
        self._order[session] = None
        self._order.move_to_end(session)

    def _pop_victim_session(self) -> int | None:
        if not self._order:
            return None
        return self._order.popitem(last=False)[0]


class SessionBelady(_SessionPolicy):
    """Evict the session whose next turn is furthest (``ctx.session_next_access``; sessions
    with no next turn first); ties evict the least recently served. Oracle: the serve loop
    must fill ``session_next_access``. No parameters; honours pins."""

    name = "session_belady"
    clock: ClassVar[str] = "future"
    needs_next_access = True

    def __init__(self, capacity: int, *, rng: np.random.Generator, **params: Any) -> None:
        super().__init__(capacity, rng=rng, **params)
        self._heap = KeyedHeap()  # (-next turn, serve sequence number)
        self._seq = 0

    def _touch(self, session: int, next_access: int) -> None:
        self._seq += 1
        self._heap.set(session, (-next_access, self._seq))

    def _pop_victim_session(self) -> int | None:
        popped = self._heap.pop_n(1, ())
        return popped[0][1] if popped else None
