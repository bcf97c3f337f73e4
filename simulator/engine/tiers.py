"""The KV-cache tiers of the serving engine: L1 (HBM) and L2 (host DRAM) per instance, and the
L3 store (SSD or remote pool) shared by every instance of a pool.

A tier is one eviction policy (``simulator/kvcache/policies``) plus the engine's bookkeeping:

- **cached blocks**: prompt blocks, identified by trace block id, reusable by any later request
  whose prefix matches;
- **pins**: a refcount per cached block held by in-flight requests (a running request pins the
  prompt blocks it has allocated; a prefetch or a swapped request pins its L2 copies). Pinned
  blocks never leave the tier: they are passed to ``evict`` as ``pinned``;
- **private blocks**: anonymous slots for tokens that no trace block id names (generated tokens
  past the prompt, or a swapped request's decode KV). They occupy capacity but are never cached.

Capacity is counted in trace blocks (``block_tokens`` tokens each): cached + private ≤ capacity.

Parking (LRU only, an exact optimisation): a pinned block's place in an LRU order does not
matter, because the engine accesses every block again when its last pin is released. So an
LRU tier takes a block *out* of the policy while it is pinned and re-inserts it (at the MRU
end) on release — the victims are identical, and evictions no longer walk past long runs of
pinned blocks, which dominated run time when L1 is nearly all in use. Other policies keep
pinned blocks inside (their state may depend on it) and skip them through ``pinned``.

What a tier is not: it does not time transfers (``transfer.py``) and it does not know
requests; ``kvmanager.py`` composes tiers into request-level operations.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Iterable, Sequence, Sized

from simulator.kvcache.policies.base import NEVER, EvictionPolicy
from simulator.kvcache.policies.lru import LRU

__all__ = ["PARKING_POLICIES", "CacheTier", "EvictSink"]

EvictSink = Callable[[list[int]], None]
"""Called with the victims of every eviction (write-back to the tier below, statistics)."""

#: Policies whose order is pure recency, so pinned blocks can leave the policy (see above).
PARKING_POLICIES = frozenset({"lru"})


class CacheTier:
    """One tier: a policy with pins and private slots. All counts are in blocks."""

    __slots__ = (
        "_lru",
        "_lru_order",
        "_view",
        "capacity",
        "n_evicted",
        "name",
        "on_evict",
        "park",
        "pins",
        "policy",
        "private",
    )

    def __init__(
        self, name: str, policy: EvictionPolicy, on_evict: EvictSink | None = None
    ) -> None:
        self.name = name
        self.policy = policy
        self.capacity: int = policy.capacity
        self.park = policy.name in PARKING_POLICIES
        """Whether pinned blocks leave the policy while pinned (module docstring)."""
        self._lru: LRU | None = policy if self.park and isinstance(policy, LRU) else None
        """The policy itself when it is the plain LRU of a parking tier: the hot verbs then
        call its one-pass methods (``evict_oldest``, ``insert_absent``) directly, one call
        instead of a chain of them per allocation or release."""
        self._view: Container[int] | None = policy.resident_view()
        """The policy's live resident container, if it has one (``resident``: read once, as
        a live container stays the policy's for its lifetime)."""
        self._lru_order: Sized = self._lru.resident_view() if self._lru is not None else ()
        """The LRU's resident container (its ``len`` is C-level); empty without one."""
        self.pins: dict[int, int] = {}
        """Refcount of every pinned cached block (absent = unpinned)."""
        self.private: int = 0
        """Private (uncacheable) blocks in use."""
        self.on_evict = on_evict
        self.n_evicted: int = 0
        """Cached blocks evicted so far."""

    # ----- queries ------------------------------------------------------------------------------
    def has(self, block: int) -> bool:
        """Whether ``block`` is cached here, pinned or not (read-only probe)."""
        return block in self.pins or self.policy.find(block)

    def resident(self) -> Container[int]:
        """A live container of the policy's resident blocks (``in`` is ``policy.find``): the
        policy's own where it has one, so per-block loops probe without a call per block;
        ``has(b)`` is ``b in pins or b in resident()``."""
        view = self._view
        return view if view is not None else _Finder(self.policy.find)

    def cached(self) -> int:
        """Cached blocks, pinned ones included."""
        return len(self.policy) + (len(self.pins) if self.park else 0)

    def free(self) -> int:
        """Empty slots (no eviction needed)."""
        return self.capacity - self.cached() - self.private

    def available(self) -> int:
        """Slots obtainable without touching pinned or private blocks: free + unpinned cached."""
        return self.capacity - self.private - len(self.pins)

    def in_use(self) -> int:
        """Slots held by in-flight requests: pinned cached blocks + private blocks."""
        return len(self.pins) + self.private

    # ----- mutations ----------------------------------------------------------------------------
    def make_room(self, n: int, *, one_by_one: bool = False) -> bool:
        """Ensure ``n`` free slots by evicting unpinned blocks; False (and nothing done) if
        even evicting every unpinned block would not free enough.

        ``one_by_one``: hand the victims to ``on_evict`` one at a time, as ``n`` calls of
        ``make_room(1)`` would (a store writer queues each hand-over as one write).
        """
        # Inlined free(): this is the hottest method of the engine (every allocation).
        policy, lru = self.policy, self._lru
        if lru is not None:
            return self._make_room_lru(lru, n, one_by_one=one_by_one)
        cached = len(policy) + len(self.pins) if self.park else len(policy)
        free = self.capacity - cached - self.private
        short = n - free
        if short <= 0:
            return True
        if short > self.capacity - self.private - len(self.pins) - free:
            return False
        on_evict = self.on_evict
        # A parking tier's pinned blocks are outside the policy: nothing to pass over.
        pinned = () if self.park else self.pins
        while short > 0:
            victims = policy.evict_n(short, pinned)
            if not victims:
                raise RuntimeError(
                    f"{self.name}: policy {policy.name!r} evicted nothing with "
                    f"{self.available() - self.free()} unpinned blocks resident"
                )
            self.n_evicted += len(victims)
            if on_evict is not None:
                if one_by_one and len(victims) > 1:
                    for victim in victims:
                        on_evict([victim])
                else:
                    on_evict(victims)
            short = n - self.free()
        return True

    def _make_room_lru(self, lru: LRU, n: int, *, one_by_one: bool) -> bool:
        """``make_room`` of a parking LRU tier: every resident block of the policy is
        unpinned (pinned ones are parked outside it), so one ``evict_oldest`` of the shortfall
        takes exactly the victims ``make_room``'s loop would, without re-reading the counts."""
        pins, resident = self.pins, len(self._lru_order)
        short = n - (self.capacity - resident - len(pins) - self.private)
        if short <= 0:
            return True
        if short > resident:  # not enough unpinned blocks: nothing is done
            return False
        victims = lru.evict_oldest(short)
        self.n_evicted += short
        on_evict = self.on_evict
        if on_evict is not None:
            if one_by_one and short > 1:
                for victim in victims:
                    on_evict([victim])
            else:
                on_evict(victims)
        return True

    def clear(self) -> None:
        """Forget every cached block without handing it down (the engine stopped, so its
        memory is gone). Nothing may be pinned or private: only an idle instance stops."""
        if self.pins or self.private:
            raise RuntimeError(f"{self.name}: cleared with blocks in use")
        policy = self.policy
        while len(policy):
            policy.evict_n(len(policy), ())

    def touch(self, block: int) -> None:
        """Record an access to cached ``block`` (a parked, pinned block is left alone)."""
        if not (self.park and block in self.pins):
            self.policy.access(block, 1.0, NEVER)

    def insert(self, block: int) -> bool:
        """Cache ``block`` unpinned if absent (evicting as needed); False if there is no room."""
        if self.has(block):
            return True
        if not self.make_room(1):
            return False
        self.policy.access(block, 1.0, NEVER)
        return True

    def insert_all(self, blocks: Sequence[int]) -> None:
        """``insert`` every block of ``blocks`` in order, with one eviction per run of absent
        blocks on a parking tier (the same victims, in the same order, as block by block).

        Why it is exact: the blocks of a run enter the policy at its recent end, so evicting
        for each in turn takes the oldest resident blocks, the same ones one ``evict_n`` takes
        for the whole run — as long as enough blocks resided before it (else block by block).
        A block further on that the run evicts is re-checked when its turn comes, as
        ``insert`` would. Other policies may change their order on insertion: block by block.
        """
        if not self.park:
            for block in blocks:
                self.insert(block)
            return
        pins, resident, n, lru = self.pins, self.resident(), len(blocks), self._lru
        i = 0
        while i < n:
            run: dict[int, None] = {}
            j = i
            while j < n:
                block = blocks[j]
                if block in run or block in pins or block in resident:  # inlined ``has``
                    break
                run[block] = None
                j += 1
            if not run:
                i += 1  # resident now: nothing to do, as ``insert``
                continue
            if self.make_room(len(run), one_by_one=True):
                if lru is not None:
                    lru.insert_absent(run)  # absent and distinct: no test per block
                else:
                    self._access_all(list(run))
            else:
                for block in run:
                    self.insert(block)
            i = j

    def add_pinned_all(self, blocks: Sequence[int]) -> None:
        """``add_pinned`` every block of ``blocks`` (distinct, absent; room was checked).

        On a parking tier the new blocks never enter the policy, so one ``make_room`` for all
        of them evicts what one per block would; other policies see each insertion in turn.
        """
        if not self.park:
            for block in blocks:
                self.add_pinned(block)
            return
        self.make_room(len(blocks), one_by_one=True)
        self.pins.update(dict.fromkeys(blocks, 1))  # distinct and absent: one pin each

    def pin(self, block: int) -> None:
        """Take one reference on cached ``block`` (it must be resident)."""
        pins = self.pins
        count = pins.get(block, 0)
        if count == 0 and self.park:
            self.policy.remove(block)
        pins[block] = count + 1

    def add_pinned(self, block: int) -> None:
        """Cache absent ``block`` and pin it (evicting as needed; room was checked)."""
        self.make_room(1)
        if self.park:
            self.pins[block] = self.pins.get(block, 0) + 1
        else:
            self.policy.access(block, 1.0, NEVER)
            self.pin(block)

    def unpin(self, block: int) -> None:
        """Drop one reference on ``block``; at zero it becomes evictable again."""
        pins = self.pins
        count = pins[block] - 1
        if count:
            pins[block] = count
        else:
            del pins[block]
            if self.park:
                self.policy.access(block, 1.0, NEVER)

    def release(self, blocks: Sequence[int]) -> None:
        """``unpin`` every block of ``blocks``, then ``touch`` them deepest first (what a
        finishing request does), in one pass of policy accesses instead of two.

        Exact: ``unpin`` re-inserts a parked block that it frees, and the ``touch`` that
        follows moves it again, so only the touches decide the order; a block still pinned by
        another request stays parked and untouched. A non-parking policy is touched as
        ``touch`` does, every block, pinned or not.
        """
        pins, lru = self.pins, self._lru
        if lru is not None:
            self._release_lru(lru, blocks)
            return
        for block in blocks:
            count = pins[block] - 1
            if count:
                pins[block] = count
            else:
                del pins[block]
        if self.park:
            touched = [block for block in reversed(blocks) if block not in pins]
        else:
            touched = list(reversed(blocks))
        self._access_all(touched)

    def _release_lru(self, lru: LRU, blocks: Sequence[int]) -> None:
        """``release`` on a parking LRU tier in one pass, deepest block first: a block whose
        last pin goes is parked (absent from the policy) and joins the recent end in that
        order. Exact: ``release`` touches it at each of its positions, and the last touch
        (its shallowest occurrence, where its count reaches zero here) decides its place."""
        pins = self.pins
        freed: list[int] = []
        for block in reversed(blocks):
            count = pins[block] - 1
            if count:
                pins[block] = count
            else:
                del pins[block]
                freed.append(block)
        lru.insert_absent(freed)

    def _access_all(self, blocks: Sequence[int]) -> None:
        """``policy.access(block, 1.0, NEVER)`` for every block, in order, as one
        ``access_request`` (equal by its contract; hot policies loop in it without a call per
        block)."""
        self.policy.access_request(blocks, [1.0] * len(blocks), None, False)

    def unpin_all(self, blocks: Iterable[int]) -> None:
        """``unpin`` every block of ``blocks``."""
        for block in blocks:
            self.unpin(block)

    def alloc_private(self, n: int) -> bool:
        """Take ``n`` private slots (evicting as needed); False (nothing done) if impossible."""
        if n <= 0:
            return True
        if not self.make_room(n):
            return False
        self.private += n
        return True

    def free_private(self, n: int) -> None:
        """Return ``n`` private slots."""
        self.private -= n

    def check(self) -> None:
        """Raise ``AssertionError`` if the tier's accounting is inconsistent."""
        if self.cached() + self.private > self.capacity:
            raise AssertionError(
                f"{self.name}: {self.cached()} cached + {self.private} private > capacity"
            )
        if self.private < 0:
            raise AssertionError(f"{self.name}: negative private count {self.private}")
        for block, count in self.pins.items():
            inside = self.policy.find(block)
            if count <= 0 or inside == self.park:
                state = "inside" if inside else "outside"
                raise AssertionError(f"{self.name}: pinned block {block} ({count}) {state} policy")


class _Finder:
    """``policy.find`` as a container, for policies without a resident view."""

    __slots__ = ("_find",)

    def __init__(self, find: Callable[[int], bool]) -> None:
        self._find = find

    def __contains__(self, block: object) -> bool:
        return isinstance(block, int) and self._find(block)
