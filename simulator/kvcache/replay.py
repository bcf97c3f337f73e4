"""PrefixSim-style trace replay: serve requests, as ordered block lists, through one policy.

For each request α = (b0 … bn-1), b0 nearest the root (DESIGN.md "The serve loop"):

0. **skip** α if it has more distinct blocks than the cache (``n_req_skipped``): nothing is
   touched and nothing counted; one warning per run names the first offender.
   Otherwise ``set_request_ctx`` fires (policies that override it only).
1. **match**, read-only, the source of every statistic: every block is probed, so a block past a
   miss can hit ("hit past a gap"). ``match="stop-at-first-miss"`` counts only the contiguous
   hit prefix, as vLLM and SGLang reuse it; the cache evolves identically in both modes, so the
   two can be compared on one trajectory.
2. **allocate**: ``needed = M - free`` (M = distinct missing blocks). Victims are requested with
   ``evict_n`` until ``needed`` victims *outside* α are gone; a victim inside α is a
   self-eviction (counted, no progress). A round that frees more blocks than the policy reports
   (``n_unobserved_eviction_round``) re-probes α to tell self-evictions from progress. α is
   pinned (``pin=True``) for policies that can honour it. Then ``record_request`` fires
   (policies that override it only).
3. **access**: α is replayed into the policy, deepest block first by default. A shrink of the
   cache here is ``n_unexpected_eviction`` (must be 0); with ``verify`` every block of α must be
   resident afterwards, else ``RuntimeError`` (a policy bug, not a user error).

Statistics: ``block_hit_ratio = hits / blocks`` and ``compute_saving_ratio = saved / total
cost`` over served requests (0.0 for an empty run). Hit counts never depend on pinning or on
the replay order directly, only through the policy's state.

Not modelled (as in PrefixSim): parent/child eviction dependencies, time, batching. Requests are
served one after another in trace order.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass, fields
from itertools import compress
from typing import Literal, get_args

import numpy as np
from numpy.typing import NDArray

from simulator.kvcache.cost import UNIFORM, CostModel
from simulator.kvcache.holes import find_holes
from simulator.kvcache.policies.base import NEVER, EvictionPolicy, RequestContext
from simulator.kvcache.served_future import distinct_counts, without_skipped
from simulator.workload.future import build_future
from simulator.workload.request import TraceRequest

__all__ = [
    "MATCH_MODES",
    "REPLAY_ORDERS",
    "RESULT_KEYS",
    "HolesCallback",
    "MatchMode",
    "ReplayOrder",
    "ReplayResult",
    "replay",
]

MatchMode = Literal["all", "stop-at-first-miss"]
ReplayOrder = Literal["deepest-first", "prefix-order"]
MATCH_MODES: tuple[str, ...] = get_args(MatchMode)
REPLAY_ORDERS: tuple[str, ...] = get_args(ReplayOrder)

#: Called once per served request with its workload index and its holes (start, length).
HolesCallback = Callable[[int, list[tuple[int, int]]], None]


@dataclass(frozen=True, slots=True)
class ReplayResult:
    """The outcome of one replay (one policy, one cache size). Ratios are in [0, 1]."""

    algo: str
    """Policy name."""
    cache_size: int
    """Capacity in blocks."""
    n_req: int
    """Served requests."""
    n_req_skipped: int
    """Requests with more distinct blocks than the cache (not served, not counted)."""
    n_blocks: int
    """Blocks probed in phase 1 over served requests (repeats within a request included)."""
    block_hit_ratio: float
    """Hits / blocks (``n_block_hits / n_blocks``)."""
    compute_saving_ratio: float
    """Cost-weighted hit ratio (``saved_cost / total_cost``)."""
    n_eviction: int
    """Blocks evicted in phase 2, self-evictions included."""
    n_self_eviction: int
    """Phase-2 victims that belonged to the request being served."""
    n_unexpected_eviction: int
    """Blocks lost in phase 3 (must be 0 for a correct policy)."""
    n_unobserved_eviction_round: int
    """Phase-2 rounds in which the policy freed more blocks than it reported (composite
    policies evicting inside sub-caches); the request was then re-probed to count them."""
    n_block_hits: int
    """Hits counted in phase 1 (by the match mode)."""
    total_cost: float
    """Sum of the cost model over every probed block."""
    saved_cost: float
    """Sum of the cost model over the counted hits."""
    warnings: tuple[str, ...] = ()
    """Human-readable diagnostics of the run (skipped requests, self-evictions, …)."""

    def summary(self) -> dict[str, str | int | float]:
        """The PrefixSim RESULT fields, exactly ``RESULT_KEYS`` (what ``--json`` prints)."""
        return {key: getattr(self, key) for key in RESULT_KEYS}


#: The keys of ``ReplayResult.summary`` in RESULT-line order.
RESULT_KEYS: tuple[str, ...] = tuple(f.name for f in fields(ReplayResult))[:11]


def replay(
    requests: Iterable[TraceRequest],
    policy: EvictionPolicy,
    *,
    cost_model: CostModel = UNIFORM,
    match: MatchMode = "all",
    replay_order: ReplayOrder = "deepest-first",
    pin: bool = True,
    verify: bool = True,
    future: Iterable[tuple[Sequence[int] | NDArray[np.int64], int]] | None = None,
    on_holes: HolesCallback | None = None,
) -> ReplayResult:
    """Serve ``requests`` in order through ``policy`` (fresh or warm) and count.

    ``future`` gives, per request, ``(next_access per block position, index of the session's
    next request)`` as ``simulator.workload.future.FutureTable.rows()`` yields them, and should
    leave out the requests this capacity skips (``served_future.without_skipped``); when
    ``None`` and the policy ``needs_next_access``, the requests are materialised and annotated
    here, skipped requests excluded (the one case that holds the trace). Otherwise
    ``requests`` and ``future`` are consumed lazily, one request at a time, and nothing per
    request is kept: a streamed trace
    replays in memory bounded by the policy's state. ``pin=False`` disables pinning even for
    policies that support it (to measure self-evictions). ``on_holes`` receives every served
    request's holes.
    Raises ``ValueError`` for an unknown ``match``/``replay_order``, ``RuntimeError`` when the
    policy breaks its contract (evicts nothing, exceeds its capacity, loses a block).
    """
    if match not in MATCH_MODES:
        raise ValueError(f"match must be one of {MATCH_MODES}, got {match!r}")
    if replay_order not in REPLAY_ORDERS:
        raise ValueError(f"replay_order must be one of {REPLAY_ORDERS}, got {replay_order!r}")
    loop = _ServeLoop(
        policy,
        cost_model=cost_model,
        match=match,
        replay_order=replay_order,
        pin=pin,
        verify=verify,
        on_holes=on_holes,
    )
    serve = loop.serve
    if future is None and policy.needs_next_access:
        requests = requests if isinstance(requests, Sequence) else list(requests)
        served = distinct_counts([r.block_ids for r in requests]) <= policy.capacity
        future = without_skipped(build_future(requests), served).rows()
    if future is None:
        for request in requests:
            serve(request, None, NEVER)
    else:
        for request, (next_access, session_next) in zip(requests, future, strict=True):
            # Policies compare these on their hot paths: Python ints beat numpy scalars there.
            row = next_access.tolist() if isinstance(next_access, np.ndarray) else next_access
            serve(request, row, session_next)
    return loop.result()


class _ServeLoop:
    """The three phases for one policy; counters live here between requests."""

    def __init__(
        self,
        policy: EvictionPolicy,
        *,
        cost_model: CostModel,
        match: MatchMode,
        replay_order: ReplayOrder,
        pin: bool,
        verify: bool,
        on_holes: HolesCallback | None,
    ) -> None:
        self.policy = policy
        self.capacity = policy.capacity
        self.cost_model = cost_model
        self.stop_at_miss = match == "stop-at-first-miss"
        self.deepest_first = replay_order == "deepest-first"
        self.pin = pin
        self.verify = verify
        self.on_holes = on_holes
        self.need_flags = self.stop_at_miss or on_holes is not None or not cost_model.uniform
        view = policy.resident_view()
        # The fast path: C-level membership tests instead of one find() call per block.
        self.probe: Callable[[int], bool] = view.__contains__ if view is not None else policy.find
        kind = type(policy)
        self.ctx_hook = kind.set_request_ctx is not EvictionPolicy.set_request_ctx
        self.record_hook = kind.record_request is not EvictionPolicy.record_request
        self.n_req = self.n_skipped = self.n_blocks = self.n_hits = 0
        self.n_eviction = self.n_self_eviction = self.n_unexpected = self.n_unobserved = 0
        self.total_cost = self.saved_cost = 0.0
        self.first_skip: tuple[int, int] | None = None

    def serve(self, request: TraceRequest, future: Sequence[int] | None, session_next: int) -> None:
        """Serve one request through phases 0-3."""
        blocks = request.block_ids
        alpha = set(blocks)
        if len(alpha) > self.capacity:
            self.n_skipped += 1
            if self.first_skip is None:
                self.first_skip = (request.index, len(alpha))
            return
        self.n_req += 1
        policy = self.policy
        if self.ctx_hook:
            policy.set_request_ctx(
                RequestContext(
                    index=request.index,
                    timestamp_s=request.timestamp_s,
                    n_blocks=len(blocks),
                    category=request.category,
                    session=request.session_id,
                    session_next_access=session_next,
                )
            )
        distinct_hits = self._match(request, alpha)
        missing = len(alpha) - distinct_hits
        needed = missing - (self.capacity - len(policy))
        self_evicted = self._allocate(needed, alpha, distinct_hits) if needed > 0 else 0
        if self.record_hook:
            policy.record_request(blocks)
        self._access(blocks, future, missing + self_evicted)

    def _match(self, request: TraceRequest, alpha: set[int]) -> int:
        """Phase 1: count hits and costs; return the number of distinct resident blocks."""
        blocks, probe, model = request.block_ids, self.probe, self.cost_model
        n = len(blocks)
        self.n_blocks += n
        self.total_cost += n if model.uniform else model.total(n)
        if self.need_flags:
            flags = list(map(probe, blocks))
            hits = counted = flags.count(True)
            if self.stop_at_miss and hits < n:
                counted = flags.index(False)
                flags = [True] * counted + [False] * (n - counted)
            if self.on_holes is not None:
                self.on_holes(request.index, find_holes(flags))
            saved = counted if model.uniform else sum(compress(model.table(n), flags))
        else:  # the common case, all C-level: uniform costs, all-block matching, no holes
            hits = counted = saved = sum(map(probe, blocks))
        self.n_hits += counted
        self.saved_cost += saved
        return hits if len(alpha) == n else sum(map(probe, alpha))

    def _allocate(self, needed: int, alpha: set[int], resident_in_alpha: int) -> int:
        """Phase 2: evict until ``needed`` victims outside α are gone; return self-evictions.

        ``resident_in_alpha`` = distinct blocks of α resident now. Victims are the ids the
        policy reports; when it frees more than it reports (an *unobserved* round), α is
        re-probed and the occupancy drop split into self-evictions and progress."""
        policy = self.policy
        pinned: Collection[int] = alpha if self.pin else ()
        progress = self_evicted = 0
        while progress < needed:
            before = len(policy)
            victims = policy.evict_n(needed - progress, pinned)
            freed = before - len(policy)
            if freed <= 0:
                raise RuntimeError(
                    f"{policy.name}: eviction freed nothing with {len(policy)} resident blocks"
                    f" and {needed - progress} more needed"
                )
            if freed == len(victims):
                inside = sum(map(alpha.__contains__, victims))
            else:
                self.n_unobserved += 1
                still = sum(map(self.probe, alpha))
                inside = resident_in_alpha - still
            resident_in_alpha -= inside
            self.n_eviction += freed
            self_evicted += inside
            progress += freed - inside
        self.n_self_eviction += self_evicted
        return self_evicted

    def _access(self, blocks: Sequence[int], future: Sequence[int] | None, inserts: int) -> None:
        """Phase 3: replay the request; ``inserts`` = distinct blocks not resident before it."""
        policy = self.policy
        before = len(policy)
        costs = self.cost_model.table(len(blocks))
        policy.access_request(blocks, costs, future, self.deepest_first)
        after = len(policy)
        if after > self.capacity:
            raise RuntimeError(f"{policy.name}: {after} resident blocks exceed {self.capacity}")
        if after < before + inserts:
            self.n_unexpected += before + inserts - after
        if self.verify and not all(map(self.probe, blocks)):
            lost = next(b for b in blocks if not self.probe(b))
            raise RuntimeError(f"{policy.name}: block {lost} not resident after its access")

    def result(self) -> ReplayResult:
        """Freeze the counters into a ``ReplayResult`` with the run's warnings."""
        policy = self.policy
        return ReplayResult(
            algo=policy.name,
            cache_size=self.capacity,
            n_req=self.n_req,
            n_req_skipped=self.n_skipped,
            n_blocks=self.n_blocks,
            block_hit_ratio=self.n_hits / self.n_blocks if self.n_blocks else 0.0,
            compute_saving_ratio=self.saved_cost / self.total_cost if self.total_cost else 0.0,
            n_eviction=self.n_eviction,
            n_self_eviction=self.n_self_eviction,
            n_unexpected_eviction=self.n_unexpected,
            n_unobserved_eviction_round=self.n_unobserved,
            n_block_hits=self.n_hits,
            total_cost=self.total_cost,
            saved_cost=self.saved_cost,
            warnings=tuple(self._warnings()),
        )

    def _warnings(self) -> Iterator[str]:
        policy = self.policy
        if self.first_skip is not None:
            index, distinct = self.first_skip
            yield (
                f"{self.n_skipped} request(s) have more distinct blocks than the cache holds"
                f" ({self.capacity}) and were skipped; the first is request {index}"
                f" with {distinct} blocks"
            )
        if self.n_self_eviction and not policy.supports_pinning:
            yield (
                f"{policy.name} cannot pin a request's blocks: {self.n_self_eviction}"
                " self-evictions (blocks of the request evicted to make room for it)"
            )
        elif self.n_self_eviction and not self.pin:
            yield (
                f"{policy.name}: {self.n_self_eviction} self-evictions with pinning off"
                " (blocks of the request evicted to make room for it; hit counts are"
                " unaffected, the policy state is not)"
            )
        if self.n_unexpected:
            yield (
                f"{policy.name}: {self.n_unexpected} unexpected evictions in phase 3"
                " (the policy evicted while inserting into guaranteed space)"
            )
