"""Brute-force references of the issue-16 policies, written independently of simulator.kvcache.

Each reference keeps plain dicts/lists and picks its victim by a full scan (``min`` over every
candidate), and ``serve`` is a separate PrefixSim serve loop (skip, count, evict outside the
request, access deepest first). Sampled policies are referenced with *every* candidate in the
sample: the implementation with a sample far larger than the cache (so that every resident
block is drawn, with overwhelming probability) must then agree exactly.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from simulator.workload.request import TraceRequest


class Reference(Protocol):
    resident: set[int]

    def victims(self, alpha: set[int], n: int) -> list[int]: ...

    def record(self, blocks: Sequence[int], index: int) -> None: ...

    def access(self, blocks: Sequence[int], costs: Sequence[float], ts: float) -> None: ...


@dataclass
class Counts:
    n_blocks: int = 0
    n_block_hits: int = 0
    n_eviction: int = 0
    saved: float = 0.0
    total: float = 0.0


def serve(
    requests: Sequence[TraceRequest],
    capacity: int,
    ref: Reference,
    cost: Callable[[int], float] | None = None,
) -> Counts:
    """The PrefixSim serve loop over ``ref`` (pinned: victims never come from the request)."""
    counts = Counts()
    for request in requests:
        blocks = request.block_ids
        alpha = set(blocks)
        if len(alpha) > capacity:
            continue
        costs = [cost(p) if cost else 1.0 for p in range(len(blocks))]
        begin = getattr(ref, "begin", None)
        if begin is not None:  # session references: set_request_ctx, before phase 1
            begin(request)
        for p, b in enumerate(blocks):
            counts.n_blocks += 1
            counts.total += costs[p]
            if b in ref.resident:
                counts.n_block_hits += 1
                counts.saved += costs[p]
        needed = len(alpha - ref.resident) - (capacity - len(ref.resident))
        while needed > 0:
            out = ref.victims(alpha, needed)
            assert out
            assert not set(out) & alpha
            counts.n_eviction += len(out)
            needed -= len(out)
        ref.record(blocks, request.index)
        ref.access(blocks, costs, request.timestamp_s)
        assert alpha <= ref.resident
        assert len(ref.resident) <= capacity
    return counts


class RefAsym:
    """asym_cache: evict min (log2 cost + t / half_life, access number)."""

    def __init__(self, half_life: float = 180.0) -> None:
        self.half_life = half_life
        self.key: dict[int, tuple[float, int]] = {}
        self.resident: set[int] = set()
        self.seq = 0

    def victims(self, alpha: set[int], n: int) -> list[int]:
        del n
        victim = min((k, b) for b, k in self.key.items() if b not in alpha)[1]
        del self.key[victim]
        self.resident.discard(victim)
        return [victim]

    def record(self, blocks: Sequence[int], index: int) -> None:
        pass

    def access(self, blocks: Sequence[int], costs: Sequence[float], ts: float) -> None:
        for p in reversed(range(len(blocks))):
            self.seq += 1
            self.key[blocks[p]] = (math.log2(costs[p]) + ts / self.half_life, self.seq)
            self.resident.add(blocks[p])


class RefSmallQueueRandomCompute:
    """random_compute_small_queue with every main block sampled."""

    def __init__(self, capacity: int, small_ratio: float = 0.1) -> None:
        self.target = max(1, int(small_ratio * capacity))
        self.small: list[int] = []  # oldest first
        self.cost: dict[int, float] = {}
        self.last: dict[int, int] = {}
        self.resident: set[int] = set()
        self.clock = 0

    def _drop(self, block: int) -> int:
        if block in self.small:
            self.small.remove(block)
        self.resident.discard(block)
        del self.cost[block], self.last[block]
        return block

    def victims(self, alpha: set[int], n: int) -> list[int]:
        del n
        small_free = [b for b in self.small if b not in alpha]
        if len(self.small) >= self.target and small_free:
            return [self._drop(small_free[0])]
        main = [b for b in self.resident if b not in self.small and b not in alpha]
        if not main:
            return [self._drop(small_free[0])]
        score = {
            b: (self.cost[b] / (self.clock - self.last[b] + 1), self.last[b], -b) for b in main
        }
        return [self._drop(min(main, key=score.__getitem__))]

    def record(self, blocks: Sequence[int], index: int) -> None:
        pass

    def access(self, blocks: Sequence[int], costs: Sequence[float], ts: float) -> None:
        del ts
        for b in dict.fromkeys(blocks):
            if b not in self.resident:
                self.small.append(b)
            elif b in self.small:
                self.small.remove(b)
        self.clock += len(blocks)
        for p in reversed(range(len(blocks))):
            self.resident.add(blocks[p])
            self.cost[blocks[p]] = costs[p]
            self.last[blocks[p]] = self.clock


@dataclass
class _Node:
    blocks: list[int]
    freq: int = 1
    last: int = 0
    last_request: int = 0
    members: set[int] = field(default_factory=set)


class RefPartialNodeFreq:
    """partial_node_random_freq (micro batches) with every node sampled."""

    def __init__(self, micro_batch: int = 64) -> None:
        self.micro_batch = micro_batch
        self.node_of: dict[int, _Node] = {}
        self.pending: dict[int, _Node] = {}
        self.resident: set[int] = set()
        self.clock = 0
        self.request = 0

    def victims(self, alpha: set[int], n: int) -> list[int]:
        nodes = {id(nd): nd for b, nd in self.node_of.items() if b not in alpha}.values()

        def deepest(nd: _Node) -> int:
            return next(b for b in reversed(nd.blocks) if b in nd.members and b not in alpha)

        def key(nd: _Node) -> tuple[float, int, int]:
            return (nd.freq / (self.clock - nd.last + 1), nd.last, -deepest(nd))

        winner = min(nodes, key=key)
        tail = [b for b in reversed(winner.blocks) if b in winner.members and b not in alpha]
        taken = tail[: min(n, self.micro_batch)]
        for b in taken:
            winner.members.discard(b)
            del self.node_of[b]
            self.resident.discard(b)
        return taken

    def record(self, blocks: Sequence[int], index: int) -> None:
        del index
        self.request += 1
        missing = [b for b in dict.fromkeys(blocks) if b not in self.resident]
        node = _Node(missing, last=self.clock, last_request=self.request)
        self.pending = dict.fromkeys(missing, node)

    def access(self, blocks: Sequence[int], costs: Sequence[float], ts: float) -> None:
        del costs, ts
        for b in reversed(blocks):
            self.clock += 1
            node = self.node_of.get(b)
            if node is None:
                node = self.pending.pop(b)
                node.members.add(b)
                self.node_of[b] = node
                self.resident.add(b)
            if node.last_request != self.request:
                node.freq += 1
                node.last_request = self.request
            node.last = self.clock


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


class RefS3FifoD:
    """s3fifod over plain lists: S3-FIFO (small / main / ghost, frequency capped at 3) with a
    main ghost and the small target moving by one block on each ghost hit."""

    def __init__(self, capacity: int, small_ratio: float = 0.1) -> None:
        self.capacity = capacity
        self.target = max(1, int(small_ratio * capacity))
        self.ghost_cap = max(1, capacity - self.target)
        self.small: list[list[int]] = []  # [block, freq], oldest first
        self.main: list[list[int]] = []
        self.ghost: list[int] = []
        self.main_ghost: list[int] = []
        self.resident: set[int] = set()

    def _entry(self, block: int) -> list[int] | None:
        return next((e for e in self.small + self.main if e[0] == block), None)

    def victims(self, alpha: set[int], n: int) -> list[int]:
        del n
        stuck_small = stuck_main = 0
        while True:
            small_ok, main_ok = stuck_small < len(self.small), stuck_main < len(self.main)
            if small_ok and (len(self.small) >= self.target or not main_ok):
                block, freq = self.small.pop(0)
                if block in alpha:
                    self.small.append([block, freq])
                    stuck_small += 1
                    continue
                stuck_small = 0
                if freq > 0:
                    self.main.append([block, 0])
                    stuck_main = 0
                    continue
                self.ghost.append(block)
                del self.ghost[: max(0, len(self.ghost) - self.ghost_cap)]
                self.resident.discard(block)
                return [block]
            block, freq = self.main.pop(0)
            if block in alpha:
                self.main.append([block, freq])
                stuck_main += 1
                continue
            stuck_main = 0
            if freq > 0:
                self.main.append([block, freq - 1])
                continue
            self.main_ghost.append(block)
            del self.main_ghost[: max(0, len(self.main_ghost) - self.ghost_cap)]
            self.resident.discard(block)
            return [block]

    def record(self, blocks: Sequence[int], index: int) -> None:
        pass

    def access(self, blocks: Sequence[int], costs: Sequence[float], ts: float) -> None:
        del costs, ts
        for block in reversed(blocks):
            entry = self._entry(block)
            if entry is not None:
                entry[1] = min(entry[1] + 1, 3)
                continue
            self.resident.add(block)
            if block in self.ghost:
                self.target = min(self.target + 1, max(1, self.capacity - 1))
                self.ghost.remove(block)
                self.main.append([block, 0])
            elif block in self.main_ghost:
                self.main_ghost.remove(block)
                self.target = max(1, self.target - 1)
                self.main.append([block, 0])
            else:
                self.small.append([block, 0])


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


class RefLirs:
    """lirs over plain lists: S (bottom first) with entries [block, state] where state is
    "L", "H" (resident HIR) or "N" (non-resident HIR); Q lists resident HIR blocks."""

    def __init__(self, capacity: int, hir_ratio: float = 0.01) -> None:
        self.capacity = capacity
        self.lir_target = (
            1 if capacity == 1 else max(1, capacity - max(1, int(hir_ratio * capacity)))
        )
        self.stack: list[int] = []
        self.state: dict[int, str] = {}  # every block in S or resident: "L", "H" or "N"
        self.queue: list[int] = []
        self.nonresident: list[int] = []  # oldest first
        self.resident: set[int] = set()

    def n_lir(self) -> int:
        return sum(1 for b in self.resident if self.state[b] == "L")

    def prune(self) -> None:
        while self.stack and self.state.get(self.stack[0]) != "L":
            b = self.stack.pop(0)
            if b in self.nonresident:
                self.nonresident.remove(b)
                del self.state[b]

    def demote_bottom(self) -> None:
        b = self.stack.pop(0)
        self.state[b] = "H"
        self.queue.append(b)
        self.prune()

    def to_top(self, b: int) -> None:
        if b in self.stack:
            self.stack.remove(b)
        self.stack.append(b)

    def victims(self, alpha: set[int], n: int) -> list[int]:
        del n
        free = [b for b in self.queue if b not in alpha]
        if free:
            v = free[0]
            self.queue.remove(v)
            self.resident.discard(v)
            if v in self.stack:
                self.state[v] = "N"
                self.nonresident.append(v)
                if len(self.nonresident) > self.capacity:
                    old = self.nonresident.pop(0)
                    self.stack.remove(old)
                    del self.state[old]
            else:
                del self.state[v]
            return [v]
        v = next(b for b in self.stack if self.state.get(b) == "L" and b not in alpha)
        self.stack.remove(v)
        self.resident.discard(v)
        del self.state[v]
        self.prune()
        return [v]

    def record(self, blocks: Sequence[int], index: int) -> None:
        pass

    def access(self, blocks: Sequence[int], costs: Sequence[float], ts: float) -> None:
        del costs, ts
        for b in reversed(blocks):
            state = self.state.get(b) if b in self.resident else None
            if state == "L":
                self.to_top(b)
                self.prune()
            elif state == "H":
                if b in self.stack:
                    self.queue.remove(b)
                    self.state[b] = "L"
                    self.to_top(b)
                    self.demote_bottom()
                else:
                    self.stack.append(b)
                    self.queue.remove(b)
                    self.queue.append(b)
            elif self.n_lir() < self.lir_target:
                if b in self.nonresident:
                    self.nonresident.remove(b)
                self.state[b] = "L"
                self.resident.add(b)
                self.to_top(b)
            elif b in self.stack:
                self.nonresident.remove(b)
                self.state[b] = "L"
                self.resident.add(b)
                self.to_top(b)
                self.demote_bottom()
            else:
                self.state[b] = "H"
                self.resident.add(b)
                self.stack.append(b)
                self.queue.append(b)
