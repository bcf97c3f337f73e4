"""Brute-force references of the session-level policies (session_random_compute,
session_s3fifo, session_arc), written independently of simulator.kvcache: claims are recounted
from every session's latest path on each question, queues are plain lists. Used with
``policy_references.serve``."""

from __future__ import annotations

from collections.abc import Sequence

from simulator.workload.request import TraceRequest


class RefSessions:
    """Session-level eviction by brute force: claims are recounted from the sessions' latest
    paths on every question; ``order`` picks the victim session (subclasses)."""

    def __init__(self) -> None:
        self.resident: set[int] = set()
        self.paths: dict[int, tuple[int, ...]] = {}
        self.orphans: list[int] = []  # unclaimed resident blocks, oldest first
        self.session = 0
        self.anonymous = -2

    def claimed(self, block: int) -> bool:
        return any(block in path for path in self.paths.values())

    def begin(self, request: TraceRequest) -> None:
        """What ``set_request_ctx`` does; call before ``serve`` handles the request."""
        if request.session_id >= 0:
            self.session = request.session_id
        else:
            self.session, self.anonymous = self.anonymous, self.anonymous - 1
        self.paths.setdefault(self.session, ())
        self.touch(self.session)

    def touch(self, session: int) -> None:
        raise NotImplementedError

    def pop_session(self) -> int | None:
        raise NotImplementedError

    def victims(self, alpha: set[int], n: int) -> list[int]:
        out = [b for b in self.orphans if b not in alpha][:n]
        for b in out:
            self.orphans.remove(b)
            self.resident.discard(b)
        while len(out) < n:
            session = self.pop_session()
            if session is None:
                break
            path = self.paths.pop(session, ())
            for b in path:
                if not self.claimed(b) and b in self.resident:
                    if b in alpha:
                        if b not in self.orphans:
                            self.orphans.append(b)
                    else:
                        self.resident.discard(b)
                        out.append(b)
        return out

    def record(self, blocks: Sequence[int], index: int) -> None:
        del index
        if self.session not in self.paths:
            self.touch(self.session)
        old = self.paths.get(self.session, ())
        path = tuple(dict.fromkeys(blocks))
        self.paths[self.session] = path
        self.orphans = [b for b in self.orphans if b not in path]
        for b in old:
            if not self.claimed(b) and b in self.resident and b not in self.orphans:
                self.orphans.append(b)

    def access(self, blocks: Sequence[int], costs: Sequence[float], ts: float) -> None:
        del ts
        for p in reversed(range(len(blocks))):
            b = blocks[p]
            self.on_access(b, costs[p])
            if b not in self.resident:
                self.resident.add(b)
                if not self.claimed(b):
                    self.orphans.append(b)

    def on_access(self, block: int, cost: float) -> None:
        pass


class RefSessionRandomCompute(RefSessions):
    """session_random_compute with every queued session sampled."""

    def __init__(self) -> None:
        super().__init__()
        self.last: dict[int, int] = {}
        self.cost: dict[int, float] = {}
        self.tick = 0

    def touch(self, session: int) -> None:
        self.tick += 1
        self.last[session] = self.tick

    def on_access(self, block: int, cost: float) -> None:
        self.cost[block] = cost

    def pop_session(self) -> int | None:
        if not self.last:
            return None

        def key(s: int) -> tuple[float, int, int]:
            total = sum(self.cost.get(b, 0.0) for b in self.paths.get(s, ()) if b in self.resident)
            return (total / (self.tick - self.last[s] + 1), self.last[s], s)

        victim = min(self.last, key=key)
        del self.last[victim]
        return victim


class RefSessionS3Fifo(RefSessions):
    """session_s3fifo over plain lists."""

    def __init__(self, small_ratio: float = 0.1) -> None:
        super().__init__()
        self.ratio = small_ratio
        self.small: list[list[int]] = []  # [session, touches], oldest first
        self.main: list[list[int]] = []
        self.ghost: list[int] = []

    def touch(self, session: int) -> None:
        for entry in self.small + self.main:
            if entry[0] == session:
                entry[1] = min(entry[1] + 1, 3)
                return
        if session in self.ghost:
            self.ghost.remove(session)
            self.main.append([session, 0])
        else:
            self.small.append([session, 0])

    def pop_session(self) -> int | None:
        while self.small or self.main:
            queued = len(self.small) + len(self.main)
            if self.small and (len(self.small) >= max(1, self.ratio * queued) or not self.main):
                session, touches = self.small.pop(0)
                if touches:
                    self.main.append([session, 0])
                    continue
                self.ghost.append(session)
                del self.ghost[: max(0, len(self.ghost) - max(1, len(self.main)))]
                return session
            session, touches = self.main.pop(0)
            if touches:
                self.main.append([session, touches - 1])
                continue
            return session
        return None


class RefSessionArc(RefSessions):
    """session_arc over plain lists."""

    def __init__(self) -> None:
        super().__init__()
        self.t1: list[int] = []
        self.t2: list[int] = []
        self.b1: list[int] = []
        self.b2: list[int] = []
        self.p = 0.0

    def touch(self, session: int) -> None:
        c = max(1, len(self.t1) + len(self.t2))
        if session in self.t1:
            self.t1.remove(session)
            self.t2.append(session)
        elif session in self.t2:
            self.t2.remove(session)
            self.t2.append(session)
        elif session in self.b1:
            self.p = min(float(c), self.p + max(1.0, len(self.b2) / len(self.b1)))
            self.b1.remove(session)
            self.t2.append(session)
        elif session in self.b2:
            self.p = max(0.0, self.p - max(1.0, len(self.b1) / len(self.b2)))
            self.b2.remove(session)
            self.t2.append(session)
        else:
            self.t1.append(session)

    def pop_session(self) -> int | None:
        if self.t1 and (len(self.t1) > self.p or not self.t2):
            session = self.t1.pop(0)
            self.b1.append(session)
        elif self.t2:
            session = self.t2.pop(0)
            self.b2.append(session)
        else:
            return None
        c = max(1, len(self.t1) + len(self.t2))
        del self.b1[: max(0, len(self.b1) - c)]
        del self.b2[: max(0, len(self.b2) - c)]
        return session
