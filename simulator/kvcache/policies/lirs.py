"""LIRS (Jiang & Zhang, SIGMETRICS 2002): evict by inter-reference recency, not recency.

Resident blocks are LIR (low inter-reference recency: reused within the recency window of the
LIR set) or resident HIR; ids of recently evicted HIR blocks stay as non-resident HIR entries.
The stack S orders LIR, resident-HIR and non-resident-HIR entries by recency (bottom = least
recent) and is pruned so that its bottom is always LIR; the FIFO Q holds the resident HIR
blocks, the only eviction candidates. LIR takes ``capacity - hir`` slots, ``hir = max(1,
hir_ratio × capacity)``.

On an access to x: an LIR x moves to S's top (pruning if it was the bottom); a resident HIR x
in S becomes LIR and S's bottom LIR is demoted to the end of Q (then S is pruned); a resident
HIR x not in S goes to S's top and Q's end. A miss becomes LIR while fewer than ``capacity -
hir`` blocks are LIR (cold start); else if x is a non-resident HIR entry of S it becomes LIR
(the bottom LIR is demoted); otherwise x is a resident HIR block at S's top and Q's end.
Eviction removes Q's front (it stays in S as non-resident HIR if it was there). Non-resident
entries are bounded by ``capacity`` (the oldest is dropped from S).

Serve-loop adaptation (PrefixSim's "in-flight pinning fix"): eviction happens in phase 2,
before the request's blocks are accessed, and never takes a pinned block: pinned Q entries are
passed over in place; if Q holds only pinned blocks the least recent unpinned LIR block is
evicted instead (and leaves S), so a request never loses its own blocks. Such an eviction can
leave fewer LIR blocks than the target, or none, which the original algorithm never sees: S is
therefore pruned after *every* access that pushes an entry onto it, so its bottom is LIR (or S
is empty) whenever ``_demote_bottom`` runs. Without that, an HIR block pushed onto an S with
no LIR block, or a cold-start LIR block above non-LIR entries, left a non-LIR bottom, and a
later demotion made that entry resident again: a capacity error ("N resident blocks exceed
C") on small caches whose requests hold most of the cache.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Collection, Container
from typing import Any

import numpy as np

from simulator.kvcache.policies._common import nothing_evictable
from simulator.kvcache.policies.base import EvictionPolicy

__all__ = ["Lirs"]

_LIR, _HIR = True, False


class Lirs(EvictionPolicy):
    """Params: ``hir_ratio`` (default 0.01) of the capacity for resident HIR blocks (≥ 1).
    Honours pins."""

    name = "lirs"

    def __init__(
        self, capacity: int, *, rng: np.random.Generator, hir_ratio: float = 0.01, **params: Any
    ) -> None:
        super().__init__(capacity, rng=rng, **params)
        if not 0.0 < hir_ratio < 1.0:
            raise ValueError(f"lirs: hir_ratio must be in (0, 1), got {hir_ratio}")
        self.lir_target = max(1, capacity - max(1, int(hir_ratio * capacity)))
        if capacity == 1:
            self.lir_target = 1
        self._status: dict[int, bool] = {}  # resident block -> LIR?
        self._stack: OrderedDict[int, None] = OrderedDict()  # S, bottom first
        self._queue: OrderedDict[int, None] = OrderedDict()  # Q: resident HIR, oldest first
        self._nonresident: OrderedDict[int, None] = OrderedDict()  # HIR ids kept in S
        self._n_lir = 0

    def __len__(self) -> int:
        return len(self._status)

    def find(self, block: int) -> bool:
        return block in self._status

    def resident_view(self) -> Container[int]:
        return self._status

    def _prune(self) -> None:
        stack, status = self._stack, self._status
        while stack:
            bottom = next(iter(stack))
            if status.get(bottom) is _LIR:
                return
            del stack[bottom]
            self._nonresident.pop(bottom, None)

    def _demote_bottom(self) -> None:
        """S's bottom LIR block becomes resident HIR at Q's end; S is pruned."""
        bottom = next(iter(self._stack))
        del self._stack[bottom]
        self._status[bottom] = _HIR
        self._n_lir -= 1
        self._queue[bottom] = None
        self._prune()

    def _make_lir(self, block: int) -> None:
        self._status[block] = _LIR
        self._n_lir += 1
        self._stack[block] = None
        self._stack.move_to_end(block)

    def access(self, block: int, cost: float, next_access: int) -> None:
        del cost, next_access  # recency only
        stack, status = self._stack, self._status
        state = status.get(block)
        if state is _LIR:
            stack.move_to_end(block)
            self._prune()
        elif state is _HIR:
            if block in stack:
                del self._queue[block]
                status[block] = _LIR
                self._n_lir += 1
                stack.move_to_end(block)
                self._demote_bottom()
            else:
                stack[block] = None
                self._queue.move_to_end(block)
                self._prune()  # S held no LIR block (see the module docstring)
        elif self._n_lir < self.lir_target:
            self._nonresident.pop(block, None)
            self._make_lir(block)
            self._prune()  # non-LIR entries below the first LIR block leave S
        elif block in stack:  # a non-resident HIR entry: its reuse distance is short
            del self._nonresident[block]
            self._make_lir(block)
            self._demote_bottom()
        else:
            status[block] = _HIR
            stack[block] = None
            self._queue[block] = None
            self._prune()  # S held no LIR block (see the module docstring)

    def evict(self, pinned: Collection[int]) -> list[int]:
        return self.evict_n(1, pinned)

    def evict_n(self, n: int, pinned: Collection[int]) -> list[int]:
        victims: list[int] = []
        while len(victims) < n and self._status:
            victim = next((b for b in self._queue if b not in pinned), None)
            if victim is not None:
                del self._queue[victim], self._status[victim]
                if victim in self._stack:
                    self._nonresident[victim] = None
                    if len(self._nonresident) > self.capacity:
                        oldest = self._nonresident.popitem(last=False)[0]
                        del self._stack[oldest]
            else:  # Q is empty or pinned: the least recent unpinned LIR block goes
                victim = next((b for b in self._stack if self._status.get(b) is _LIR
                               and b not in pinned), None)  # fmt: skip
                if victim is None:
                    break
                del self._stack[victim], self._status[victim]
                self._n_lir -= 1
                self._prune()
            victims.append(victim)
        if not victims and n > 0 and self._status:
            raise nothing_evictable(self.name)
        return victims

    def remove(self, block: int) -> None:
        state = self._status.pop(block, None)
        if state is None:
            return
        self._stack.pop(block, None)
        self._queue.pop(block, None)
        if state is _LIR:
            self._n_lir -= 1
        self._prune()
