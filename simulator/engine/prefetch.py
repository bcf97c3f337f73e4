"""The prefetch queue of one instance: L3 → L2 reads started at arrival (HiCache-style).

At arrival the request's prefix is matched L1 → L2 → L3 (stopping at the first miss). When the
L3-only blocks of that prefix hold at least ``prefetch_threshold_tokens`` tokens they are read
into L2 on the instance's port of a channel (its server's drive FIFO, or a shared pool) and pinned
there for the request. The policy then decides when the request may be admitted:

- ``best_effort``: at once (it joins the waiting queue); when the scheduler admits it, the read
  is cut and the blocks that have arrived are used, the rest recomputed;
- ``wait_complete``: it sits in the prefetch queue until the whole read has arrived;
- ``timeout``: as ``wait_complete`` for at most ``base + per_1k × tokens / 1024`` seconds,
  then the read is cut as for ``best_effort``.
"""

from __future__ import annotations

from collections.abc import Callable

from simulator.core import Kernel
from simulator.engine.kvmanager import KVManager
from simulator.engine.params import EngineParams
from simulator.engine.request import PREFETCHING, EngineRequest
from simulator.engine.transfer import Channel, Transfer

__all__ = ["Prefetcher"]


class Prefetcher:
    """Starts, finishes, times out and cuts the L3 → L2 reads of one instance."""

    def __init__(
        self,
        kernel: Kernel,
        channel: Channel,
        kv: KVManager,
        params: EngineParams,
        on_ready: Callable[[EngineRequest], None],
    ) -> None:
        self.kernel = kernel
        self.channel = channel
        self.kv = kv
        self.params = params
        self.on_ready = on_ready
        """Called when a request leaves the prefetch queue (it then joins the waiting queue)."""
        self.queue: dict[int, EngineRequest] = {}
        """Requests waiting for their read (``wait_complete`` / ``timeout``), by index."""
        self._timeouts: dict[int, int] = {}

    def start(self, req: EngineRequest) -> bool:
        """Start the read ``req`` warrants, if any; True if ``req`` now waits in this queue."""
        l3 = self.kv.l3
        assert l3 is not None
        _, fetch = self.kv.l3_candidates(req.blocks)
        if not fetch:
            return False
        bt = self.params.block_tokens
        tokens = len(fetch) * bt
        if fetch[-1] == req.blocks[-1]:  # the prompt's last block may be partial
            tokens -= len(req.blocks) * bt - req.prompt_len
        if tokens < self.params.prefetch_threshold_tokens:
            return False
        for block in fetch:
            l3.touch(block)
        req.prefetch = self.channel.submit(fetch, req, self._done)
        policy = self.params.prefetch_policy
        if policy == "best_effort":
            return False
        req.state = PREFETCHING
        self.queue[req.index] = req
        if policy == "timeout":
            allowance = self.params.prefetch_timeout_base_s
            allowance += self.params.prefetch_timeout_per_1k_tokens_s * tokens / 1024
            self._timeouts[req.index] = self.kernel.after(allowance, lambda: self._timeout(req))
        return True

    def cut(self, req: EngineRequest) -> None:
        """Stop ``req``'s read now and land what has arrived (best effort at admission)."""
        transfer = req.prefetch
        if transfer is None:
            return
        got = self.channel.cancel(transfer)
        req.prefetch = None
        self.kv.land_prefetch(req, transfer.blocks[:got])

    def _done(self, transfer: Transfer) -> None:
        req = transfer.owner
        assert isinstance(req, EngineRequest)
        req.prefetch = None
        self.kv.land_prefetch(req, transfer.blocks)
        if req.state == PREFETCHING:
            token = self._timeouts.pop(req.index, None)
            if token is not None:
                self.kernel.cancel(token)
            self._leave(req)

    def _timeout(self, req: EngineRequest) -> None:
        self._timeouts.pop(req.index, None)
        if req.state == PREFETCHING and req.prefetch is not None:
            self.cut(req)
            self._leave(req)

    def _leave(self, req: EngineRequest) -> None:
        del self.queue[req.index]
        self.on_ready(req)
