"""Admission planning of one instance: whether and how a queued request enters ``running``.

``Admitter`` answers the scheduler's ``admit`` for a local request at the head of the waiting
queue (prefix match L1 → L2, pins, the L2 → L1 load, the KV admission policy's reserve) and
for the head of the swapped queue, and tells a ``reserve_estimate`` or ``reserve_timeline``
decode run when the waiting head will fit (``head_fit_step``). ``arrival_rejection`` is the
check a request meets when it arrives. Rules: the module docstring of ``instance.py`` (steps
1 and 2).

What this module is not: it does not preempt (``EngineInstance.grow`` does), schedule, time
steps, or admit handed-off PD requests (``remote.admit_remote``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from simulator.engine.admission import AdmissionControl
from simulator.engine.kvmanager import KVManager, PrefixMatch
from simulator.engine.params import EngineParams
from simulator.engine.progress import Q_SWAPPED, Q_WAITING, hit_tokens
from simulator.engine.request import RUNNING, WAITING, EngineRequest
from simulator.engine.transfer import LoadLink

if TYPE_CHECKING:
    from simulator.engine.host import Host
    from simulator.engine.prefetch import Prefetcher

__all__ = ["Admitter", "arrival_rejection"]


def arrival_rejection(
    req: EngineRequest,
    params: EngineParams,
    *,
    chunks_prompts: bool,
    decode_max_blocks: int | None,
    l1_blocks: int,
) -> str | None:
    """Why ``req`` is rejected on arrival at an instance with ``params`` and ``l1_blocks`` of
    L1, None if it is not. ``chunks_prompts``: whether its scheduler runs a prompt longer
    than the step budget over several steps; ``decode_max_blocks``: on a PD prefill
    instance, the most blocks a decode instance holds (None otherwise). ``req.stop_at`` is
    already what this instance generates."""
    total = req.prompt_len + req.output_len
    if total > params.max_context_tokens:
        return "longer than the model context"
    if not chunks_prompts and req.prompt_len > params.max_batched_tokens:
        return (
            "prompt longer than the step budget of an engine that does not chunk prefills "
            "(raise max_batched_tokens or use the chunked scheduler)"
        )
    # Its KV peaks at prompt + output - 1 tokens (the last token is never processed); a PD
    # prefill instance holds the prompt only and the decode side the rest.
    bt = params.block_tokens
    if decode_max_blocks is not None and -(-(total - 1) // bt) > decode_max_blocks:
        return "larger than the whole L1 cache of a decode instance"
    if -(-(req.prompt_len + req.stop_at - 1) // bt) > l1_blocks:
        return "larger than the whole L1 cache"
    return None


class Admitter:
    """Admission of local requests on one instance (``host``), through its KV tiers."""

    __slots__ = ("block_tokens", "control", "host", "kv", "load_link", "prefetcher")

    def __init__(
        self,
        host: Host,
        control: AdmissionControl,
        load_link: LoadLink,
        prefetcher: Prefetcher | None,
    ) -> None:
        """``control`` is the instance's KV admission policy, ``load_link`` its L2 → L1 link,
        ``prefetcher`` its L3 → L2 reads (None without L3)."""
        self.host = host
        self.kv: KVManager = host.kv
        self.block_tokens = host.block_tokens
        self.control = control
        self.load_link = load_link
        self.prefetcher = prefetcher

    def admit_waiting(self, req: EngineRequest, max_tokens: int, *, whole: bool) -> int:
        """``SchedulerHost.admit`` for ``req``, a local request at the head of the waiting
        queue."""
        kv = self.kv
        match = kv.match_l12(req.blocks)
        plan = self._plan(req, match, max_tokens, whole=whole)
        if plan is None:
            return -1
        if req.prefetch is not None:
            # Best effort: the GPU can take it now, so use what has arrived. Landing can only
            # add L2 hits (rarely it evicts an unpinned one); if that makes it blocked, it waits
            # at the head of the queue with the landed blocks pinned in L2.
            assert self.prefetcher is not None
            self.prefetcher.cut(req)
            match = kv.match_l12(req.blocks)
            plan = self._plan(req, match, max_tokens, whole=whole)
            if plan is None:
                return -1
        cached, n = plan
        host = self.host
        host.waiting.popleft()
        now = host.now
        req.queue_s[Q_WAITING] += now - req.enqueue_s
        n_loaded = kv.admit(req, match)
        kv.release_l2(req)
        if req.cached_tokens is None:
            req.cached_tokens = hit_tokens(req, match, cached, self.block_tokens)
        req.processed = cached
        req.ready_s = self.load_link.load(n_loaded, now)
        req.start_s = req.ready_s
        req.state = RUNNING
        host.running.append(req)
        if req.ready_s > now:
            return 0
        kv.grow(req, cached + n)
        return n

    def swap_in(self, req: EngineRequest, max_tokens: int, *, whole: bool) -> int:
        """``SchedulerHost.admit`` for ``req``, the head of the swapped queue."""
        kv = self.kv
        n = min(req.remaining, max_tokens)
        if whole and req.remaining > max_tokens:
            return -1
        bt = self.block_tokens
        host = self.host
        extra = -(-(req.processed + n) // bt) - -(-req.processed // bt)
        extra += self.control.extra_blocks(host.running, req, req.processed + n)
        if kv.swap_in_need(req) + extra > kv.l1.available():
            return -1
        now = host.now
        host.swapped.popleft()
        req.queue_s[Q_SWAPPED] += now - req.enqueue_s
        loaded = kv.swap_in(req)
        req.ready_s = self.load_link.load(loaded, now)
        req.state = RUNNING
        host.running.append(req)
        if req.ready_s > now:
            return 0
        kv.grow(req, req.processed + n)
        return n

    def head_fit_step(self, k: int, first_chunk_tokens: int) -> int:
        """``reserve_estimate`` / ``reserve_timeline`` during a decode run of ``k`` steps: the
        run ends at the first step boundary where the decaying ratio (or, for the timeline, the
        outputs the running requests have left) lets the waiting head in (no event marks that
        moment); ``k`` if it never does or something other than memory holds it back. The
        head would run ``first_chunk_tokens`` at most in its first step."""
        host = self.host
        waiting, running = host.waiting, host.running
        if not waiting or len(running) >= host.max_running or waiting[0].state != WAITING:
            return k
        head = waiting[0]
        match = self.kv.match_l12(head.blocks)
        cached = self._cached_tokens(head, match)
        remaining = head.prompt_len + head.generated - cached
        tokens_after = cached + min(remaining, first_chunk_tokens)
        need = self._immediate_need(head, match, tokens_after)
        return self.control.first_fit_step(
            running, head, tokens_after, need=need, available=self.kv.l1.available(), k=k
        )

    def _plan(
        self, req: EngineRequest, match: PrefixMatch, max_tokens: int, *, whole: bool
    ) -> tuple[int, int] | None:
        """(cached tokens, tokens this step) for admitting with ``match``, None if blocked."""
        cached = self._cached_tokens(req, match)
        remaining = req.prompt_len + req.generated - cached
        if whole and not match.loads and remaining > max_tokens:
            return None
        # While loading it runs nothing this step; its first chunk is still counted so the
        # admission never depends on how fast the load is.
        n = min(remaining, max_tokens)
        need = self._immediate_need(req, match, cached + n)
        need += self.control.extra_blocks(self.host.running, req, cached + n)
        if need > self.kv.l1.available():
            return None
        return cached, n

    def _cached_tokens(self, req: EngineRequest, match: PrefixMatch) -> int:
        """Tokens of ``req`` the matched prefix covers (the last one is recomputed)."""
        target = req.prompt_len + req.generated
        return min(match.n_blocks * self.block_tokens, req.prompt_len, target - 1)

    def _immediate_need(self, req: EngineRequest, match: PrefixMatch, tokens_after: int) -> int:
        """L1 blocks admitting ``req`` with ``match`` takes now (pins plus its first step)."""
        bt = self.block_tokens
        return self.kv.admission_need(req.blocks, match) + max(
            0, -(-tokens_after // bt) - match.n_blocks
        )
