"""Request-level KV operations over the tiers of one instance (L1, L2) and the shared L3.

Every operation either succeeds completely or changes nothing: callers first ask what an
operation needs (``*_need``) and compare it with ``available()`` of the tier, as vLLM's
``allocate_slots`` returns ``None`` instead of half-allocating.

Write policies (which copies exist below L1):

- ``write_through``: a prompt block is copied to L2 and L3 as soon as its last token is computed
  (HiCache write-through; copies are asynchronous and never delay compute; an L3 copy goes
  through the store's writer, ``engine/store_writer.py``, when one is given, and is matchable
  only once it has landed);
- ``write_back``: a block is copied one tier down only when it is evicted (L1→L2, L2→L3; with no
  L2, L1→L3).

A model with sliding-window or linear-attention layers (``state_blocks`` > 0) holds, for every
admitted request, that many private L1 blocks besides its tokens' (``req.n_state``): its window
of KV and its recurrent state, allocated at admission, swapped with the request and freed with
it; they are never cached (a prefix hit assumes the window at the hit point is cached with the
prefix, as vLLM keeps the last window's blocks of a cached prefix).

Hook calls into the L1 policy: ``set_request_ctx`` and ``record_request`` once per admission
(not per chunk); accesses are made when a block is pinned and again, deepest first, when the
request releases it, so that a request's tail blocks are evicted before its root (vLLM frees
blocks in reverse order for the same reason).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from simulator.engine.request import RUNNING, SENDING, SWAPPED, EngineRequest
from simulator.engine.tiers import CacheTier, EvictSink
from simulator.kvcache.policies.base import EvictionPolicy, RequestContext

__all__ = ["KVManager", "PrefixMatch"]

#: An empty container (``match_l12`` without L2).
_NONE: frozenset[int] = frozenset()

#: The base policy's per-admission hooks, which ignore what they are told (``announce``).
_NO_CTX_HOOK = EvictionPolicy.set_request_ctx
_NO_RECORD_HOOK = EvictionPolicy.record_request


@dataclass(frozen=True, slots=True)
class PrefixMatch:
    """The longest prefix of a request's blocks cached in L1 ∪ L2 (``KVManager.match_l12``)."""

    from_l2: tuple[bool, ...]
    """Per matched block, in prompt order: True if only L2 holds it (admission copies it up
    over PCIe), False if L1 does."""
    n_l2_blocks: int
    """Matched blocks only L2 holds (``from_l2.count(True)``)."""

    @property
    def n_blocks(self) -> int:
        """Blocks matched, a prefix of the request's ``blocks``."""
        return len(self.from_l2)

    @property
    def loads(self) -> bool:
        """Whether admitting with this match copies blocks L2 → L1 (the request waits)."""
        return self.n_l2_blocks > 0


class KVManager:
    """The KV tiers of one instance and the request-level verbs the scheduler needs."""

    __slots__ = ("_to_l3", "block_tokens", "l1", "l2", "l3", "state_blocks", "write_through")

    def __init__(
        self,
        l1: CacheTier,
        l2: CacheTier | None,
        l3: CacheTier | None,
        *,
        block_tokens: int,
        write_through: bool,
        l3_write: EvictSink | None = None,
        state_blocks: int = 0,
    ) -> None:
        """``l3_write(blocks)`` copies into L3 (a ``StoreWriter``); None = at once, for free.
        ``state_blocks``: private blocks every admitted request holds (module doc)."""
        self.l1, self.l2, self.l3 = l1, l2, l3
        self.block_tokens = block_tokens
        self.state_blocks = state_blocks
        self.write_through = write_through
        self._to_l3: EvictSink | None = None
        if l3 is not None:
            self._to_l3 = l3_write if l3_write is not None else _copy_down(l3)
        if not write_through:
            if l2 is not None:
                l1.on_evict = _copy_down(l2)
                if self._to_l3 is not None:
                    l2.on_evict = self._to_l3
            elif self._to_l3 is not None:
                l1.on_evict = self._to_l3

    # ----- matching -----------------------------------------------------------------------------
    def match_l12(self, blocks: Sequence[int]) -> PrefixMatch:
        """The longest prefix of ``blocks`` cached in L1 ∪ L2 and where each block is
        (read-only)."""
        l1, l2 = self.l1, self.l2
        l1_pins, l1_resident = l1.pins, l1.resident()
        # ``l2.has``, inlined (no L2: nothing pinned or resident there).
        l2_pins, l2_resident = (l2.pins, l2.resident()) if l2 is not None else (_NONE, _NONE)
        from_l2: list[bool] = []
        n_l2 = 0
        for block in blocks:
            if block in l1_pins or block in l1_resident:  # ``l1.has``, inlined
                from_l2.append(False)
            elif block in l2_pins or block in l2_resident:
                from_l2.append(True)
                n_l2 += 1
            else:
                break
        return PrefixMatch(tuple(from_l2), n_l2)

    def l3_candidates(self, blocks: Sequence[int]) -> tuple[int, list[int]]:
        """For the longest prefix cached in L1 ∪ L2 ∪ L3: its length, and its L3-only blocks."""
        l3 = self.l3
        if l3 is None:
            return 0, []
        l1_has, l3_has = self.l1.has, l3.has
        l2_has = self.l2.has if self.l2 is not None else _never
        fetch: list[int] = []
        length = 0
        for block in blocks:
            if not (l1_has(block) or l2_has(block)):
                if not l3_has(block):
                    break
                fetch.append(block)
            length += 1
        return length, fetch

    # ----- admission ----------------------------------------------------------------------------
    def admission_need(self, blocks: Sequence[int], match: PrefixMatch) -> int:
        """L1 slots that pinning the matched prefix ``blocks[:match.n_blocks]`` consumes."""
        pins = self.l1.pins
        pinned = sum(1 for block in blocks[: match.n_blocks] if block not in pins)
        return pinned + self.state_blocks

    def announce(self, req: EngineRequest) -> None:
        """Tell the L1 policy that ``req`` is being admitted: ``set_request_ctx``, then
        ``record_request`` (module doc). Skipped where the policy keeps the base class's
        hooks, which ignore both (LRU and most others: no context object per admission)."""
        policy = self.l1.policy
        kind = type(policy)
        if kind.set_request_ctx is _NO_CTX_HOOK and kind.record_request is _NO_RECORD_HOOK:
            return
        trace = req.trace
        policy.set_request_ctx(
            RequestContext(
                index=req.index,
                timestamp_s=req.arrival_s,
                n_blocks=len(req.blocks),
                category=trace.type_id,
                session=trace.session_id,
            )
        )
        policy.record_request(req.blocks)

    def admit(self, req: EngineRequest, match: PrefixMatch) -> int:
        """Announce ``req`` to the L1 policy (``announce``) and pin the matched prefix in L1,
        copying its L2 blocks up; return how many were copied.

        The caller checked ``admission_need`` against ``l1.available()``.
        """
        l1, l2 = self.l1, self.l2
        self.announce(req)
        from_l2 = match.from_l2
        matched = req.blocks[: len(from_l2)]
        # Pin the L1 hits first so that making room for the L2 copies cannot evict them, and pin
        # the L2 sources so that write-back from L1 cannot push them out of L2 mid-copy.
        for block, in_l2 in zip(matched, from_l2, strict=True):
            if not in_l2:
                l1.pin(block)
            elif l2 is not None:
                l2.pin(block)
        n_loaded = 0
        for block, in_l2 in zip(matched, from_l2, strict=True):
            if in_l2:
                l1.add_pinned(block)
                n_loaded += 1
        if l2 is not None and n_loaded:
            l2.unpin_all(b for b, in_l2 in zip(matched, from_l2, strict=True) if in_l2)
        if not l1.park:  # a parking tier leaves pinned blocks alone: every one is pinned now
            for block in reversed(matched):
                l1.touch(block)
        req.n_pinned = len(from_l2)
        if self.state_blocks:
            l1.alloc_private(self.state_blocks)
            req.n_state = self.state_blocks
        self._set_room(req)
        return n_loaded

    # ----- growth -------------------------------------------------------------------------------
    def grow_need(self, req: EngineRequest, tokens: int) -> int:
        """L1 slots needed so that ``req`` holds KV for ``tokens`` tokens."""
        n_blocks = -(-tokens // self.block_tokens)
        n_prompt = len(req.blocks)
        pins = self.l1.pins
        need = max(0, n_blocks - n_prompt) - req.n_private
        seen: set[int] = set()
        for block in req.blocks[req.n_pinned : min(n_blocks, n_prompt)]:
            if block not in pins and block not in seen:
                need += 1
                seen.add(block)
        return max(0, need)

    def grow(self, req: EngineRequest, tokens: int) -> None:
        """Allocate L1 blocks so ``req`` covers ``tokens`` tokens (the need was checked)."""
        if tokens <= req.kv_room:
            return  # every prompt block pinned and room in the blocks held: most decodes
        l1 = self.l1
        n_blocks = -(-tokens // self.block_tokens)
        n_prompt = len(req.blocks)
        if req.n_pinned < n_prompt and n_blocks > req.n_pinned:
            new = req.blocks[req.n_pinned : min(n_blocks, n_prompt)]
            _pin_all(l1, new)
            req.n_pinned += len(new)
        extra = n_blocks - n_prompt - req.n_private
        if extra > 0:
            l1.alloc_private(extra)
            req.n_private += extra
        self._set_room(req)

    def _set_room(self, req: EngineRequest) -> None:
        """Recompute ``req.kv_room`` after its pinned or private blocks changed."""
        n_prompt = len(req.blocks)
        req.kv_room = (
            (n_prompt + req.n_private) * self.block_tokens if req.n_pinned == n_prompt else 0
        )

    def complete_blocks(self, req: EngineRequest, tokens: int) -> int:
        """Prompt blocks whose every token is among the first ``tokens`` processed."""
        if tokens >= req.prompt_len:
            return len(req.blocks)
        return min(len(req.blocks), tokens // self.block_tokens)

    def written(self, req: EngineRequest, before: int, after: int) -> None:
        """Blocks completed between ``before`` and ``after`` processed tokens (write-through)."""
        if not self.write_through:
            return
        # ``complete_blocks`` of both ends, inlined (called for every prefill chunk).
        n_prompt, bt, prompt_len = len(req.blocks), self.block_tokens, req.prompt_len
        lo = n_prompt if before >= prompt_len else min(n_prompt, before // bt)
        hi = n_prompt if after >= prompt_len else min(n_prompt, after // bt)
        if hi <= lo:
            return
        done = list(req.blocks[lo:hi])
        if self.l2 is not None:
            self.l2.insert_all(done)
        if self._to_l3 is not None:
            self._to_l3(done)

    # ----- release, swap ------------------------------------------------------------------------
    def release(self, req: EngineRequest) -> None:
        """Drop ``req``'s L1 pins (its prompt blocks stay cached) and private blocks."""
        l1 = self.l1
        l1.release(req.blocks[: req.n_pinned])
        l1.free_private(req.n_private + req.n_state)
        req.n_pinned = 0
        req.n_private = 0
        req.n_state = 0
        req.kv_room = 0

    def swap_out_need(self, req: EngineRequest) -> int:
        """L2 slots swapping ``req`` out consumes (-1 without L2)."""
        if self.l2 is None:
            return -1
        pins = self.l2.pins
        held = set(req.blocks[: req.n_pinned])
        return sum(1 for block in held if block not in pins) + req.n_private + req.n_state

    def swap_out(self, req: EngineRequest) -> None:
        """Move ``req``'s KV to L2 (pinned there) and release it from L1 (need was checked)."""
        l2 = self.l2
        assert l2 is not None
        held = req.blocks[: req.n_pinned]
        _pin_all(l2, held)
        l2.alloc_private(req.n_private + req.n_state)
        req.l2_pins.extend(held)
        req.swap_private = req.n_private + req.n_state  # the state goes with it
        n_pinned = req.n_pinned
        self.release(req)
        req.n_pinned = n_pinned  # blocks held (in L2 now)

    def swap_in_need(self, req: EngineRequest) -> int:
        """L1 slots resuming ``req`` consumes."""
        pins = self.l1.pins
        held = set(req.blocks[: req.n_pinned])
        return sum(1 for block in held if block not in pins) + req.swap_private

    def swap_in(self, req: EngineRequest) -> int:
        """Bring a swapped ``req`` back into L1 (need was checked); return blocks loaded."""
        l1, l2 = self.l1, self.l2
        assert l2 is not None
        held = req.blocks[: req.n_pinned]
        loaded = len(_pin_all(l1, held)) + req.swap_private
        l1.alloc_private(req.swap_private)
        req.n_state = min(self.state_blocks, req.swap_private)
        req.n_private = req.swap_private - req.n_state
        l2.free_private(req.swap_private)
        req.swap_private = 0
        self.release_l2(req)
        self._set_room(req)
        return loaded

    def release_l2(self, req: EngineRequest) -> None:
        """Drop the L2 pins ``req`` holds (prefetched or swapped blocks)."""
        if req.l2_pins and self.l2 is not None:
            self.l2.unpin_all(req.l2_pins)
        req.l2_pins = []

    # ----- prefetch -----------------------------------------------------------------------------
    def land_prefetch(self, req: EngineRequest, blocks: Sequence[int]) -> int:
        """Insert prefetched ``blocks`` into L2 pinned for ``req``; return how many landed.

        Lands the longest prefix of ``blocks`` that L2 has room for (pinned or private slots
        can leave L2 short). Blocks that were already in L2 are pinned but not credited to L3.
        """
        l2 = self.l2
        if l2 is None or not blocks:
            return 0
        room, pins = l2.available(), l2.pins
        count, seen = 0, set()
        for block in blocks:
            cost = 0 if block in pins or block in seen else 1
            if cost > room:
                break
            room -= cost
            seen.add(block)
            count += 1
        landed = blocks[:count]
        fetched = _pin_all(l2, landed)
        req.l2_pins.extend(landed)
        req.l3_blocks = req.l3_blocks | frozenset(fetched)
        return count

    # ----- invariants ---------------------------------------------------------------------------
    def check(self, requests: Iterable[EngineRequest]) -> None:
        """Raise ``AssertionError`` unless pins and private counts match the live requests."""
        l1_pins: Counter[int] = Counter()
        l2_pins: Counter[int] = Counter()
        l1_private = l2_private = 0
        for req in requests:
            if req.state in (RUNNING, SENDING):
                l1_pins.update(req.blocks[: req.n_pinned])
                l1_private += req.n_private + req.n_state
            elif req.state == SWAPPED:
                l2_private += req.swap_private
            elif req.n_pinned or req.n_private or req.n_state:
                raise AssertionError(f"{req} holds L1 blocks outside the running queue")
            l2_pins.update(req.l2_pins)
        for tier, pins, private in ((self.l1, l1_pins, l1_private), (self.l2, l2_pins, l2_private)):
            if tier is None:
                continue
            tier.check()
            if dict(pins) != tier.pins:
                raise AssertionError(f"{tier.name}: pins do not match the requests holding them")
            if private != tier.private:
                raise AssertionError(
                    f"{tier.name}: {tier.private} private, requests hold {private}"
                )
        if self.l3 is not None:
            self.l3.check()


def _pin_all(tier: CacheTier, blocks: Sequence[int]) -> list[int]:
    """Pin every occurrence of ``blocks`` in ``tier``, adding the absent ones (room was
    checked); return the added blocks. Resident blocks are pinned first so that making room
    for the others cannot evict them."""
    pins, resident, pin = tier.pins, tier.resident(), tier.pin
    missing: dict[int, None] = {}
    repeats: list[int] = []
    for block in blocks:
        if block in missing:
            repeats.append(block)  # a repeated id inside one request: pinned once added
        elif block in pins or block in resident:  # ``tier.has``, inlined
            pin(block)
        else:
            missing[block] = None
    added = list(missing)
    tier.add_pinned_all(added)
    for block in repeats:
        pin(block)
    return added


def _never(_block: int) -> bool:
    return False


def _copy_down(lower: CacheTier) -> EvictSink:
    return lower.insert_all
