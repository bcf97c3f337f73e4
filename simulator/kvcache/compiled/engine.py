"""``CompiledReplay``: the serve loop of ``simulator.kvcache.replay`` over ``BlockChunk`` arrays.

    run = CompiledReplay("lru", 16384)              # or make(spec name, size, **params)
    for chunk in chunks:                            # simulator.workload.chunks.BlockChunk
        run.feed(chunk)
    result = run.result()                           # a ReplayResult, as replay() returns

Same semantics, counters and warnings as ``replay(requests, make_policy(name, capacity))``
with the same options (``tests/kvcache/test_compiled_differential.py`` holds the two equal);
``replay`` stays the readable reference and the path of every other policy and option. What is
compiled, and why the rest is not, is ``COMPILED`` and ``PYTHON_ONLY`` below (also
``bench/README.md``, "Replay speed"). The session policies also keep a table of the sessions
they remember and a pool of their latest paths (``_session``), grown like the slots.

Block ids may be any int64 (dense prefix-interned or lcp ids, or sparse raw hashes): a hash
table (``_slots``) maps each id to a *slot* while the policy remembers the block (resident, or a
ghost of ARC, 2Q, S3-FIFO(-D), LIRS; W-TinyLFU's doorkeeper ids count as ghosts, at most
``sample_factor`` × capacity), and the policy state is arrays indexed by slot. Slots are
recycled between requests and the arrays double only when the remembered blocks fill over 3/4
of them, so the state is O(cache size + ghost capacity + longest request), not O(largest id):
``slot_space`` slots of about 58 bytes (66 with a queue or count per slot, 74 for GDSF's
priorities and for W-TinyLFU's doorkeeper marks, 90 for belady_compute's pairing heaps, 98 for
LIRS's two more lists; hash table and free stack included), from the default start at most
8/3 × (capacity + ghosts + longest request) + 1 of them (32,767 for LRU at 16k blocks: 1.8 MiB).
Each policy family's serve kernel (``_kernels.serve_for``) is compiled on the family's first use and
cached on disk by numba (``cache=True``, keyed on every kernel module's source), so only a
family's first run on a machine, or after an upgrade, pays for its compilation (seconds;
``bench/replay_speed.py`` reports it).
"""

from __future__ import annotations

import math
import sys
import warnings
from collections.abc import Mapping
from typing import Any

import numpy as np
from numpy.typing import NDArray

from simulator.kvcache.compiled import _layout as k
from simulator.kvcache.compiled._belady import H_HEAP, H_POS
from simulator.kvcache.compiled._kernels import serve_for
from simulator.kvcache.compiled._lhd import F_DENSITY, N_LHD_FLOAT
from simulator.kvcache.compiled._partial import new_node_table
from simulator.kvcache.compiled._session import N_SESSION_ROWS, NO_PATH, R_PATH
from simulator.kvcache.compiled._workload import Q_WA_FIRST
from simulator.kvcache.cost import UNIFORM, CostModel
from simulator.kvcache.policies import make_policy
from simulator.kvcache.policies._common import nothing_evictable
from simulator.kvcache.policies.base import NEVER
from simulator.kvcache.policies.session import NO_SESSION_WARNING
from simulator.kvcache.replay import (
    MATCH_MODES,
    REPLAY_ORDERS,
    MatchMode,
    ReplayOrder,
    ReplayResult,
)
from simulator.workload.chunks import BlockChunk
from simulator.workload.future import FutureTable

__all__ = ["COMPILED", "CONTEXT", "PYTHON_ONLY", "CompiledReplay", "compiled_reason"]

#: Policies with a compiled path: name -> kernel kind.
COMPILED: dict[str, int] = {
    "lru": k.K_LRU,
    "fifo": k.K_FIFO,
    "clock": k.K_CLOCK,
    "sieve": k.K_SIEVE,
    "lfu": k.K_LFU,
    "s3fifo": k.K_S3FIFO,
    "slru": k.K_SLRU,
    "twoq": k.K_TWOQ,
    "arc": k.K_ARC,
    "s3fifod": k.K_S3FIFOD,
    "gdsf": k.K_GDSF,
    "gdsf_compute": k.K_GDSF_COMPUTE,
    "belady": k.K_BELADY,
    "belady_compute": k.K_BELADY_COMPUTE,
    "lirs": k.K_LIRS,
    "wtinylfu": k.K_WTINYLFU,
    "asym_cache": k.K_ASYM,
    "random_compute": k.K_RANDOM,
    "random_compute_small_queue": k.K_RANDOM_SMALL,
    "workload_aware": k.K_WORKLOAD,
    "partial_node_random_compute": k.K_PARTIAL,
    "partial_node_random_freq": k.K_PARTIAL_FREQ,
    "lhd": k.K_LHD,
    "lhd_compute": k.K_LHD_COMPUTE,
    "session_lru": k.K_SESSION_LRU,
    "session_belady": k.K_SESSION_BELADY,
    "session_random_compute": k.K_SESSION_RANDOM,
    "session_s3fifo": k.K_SESSION_S3FIFO,
    "session_arc": k.K_SESSION_ARC,
}
#: Compiled policies that read the request context (``RequestContext``): their chunks must
#: carry it (``BlockChunk.timestamps`` / ``categories`` / ``sessions``: ``chunk_requests``
#: and the file readers fill them), the field named here.
CONTEXT: dict[str, str] = {
    "asym_cache": "timestamps",
    "workload_aware": "categories",
    **{name: "sessions" for name, kind in COMPILED.items() if kind >= k.K_SESSION_LRU},
}

#: Every other registered policy, with why it stays on the Python path (none is left).
PYTHON_ONLY: dict[str, str] = {}

#: Kinds that keep no per-slot ``cls`` (one list and ``aux`` are all their state).
_LIST_ONLY = frozenset({k.K_LRU, k.K_FIFO, k.K_CLOCK, k.K_SIEVE})
#: Kinds whose blocks sit in a heap (``_heaps``): per-slot ``keys`` and a heap array.
_HEAPS = frozenset({k.K_GDSF, k.K_GDSF_COMPUTE, k.K_BELADY, k.K_ASYM})
#: Kinds that sample a dense list of their resident slots (``_random``, ``_partial``,
#: ``_lhd``; in ``heap``).
_SAMPLED = frozenset(
    {k.K_RANDOM, k.K_RANDOM_SMALL, k.K_PARTIAL, k.K_PARTIAL_FREQ, k.K_LHD, k.K_LHD_COMPUTE}
)
#: Rows of per-slot ``links`` (``_lirs``: its S and Q lists; ``_tinylfu``: doorkeeper marks;
#: ``_random``, ``_lhd``: last-access stamps; ``_partial``: nodes).
_LINK_ROWS = {
    k.K_LIRS: 4,
    k.K_WTINYLFU: 1,
    k.K_RANDOM: 1,
    k.K_RANDOM_SMALL: 1,
    k.K_WORKLOAD: 2,
    k.K_PARTIAL: 1,
    k.K_PARTIAL_FREQ: 1,
    k.K_BELADY_COMPUTE: 3,
    k.K_LHD: 1,
    k.K_LHD_COMPUTE: 1,
    **dict.fromkeys(range(k.K_SESSION_LRU, k.K_SESSION_ARC + 1), 1),  # claimed-by-request marks
}
_NO_FUTURE = np.zeros(0, dtype=np.int64)
_NO_SESSIONS = np.zeros((0, 2), dtype=np.int64)
_NO_FLOATS = np.zeros(0, dtype=np.float64)

_INITIAL_SLOTS = 1024  # doubled while the blocks a policy remembers fill over 3/4 of them
#: ``sum()`` of floats is compensated (Neumaier) from Python 3.12 on (``_session._score``).
_NEUMAIER_SUM = sys.version_info >= (3, 12)


def compiled_reason(name: str, *, holes: bool = False) -> str | None:
    """``None`` if a run of policy ``name`` can take the compiled path, else why it cannot.

    ``holes``: the run dumps holes (``--dump-holes``), which only the Python loop reports.
    Every cost model, match mode, replay order and pin setting is compiled.
    """
    if name not in COMPILED:
        return PYTHON_ONLY.get(name, f"unknown policy {name!r}")
    if holes:
        return "--dump-holes needs the per-request hole callback of the Python loop"
    return None


class CompiledReplay:
    """One (policy, capacity) replay fed chunk by chunk; see the module docstring.

    ``params`` are the policy's own keyword parameters (checked by constructing the Python
    policy, so a bad one raises the same ``TypeError``/``ValueError``). Raises ``ValueError``
    for a policy without a compiled path or an unknown ``match``/``replay_order``, and
    ``RuntimeError`` where the Python loop would (a policy breaking its contract).
    ``slots``: the initial slot capacity (rounded up to a power of two, at least 4), doubled
    from there when needed (tests pass a small one, so the arrays grow mid-chunk).
    """

    def __init__(
        self,
        name: str,
        capacity: int,
        *,
        params: Mapping[str, Any] | None = None,
        cost_model: CostModel = UNIFORM,
        match: MatchMode = "all",
        replay_order: ReplayOrder = "deepest-first",
        pin: bool = True,
        verify: bool = True,
        seed: int = 0,
        slots: int = _INITIAL_SLOTS,
    ) -> None:
        if name not in COMPILED:
            raise ValueError(f"{name}: no compiled path ({compiled_reason(name)})")
        if match not in MATCH_MODES:
            raise ValueError(f"match must be one of {MATCH_MODES}, got {match!r}")
        if replay_order not in REPLAY_ORDERS:
            raise ValueError(f"replay_order must be one of {REPLAY_ORDERS}, got {replay_order!r}")
        params = dict(params or {})
        # The Python policy validates capacity and params, and derives S3-FIFO's queue sizes.
        policy = make_policy(name, capacity, seed=seed, **params)
        self.name = name
        self.capacity = capacity
        self._kind = COMPILED[name]
        self.needs_session_future = self._kind == k.K_SESSION_BELADY
        """Whether ``feed`` needs the next turn of each request's session (session oracle)."""
        self.needs_future = policy.needs_next_access and not self.needs_session_future
        """Whether ``feed`` needs the chunk's next block accesses (block oracles)."""
        self.policy_warnings: tuple[str, ...] = ()
        """What the Python policy would have warned through ``warnings`` so far (each message
        also goes through ``warnings.warn`` once, as the policy issues it)."""
        self._top = (1 << int(params.get("bits", 1))) - 1  # CLOCK's counter ceiling
        self._model = cost_model
        self._stop_at_miss = match == "stop-at-first-miss"
        self._deepest_first = replay_order == "deepest-first"
        self._pin = pin
        self._verify = verify
        self._state = np.zeros(k.N_STATE, dtype=np.int64)
        self._state[k.S_SKIP_INDEX] = -1
        self._sums = np.zeros(k.N_FLOAT, dtype=np.float64)  # cost sums, ARC's p / GDSF's L
        # CLOCK's passed-over pinned blocks, the heaps' pinned ones, a random policy's sample
        self._scratch = np.zeros(max(capacity, getattr(policy, "n_sample", 0)), dtype=np.int64)
        self._rng = policy.rng  # the random policies draw from it, as their Python policy
        self._costs = np.ones(0, dtype=np.float64)
        self._logcosts = _NO_FLOATS  # AsymCache: log2 of each position's cost
        self._buckets: dict[float, int] = {}  # BeladyCompute: cost -> bucket (``_belady``)
        self._context = CONTEXT.get(name)
        self._half_life = float(getattr(policy, "half_life", 1.0))  # AsymCache's
        self._cumulative = np.zeros(1, dtype=np.float64)
        self._xs = np.zeros(0, dtype=np.int64)  # the slot of each block access of a request
        self._nxt = self._prv = self._stamp = self._ids = np.zeros(0, dtype=np.int64)
        self._res = self._aux = np.zeros(0, dtype=np.uint8)
        self._cls = np.zeros(0, dtype=np.int64)  # LFU: frequency node; queues: queue; GDSF: freq
        self._keys = np.zeros(0, dtype=np.float64)  # GDSF: each block's priority H
        self._free = self._table = self._ids  # the free stack, the id -> slot table (``_slots``)
        self._heap = np.zeros(capacity + 1 if self._kind in _HEAPS | _SAMPLED else 1, np.int64)
        self._nodes = np.zeros((6, k.N_QUEUES), np.int64)  # the queue policies' queues
        self._links = np.zeros((_LINK_ROWS.get(self._kind, 0), 0), np.int64)
        self._sketch = np.zeros((1, 1), np.int64)  # W-TinyLFU's count-min sketch
        self._limits(policy)
        if self._kind == k.K_LFU:
            self._nodes = new_nodes(capacity)
        self._categories: dict[int, int] = {}  # WorkloadAware: category -> dense index
        self._grow(1 << max(2, (slots - 1).bit_length()))
        self._new_sessions()

    def _new_sessions(self) -> None:
        """The session policies' session table, its hash table and path pool (``_session``),
        as small as the block slots at the start and grown alike; one column for the others."""
        self._sessions = self._kind >= k.K_SESSION_LRU
        self._sess = np.zeros((N_SESSION_ROWS, 1), np.int64)
        self._stable = self._pool = np.zeros(1, np.int64)
        if self._sessions:
            self._grow_sessions(len(self._ids))
            self._pool = np.zeros(len(self._ids), np.int64)

    @property
    def slot_space(self) -> int:
        """Slots the per-block arrays have now (blocks the policy can remember before they
        double); bounded by the cache size, ghosts and the longest request, not by the ids."""
        return len(self._ids) - 1

    def _limits(self, policy: Any) -> None:  # noqa: C901  (a branch per policy family)
        """Copy the queue bounds the Python policy derived from its parameters into the state
        (so both paths round them in one place)."""
        st = self._state
        if self._kind in {k.K_S3FIFO, k.K_S3FIFOD}:
            st[k.S_SMALL_TARGET] = policy.small_target
            st[k.S_GHOST_CAP] = policy.ghost_capacity
        elif self._kind == k.K_SLRU:  # the policy's own rounding of protected_ratio × capacity
            st[k.S_LIMIT] = policy._protected_capacity
        elif self._kind == k.K_TWOQ:
            st[k.S_LIMIT] = policy.kin
            st[k.S_GHOST_LIMIT] = policy.kout
        elif self._kind in _SAMPLED:
            st[k.S_LIMIT] = policy.n_sample
            st[k.S_SMALL_TARGET] = getattr(policy, "small_target", 0)
            if self._kind in {k.K_PARTIAL, k.K_PARTIAL_FREQ}:  # ``_partial``: its node table
                st[k.S_MICRO] = policy.micro_batch if policy.eviction_mode == "micro" else 0
                st[k.S_NODE_FREE_N] = self.capacity + 1
                self._nodes = new_node_table(self.capacity)
            if self._kind in {k.K_LHD, k.K_LHD_COMPUTE}:  # ``_lhd``: its clock and age tables
                st[k.S_COARSE] = policy.coarsening
                st[k.S_PERIOD] = policy.period
                self._sums = _extended(self._sums, N_LHD_FLOAT)
                self._sums[F_DENSITY:] = policy.density  # the initial 1 / (a + 1), as Python's
        elif self._kind == k.K_BELADY_COMPUTE:
            st[k.S_CLOCK] = 1  # the policy's ``_base``
            if self._model.uniform:  # one bucket, cost 1.0 (what the uniform table holds)
                self._cost_buckets(1)
        elif self._kind == k.K_LIRS:
            st[k.S_LIR_TARGET] = policy.lir_target
        elif self._kind >= k.K_SESSION_LRU:
            st[k.S_SESS_ANON] = -2  # the Python ``_next_anonymous``
            st[k.S_NEUMAIER] = _NEUMAIER_SUM
            st[k.S_LIMIT] = getattr(policy, "n_sample", 0)
            self._sums[k.F_POLICY] = getattr(policy, "small_ratio", 0.0)  # ARC's p starts at 0
        elif self._kind == k.K_WORKLOAD:
            st[k.S_PERIOD] = policy.aging_period
            self._nodes = np.zeros((6, Q_WA_FIRST), np.int64)  # the ghost FIFO; no category
        elif self._kind == k.K_WTINYLFU:
            st[k.S_WINDOW_TARGET] = policy.window_target
            st[k.S_MAIN_TARGET] = policy.main_target
            st[k.S_PROTECTED_TARGET] = policy.protected_target
            sketch = policy.sketch
            self._sketch = np.array(sketch._rows, dtype=np.int64)  # zeros, depth × width
            st[k.S_SKETCH_SHIFT] = sketch._shift
            st[k.S_PERIOD] = sketch.period
            st[k.S_DOORKEEPER] = sketch.use_doorkeeper
            st[k.S_DOOR_GEN] = 1  # a slot's mark 0 is never the generation: not in it

    def feed(
        self,
        chunk: BlockChunk,
        future: NDArray[np.int64] | None = None,
        session_next: NDArray[np.int64] | None = None,
    ) -> None:
        """Serve the chunk's requests, in order, after everything fed before.

        ``future`` (block oracles only, required then: ``needs_future``): the next access of
        every block of ``chunk.blocks``, as ``replay`` receives it per request
        (``served_future``: the served trace's future, so skipped requests' accesses are left
        out). ``session_next`` (session_belady only, required then: ``needs_session_future``):
        per request of the chunk, the index of its session's next served request or
        ``NEVER`` (``FutureTable.session_next`` of that served future, at the chunk's
        requests). Raises ``ValueError`` for a missing, unexpected or mis-sized annotation or
        context, and what ``replay`` raises where the policy breaks its contract."""
        _check_annotation(self.name, "future", "next-access annotations", self.needs_future,
                          future, len(chunk.blocks), "blocks")  # fmt: skip
        _check_annotation(self.name, "session_next", "session next-turn annotations",
                          self.needs_session_future, session_next, chunk.n_requests,
                          "requests")  # fmt: skip
        rq_f = _NO_FLOATS
        rq_i = _NO_SESSIONS
        if self._context is not None:
            values = getattr(chunk, self._context)
            if values is None:
                raise ValueError(f"{self.name}: reads request {self._context}; the chunk has none")
            if self._sessions:  # (session, its next turn) per request
                rq_i = np.full((chunk.n_requests, 2), NEVER, dtype=np.int64)
                rq_i[:, 0] = values
                if session_next is not None:
                    rq_i[:, 1] = session_next
            elif self._kind == k.K_WORKLOAD:  # dense categories
                rq_f = self._dense(values)
            else:  # AsymCache: what the policy computes per request
                rq_f = values / self._half_life
        if chunk.n_requests == 0:
            return
        longest = int(np.diff(chunk.offsets).max())
        if not self._model.uniform:
            self._cost_tables(longest)
        if len(self._xs) < longest:
            self._xs = np.zeros(max(longest, 2 * len(self._xs)), dtype=np.int64)
        ahead = _NO_FUTURE if future is None else np.ascontiguousarray(future, dtype=np.int64)
        start = 0  # the first request not served yet (a sweep may leave too few free slots)
        while True:
            code = self._serve(chunk, start, ahead, rq_f, rq_i)
            if code != k.E_GROW:
                break
            start += int(self._state[k.S_RESUME])
            self._grow_what_is_short()
        self._warn_anonymous()
        if code != k.E_OK:
            raise self._failure(code)

    def feed_served(self, chunk: BlockChunk, future: FutureTable | None, at: int) -> None:
        """``feed`` with the chunk's slices of ``future``, the future of the whole served trace
        (``served_future.without_skipped``; ``None`` for a policy that reads none): the next
        accesses of its blocks, from block access ``at`` of the trace (the accesses of the
        chunks before it), for a block oracle, the next turns of its requests (by their
        workload index) for session_belady."""
        if future is None:
            self.feed(chunk)
            return
        first = chunk.first_index
        self.feed(
            chunk,
            future.next_access[at : at + len(chunk.blocks)] if self.needs_future else None,
            future.session_next[first : first + chunk.n_requests]
            if self.needs_session_future
            else None,
        )

    def _grow_what_is_short(self) -> None:
        """After ``E_GROW``: the block slots (``st[S_ERR_A]`` slots needed), or the session
        slots or path pool that ``_session.session_room`` found short."""
        st = self._state
        if st[k.S_ERR_A]:
            self._grow(_doubled(len(self._ids), int(st[k.S_ERR_A])))
        if st[k.S_SESS_NEED]:
            self._grow_sessions(_doubled(self._sess.shape[1], int(st[k.S_SESS_NEED])))
            st[k.S_SESS_NEED] = 0
        if st[k.S_POOL_NEED]:
            self._pool = _extended(self._pool, _doubled(len(self._pool), int(st[k.S_POOL_NEED])))
            st[k.S_POOL_NEED] = 0

    def _grow_sessions(self, size: int) -> None:
        """Make the session table ``size`` columns long (new session slots free: ``R_PATH``
        -1) with a hash table twice that, empty, and no free slot on the stack, so the next
        request rebuilds both (``_session.session_room``)."""
        old = self._sess
        self._sess = np.zeros((N_SESSION_ROWS, size), np.int64)
        self._sess[R_PATH] = NO_PATH
        self._sess[:, : old.shape[1]] = old
        self._stable = np.zeros(2 * size, np.int64)
        self._state[k.S_SESS_SHIFT] = 64 - (2 * size).bit_length() + 1  # 64 - log2(len)
        self._state[k.S_SESS_FREE_N] = 0

    def _warn_anonymous(self) -> None:
        """The session policies' one warning when requests carry no session id, issued once
        as the Python policy issues it (and kept in ``policy_warnings``)."""
        if self.policy_warnings or not self._sessions:
            return
        if self._state[k.S_SESS_ANON] != -2:  # an anonymous session was numbered
            message = f"{self.name}: {NO_SESSION_WARNING}"
            self.policy_warnings = (message,)
            warnings.warn(message, RuntimeWarning, stacklevel=3)

    def _dense(self, categories: NDArray[np.int64]) -> NDArray[np.float64]:
        """WorkloadAware: the dense index of each request's category (new ones numbered in
        first-seen order, each with an empty queue and zero counts: ``_workload``)."""
        known = self._categories
        uniques, inverse = np.unique(categories, return_inverse=True)
        for category in uniques.tolist():
            known.setdefault(category, len(known))
        n = len(known)
        if self._nodes.shape[1] < Q_WA_FIRST + n:
            nodes = np.zeros((6, Q_WA_FIRST + n), np.int64)
            nodes[:, : self._nodes.shape[1]] = self._nodes
            self._nodes = nodes
            self._sums = _extended(self._sums, k.N_FLOAT + 2 * n)
        index = np.array([known[c] for c in uniques.tolist()], dtype=np.float64)
        return index[inverse]

    def _serve(
        self,
        chunk: BlockChunk,
        start: int,
        future: NDArray[np.int64],
        rq_f: NDArray[np.float64],
        rq_i: NDArray[np.int64],
    ) -> int:
        """One ``serve`` call on the chunk's requests from ``start`` on; returns its code."""
        return int(
            serve_for(self._kind)(  # the entry point of the policy's family
                self._kind,
                self._top,
                self.capacity,
                chunk.blocks,
                chunk.offsets[start:],
                chunk.first_index + start,
                self._model.uniform,
                self._costs,
                self._cumulative,
                self._logcosts,
                rq_f[start:],
                rq_i[start:],
                future,
                self._stop_at_miss,
                self._deepest_first,
                self._pin,
                self._verify,
                self._xs,
                self._nxt,
                self._prv,
                self._res,
                self._aux,
                self._stamp,
                self._scratch,
                self._cls,
                self._nodes,
                self._keys,
                self._heap,
                self._ids,
                self._table,
                self._free,
                self._links,
                self._sketch,
                self._sess,
                self._stable,
                self._pool,
                self._state,
                self._sums,
                self._rng,
            )
        )

    def result(self) -> ReplayResult:
        """The counters so far as a ``ReplayResult`` (what ``replay`` returns for the run)."""
        st = self._state
        n_blocks, n_hits = int(st[k.S_BLOCKS]), int(st[k.S_HITS])
        total, saved = float(self._sums[k.F_TOTAL]), float(self._sums[k.F_SAVED])
        return ReplayResult(
            algo=self.name,
            cache_size=self.capacity,
            n_req=int(st[k.S_REQ]),
            n_req_skipped=int(st[k.S_SKIP]),
            n_blocks=n_blocks,
            block_hit_ratio=n_hits / n_blocks if n_blocks else 0.0,
            compute_saving_ratio=saved / total if total else 0.0,
            n_eviction=int(st[k.S_EVICT]),
            n_self_eviction=int(st[k.S_SELF]),
            n_unexpected_eviction=int(st[k.S_UNEXP]),
            n_unobserved_eviction_round=int(st[k.S_UNOBS]),
            n_block_hits=n_hits,
            total_cost=total,
            saved_cost=saved,
            warnings=self._warnings(),
        )

    def _warnings(self) -> tuple[str, ...]:
        """The Python loop's warnings (``replay._ServeLoop._warnings``); every compiled policy
        honours pins, so self-evictions can only come from ``pin=False``."""
        st = [int(v) for v in self._state]
        out = []
        if st[k.S_SKIP]:
            out.append(
                f"{st[k.S_SKIP]} request(s) have more distinct blocks than the cache holds"
                f" ({self.capacity}) and were skipped; the first is request"
                f" {st[k.S_SKIP_INDEX]} with {st[k.S_SKIP_DISTINCT]} blocks"
            )
        if st[k.S_SELF] and not self._pin:
            out.append(
                f"{self.name}: {st[k.S_SELF]} self-evictions with pinning off"
                " (blocks of the request evicted to make room for it; hit counts are"
                " unaffected, the policy state is not)"
            )
        if st[k.S_UNEXP]:
            out.append(
                f"{self.name}: {st[k.S_UNEXP]} unexpected evictions in phase 3"
                " (the policy evicted while inserting into guaranteed space)"
            )
        return tuple(out)

    def _failure(self, code: int) -> Exception:
        a, b = int(self._state[k.S_ERR_A]), int(self._state[k.S_ERR_B])
        if code == k.E_KEY:  # the Python policy's KeyError (``_lirs``)
            return KeyError(a)
        if code == k.E_NOTHING_FREED:
            return RuntimeError(
                f"{self.name}: eviction freed nothing with {a} resident blocks and {b} more needed"
            )
        if code == k.E_ALL_PINNED:
            return nothing_evictable(self.name)
        if code == k.E_OVER_CAPACITY:
            return RuntimeError(f"{self.name}: {a} resident blocks exceed {self.capacity}")
        return RuntimeError(f"{self.name}: block {a} not resident after its access")

    def _grow(self, size: int) -> None:
        """Make every per-slot array ``size`` long (a power of two; new slots: not resident),
        with a hash table twice that, and an empty free stack, so the next request sweeps: the
        sweep rebuilds the table and puts the new slots on the stack."""
        self._ids = _extended(self._ids, size)
        self._free = np.zeros(size, dtype=np.int64)
        self._table = np.zeros(2 * size, dtype=np.int64)
        self._state[k.S_SHIFT] = 64 - (2 * size).bit_length() + 1  # 64 - log2(len(table))
        self._state[k.S_FREE_N] = 0
        self._nxt = _extended(self._nxt, size)
        self._prv = _extended(self._prv, size)
        self._stamp = _extended(self._stamp, size)
        self._res = _extended(self._res, size)
        self._aux = _extended(self._aux, size)
        if self._kind not in _LIST_ONLY:
            self._cls = _extended(self._cls, size)
        if self._kind in {k.K_GDSF, k.K_GDSF_COMPUTE, k.K_ASYM, k.K_SESSION_RANDOM} | _SAMPLED:
            self._keys = _extended(self._keys, size)
        if len(self._links):
            links = np.zeros((len(self._links), size), dtype=np.int64)
            links[:, : self._links.shape[1]] = self._links
            self._links = links

    def _cost_tables(self, longest: int) -> None:
        """Cost per position and per request length, from the model's own memoised tables
        (so every float is the one the Python loop adds)."""
        if len(self._costs) >= longest:
            return
        n = max(longest, 2 * len(self._costs))
        model = self._model
        self._costs = np.array(model.table(n)[:n], dtype=np.float64)
        self._cumulative = np.array([model.total(i) for i in range(n + 1)], dtype=np.float64)
        if self._kind == k.K_BELADY_COMPUTE:
            self._cost_buckets(n)
        if self._kind == k.K_ASYM:  # the policy's own expression, per position
            logs = [math.log2(c) if c > 0 else -math.inf for c in model.table(n)[:n]]
            self._logcosts = np.array(logs, dtype=np.float64)

    def _cost_buckets(self, n: int) -> None:
        """BeladyCompute: number the distinct costs of positions 0 … n-1 (``nodes[1, p]``: the
        bucket of position p; ``fs[N_FLOAT + b]``: bucket b's cost), keeping the buckets, their
        heap roots (``nodes[0]``) and the lazy bucket heap numbered so far; a new bucket joins
        that heap at its end, empty (stored worth +inf, ``_belady``). ``st[S_SIGNED]`` is set
        once a cost is negative or NaN (the lazy heap needs every cost ≥ 0)."""
        buckets = self._buckets
        old = len(buckets)
        table = self._model.table(n)[:n]
        index = [buckets.setdefault(c, len(buckets)) for c in table]
        width = max(n, len(buckets)) + 1
        nodes = np.zeros((6, width), np.int64)
        kept = min(width, self._nodes.shape[1])  # at most len(buckets) + 1 columns are used
        nodes[0, :kept] = self._nodes[0, :kept]
        nodes[H_HEAP:, :kept] = self._nodes[H_HEAP:, :kept]  # the heap's rows, H_HEAP on
        nodes[1, :n] = index
        new = np.arange(old, len(buckets))
        nodes[H_HEAP, new + 1] = new
        nodes[H_POS, new] = new + 1
        self._nodes = nodes
        keys = np.full(width, np.inf)
        kept = min(width, len(self._keys))
        keys[:kept] = self._keys[:kept]
        self._keys = keys
        self._sums = _extended(self._sums, k.N_FLOAT + len(buckets))
        self._sums[k.N_FLOAT :] = list(buckets)
        self._state[k.S_BUCKETS] = len(buckets)
        if not all(c >= 0 for c in buckets):
            self._state[k.S_SIGNED] = 1


def _check_annotation(  # noqa: PLR0917  (one message per argument)
    name: str,
    arg: str,
    what: str,
    needed: bool,
    given: NDArray[np.int64] | None,
    n: int,
    unit: str,
) -> None:
    """Raise ``ValueError`` unless ``feed``'s argument ``arg`` (``what``) is given exactly when
    policy ``name`` needs it, with ``n`` entries (one per ``unit``)."""
    if needed != (given is not None):
        raise ValueError(f"{name}: {'needs' if needed else 'takes no'} {what} ({arg})")
    if given is not None and len(given) != n:
        raise ValueError(f"{arg} has {len(given)} entries for {n} {unit}")


def _doubled(size: int, slots: int) -> int:
    """``size`` doubled until ``slots`` fill at most 3/4 of its slots (slot 0 is no slot), so
    a quarter is left free (``_slots.make_room``)."""
    while 3 * (size - 1) < 4 * slots:
        size *= 2
    return size


def _extended(array: NDArray[Any], size: int) -> NDArray[Any]:
    out = np.zeros(size, dtype=array.dtype)
    out[: len(array)] = array
    return out


def new_nodes(capacity: int) -> NDArray[np.int64]:
    """LFU's node table of an empty cache (``_kernels``, LFU section): every node id
    1 … capacity + 1 free, no lowest node."""
    nodes = np.zeros((6, capacity + 2), dtype=np.int64)
    nodes[k.FREE, 1:] = np.arange(capacity + 1, 0, -1)
    nodes[k.FREE, 0] = capacity + 1
    return nodes
