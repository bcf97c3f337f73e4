"""More session-level policies (PrefixSim sessionCache): sampled by cost, and S3-FIFO over
sessions. Claims, orphans and the eviction loop are ``session._SessionPolicy``'s; these
classes only order the sessions.

- ``session_random_compute``: sample ``n_sample`` (8) sessions uniformly with replacement and
  evict the one with the lowest ``cost_sum / age``: ``cost_sum`` = cost-model weight summed
  over the resident blocks of its latest turn, ``age`` = session touches since it was last
  served + 1 (one touch per served request, so in requests). Ties: older, then lower key.
- ``session_s3fifo``: S3-FIFO with sessions as objects. A new session enters the small FIFO
  S; a session served again while in S or the main FIFO M counts a touch (capped at 3). While
  S holds at least ``small_ratio`` (0.1) of the queued sessions (at least 1), S's oldest leaves
  S: to M if it was served again while in S, else it is the victim and its id enters the ghost
  FIFO (as many ids as sessions in M, at least 1). Otherwise M's oldest is the victim, or
  goes back to M's head with one touch fewer if it has any. A new session whose id is in the
  ghost enters M directly.
- ``session_arc``: ARC (Megiddo & Modha) with sessions as objects. T1 holds sessions served
  once since they (re-)entered, T2 sessions served again; B1/B2 remember the ids of sessions
  evicted from each. A session found in B1 raises the target size p of T1 by
  max(1, |B2|/|B1|), one found in B2 lowers it by max(1, |B1|/|B2|); both enter T2. The victim
  is T1's least recent session while |T1| > p (or T2 is empty), else T2's. The "cache size" c
  of ARC is the number of sessions queued (T1 + T2, at least 1), which bounds p and each ghost.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Collection, Sequence
from typing import Any, ClassVar

import numpy as np

from simulator.kvcache.policies._common import ResidentSample
from simulator.kvcache.policies.session import _SessionPolicy

__all__ = ["SessionArc", "SessionRandomCompute", "SessionS3Fifo"]

_TOUCH_CAP = 3


class SessionRandomCompute(_SessionPolicy):
    """Params: ``n_sample`` (default 8) sessions drawn per victim. Honours pins."""

    name = "session_random_compute"
    clock: ClassVar[str] = "requests"

    def __init__(
        self, capacity: int, *, rng: np.random.Generator, n_sample: int = 8, **params: Any
    ) -> None:
        super().__init__(capacity, rng=rng, **params)
        if n_sample < 1:
            raise ValueError(f"{self.name}: n_sample must be ≥ 1, got {n_sample}")
        self.n_sample = n_sample
        self._sessions = ResidentSample()
        self._last: dict[int, int] = {}
        self._cost: dict[int, float] = {}
        self._tick = 0

    def _touch(self, session: int, next_access: int) -> None:
        del next_access  # not an oracle
        self._tick += 1
        self._sessions.add(session)
        self._last[session] = self._tick

    def access_request(
        self,
        blocks: Sequence[int],
        costs: Sequence[float],
        next_access: Sequence[int] | None,
        deepest_first: bool,
    ) -> None:
        super().access_request(blocks, costs, next_access, deepest_first)
        # after the base replay, which calls ``access`` without costs (the claims need none)
        cost = self._cost
        order = range(len(blocks) - 1, -1, -1) if deepest_first else range(len(blocks))
        for i in order:
            cost[blocks[i]] = costs[i]

    def session_score(self, session: int) -> float:
        """``cost_sum / age`` of a queued session (lower = evicted sooner)."""
        resident, cost = self._resident, self._cost
        total = sum(cost.get(b, 0.0) for b in self._paths.get(session, ()) if b in resident)
        return total / (self._tick - self._last[session] + 1)

    def _pop_victim_session(self) -> int | None:
        if not len(self._sessions):
            return None
        sample = self._sessions.pick(self.rng.random(self.n_sample).tolist(), ())
        # score each drawn session once (draws are with replacement)
        victim = min(dict.fromkeys(sample), key=lambda s: (self.session_score(s), self._last[s], s))
        self._sessions.discard(victim)
        del self._last[victim]
        return victim

    def remove(self, block: int) -> None:
        super().remove(block)
        self._cost.pop(block, None)

    def evict_n(self, n: int, pinned: Collection[int]) -> list[int]:
        victims = super().evict_n(n, pinned)
        for block in victims:
            self._cost.pop(block, None)
        return victims


class SessionS3Fifo(_SessionPolicy):
    """Params: ``small_ratio`` (default 0.1) of queued sessions kept in S. Honours pins."""

    name = "session_s3fifo"

    def __init__(
        self, capacity: int, *, rng: np.random.Generator, small_ratio: float = 0.1, **params: Any
    ) -> None:
        super().__init__(capacity, rng=rng, **params)
        if not 0.0 < small_ratio < 1.0:
            raise ValueError(f"{self.name}: small_ratio must be in (0, 1), got {small_ratio}")
        self.small_ratio = small_ratio
        self._small: OrderedDict[int, int] = OrderedDict()  # session -> touches, oldest first
        self._main: OrderedDict[int, int] = OrderedDict()
        self._ghost: OrderedDict[int, None] = OrderedDict()

    def _touch(self, session: int, next_access: int) -> None:
        del next_access  # not an oracle
        for queue in (self._small, self._main):
            if session in queue:
                queue[session] = min(queue[session] + 1, _TOUCH_CAP)
                return
        if session in self._ghost:  # evicted from S recently: it deserved M
            del self._ghost[session]
            self._main[session] = 0
        else:
            self._small[session] = 0

    def _pop_victim_session(self) -> int | None:
        small, main = self._small, self._main
        while small or main:
            queued = len(small) + len(main)
            if small and (len(small) >= max(1, self.small_ratio * queued) or not main):
                session, touches = small.popitem(last=False)
                if touches > 0:
                    main[session] = 0
                    continue
                self._ghost[session] = None
                while len(self._ghost) > max(1, len(main)):
                    self._ghost.popitem(last=False)
                return session
            session, touches = main.popitem(last=False)
            if touches > 0:
                main[session] = touches - 1
                continue
            return session
        return None


class SessionArc(_SessionPolicy):
    """No parameters; honours pins."""

    name = "session_arc"

    def __init__(self, capacity: int, *, rng: np.random.Generator, **params: Any) -> None:
        super().__init__(capacity, rng=rng, **params)
        self._t1: OrderedDict[int, None] = OrderedDict()  # least recent first
        self._t2: OrderedDict[int, None] = OrderedDict()
        self._b1: OrderedDict[int, None] = OrderedDict()
        self._b2: OrderedDict[int, None] = OrderedDict()
        self.target = 0.0  # p: ARC's target size of T1, in sessions

    def _queued(self) -> int:
        return max(1, len(self._t1) + len(self._t2))

    def _touch(self, session: int, next_access: int) -> None:
        del next_access  # not an oracle
        if session in self._t1:
            del self._t1[session]
            self._t2[session] = None
        elif session in self._t2:
            self._t2.move_to_end(session)
        elif session in self._b1:
            step = max(1.0, len(self._b2) / len(self._b1))
            self.target = min(float(self._queued()), self.target + step)
            del self._b1[session]
            self._t2[session] = None
        elif session in self._b2:
            step = max(1.0, len(self._b1) / len(self._b2))
            self.target = max(0.0, self.target - step)
            del self._b2[session]
            self._t2[session] = None
        else:
            self._t1[session] = None

    def _pop_victim_session(self) -> int | None:
        if self._t1 and (len(self._t1) > self.target or not self._t2):
            session = self._t1.popitem(last=False)[0]
            ghost = self._b1
        elif self._t2:
            session = self._t2.popitem(last=False)[0]
            ghost = self._b2
        else:
            return None
        ghost[session] = None
        limit = self._queued()
        for queue in (self._b1, self._b2):
            while len(queue) > limit:
                queue.popitem(last=False)
        return session
