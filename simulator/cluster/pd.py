"""Prefill/decode (PD) disaggregation: a prefill pool hands each request's KV to a decode pool.

Life of a request (``pd_mode: disaggregated``):

1. **Arrival** — the configured ``router`` picks a *prefill* instance (``EntryRouter``). The
   request is rejected there if its prompt does not fit a prefill instance's L1, or if prompt
   + output − 1 tokens would not fit a decode instance's L1.
2. **Prefill** — as on any instance (prefix cache, L2/L3, chunking, the prefill instance's
   scheduler). The step that completes the prompt samples the first token; whether the client
   gets it now depends on ``pd_first_token`` (step 5).
3. **Hand-off** — the prefill instance keeps the prompt's KV in L1 (state ``SENDING``) and
   ``decode_router`` picks a decode instance at that moment. The request queues there (FIFO
   with the decode pool's own requests) until the decode instance has L1 room for the prompt
   plus the first decode token and a free ``max_running`` slot. Until then the KV stays on
   the prefill instance, taking its memory: a decode pool out of memory back-pressures
   prefill (new prompts there wait for L1).
4. **Transfer** — on admission the prompt blocks the decode instance does not already hold
   (its own prefix cache) move from the prefill instance. Time: ``latency + bytes / (lanes ×
   per-GPU bandwidth)`` with ``bytes`` the model's KV of the moved blocks, ``lanes = min(prefill
   GPUs, decode GPUs)`` pairs in parallel (an instance's GPUs = TP × PP), NVLink when the two
   instances share a node (same GPU type, packed onto nodes in order: prefill instances, then
   decode), else the NIC (the slower of the two GPUs'). A prefill instance sends one transfer
   at a time and a decode instance receives one at a time (each side's link serialises; two
   prefill instances sending to the same decode instance queue behind each other).
   ``pd_transfer_overlap``:

   - ``none`` (default; vLLM NIXL / SGLang Mooncake connectors pull the KV after the prefill):
     the whole transfer starts at admission;
   - ``layerwise`` (Mooncake-style streaming): the KV is taken to stream out as each layer is
     computed, from the start of the prefill, so it is complete at ``max(admission + T /
     n_layers, max(prefill start, link free) + T)`` — only the last layer's share is exposed
     when the link keeps up. A request that found the decode side full (back-pressure) gets
     no overlap: it starts the whole transfer when admitted.

   The prefill instance frees the KV when the transfer ends.
5. **Decode** — the rest of the output on the decode instance. Where the client's **first
   token** comes from is ``pd_first_token`` (a backend-preset default, overridable per config):

   - ``prefill``: from the prefill instance when its prefill step ends, so ``TTFT = queueing +
     prefill`` there; the hand-off wait, the transfer and the first decode step fall between the
     first and second tokens (ITL, TPOT). No shipped engine streams this way.
   - ``decode_ready`` (SGLang): the client's stream is the decode server's (the PD router sends
     the request to both servers and returns only the decode response:
     ``sglang/srt/disaggregation/mini_lb.py``, ``generate_stream``). The decode server holds the
     prefill's first token from the transferred metadata (``decode.py``,
     ``DecodeTransferQueue._commit_transfer_to_req``) and streams it when the request joins its
     running batch, within ``max_running_requests``, before that batch's next decode step
     (``get_new_prebuilt_batch``, then ``process_batch_result_prebuilt`` → ``stream_output``).
     Modelled: first token when the request is admitted here and its KV has arrived (its
     ``ready_s``), so ``TTFT = prefill queue + prefill + hand-off wait + transfer``.
   - ``decode_step`` (vLLM behind a KV-connector proxy; TensorRT-LLM disaggregated): the client
     streams from the decode server only, and its first token comes out of a decode-server step.
     vLLM: the proxy sends the prefill server a non-streamed copy with ``max_tokens = 1`` and
     drops its output, then streams the decode server's response
     (``tests/v1/kv_connector/nixl_integration/toy_proxy_server.py``); the decode scheduler
     marks all but the last prompt token computed once the KV has arrived (``Scheduler.
     _update_waiting_for_remote_kv``: ``num_computed_tokens -= 1``), so its first step computes
     the last prompt token and samples the first output token. TensorRT-LLM: ``trtllm-serve
     disaggregated`` awaits the context server's non-streamed response, then returns the
     generation server's stream (``tensorrt_llm/serve/openai_disagg_service.py``,
     ``_send_disagg_request_ctx_first``); the generation executor adds the context's first
     token when the transfer is complete and the request is scheduled in a generation batch
     (``py_executor.py``, ``_prepare_disagg_gen_transmission_complete``), and responses are
     sent after that iteration. Modelled as vLLM does it: the continuation holds no token and
     its first step on the decode instance computes the last prompt token (priced as one token
     of context ``prompt``), ending with the first token; ``TTFT = prefill queue + prefill +
     hand-off wait + transfer + first decode step``. For TensorRT-LLM this runs one decode step
     more per request than the engine does (its first response carries two tokens). Under
     ``write_policy: write_through`` the decode instance also writes the prompt's last block
     through again, as it computed that block's last token.

   With either decode option TPOT counts from that first token: ``TPOT = (finish − first
   token) / (output − 1)``. The request's record names the decode instance, and its
   waiting-queue time is the sum of both waits (prefill queue, decode hand-off queue).

A one-token request finishes on the prefill instance and never moves (its token is the
prefill's whatever ``pd_first_token`` says). Both pools have the engine knobs and KV tiers of
the config; the L3 store is shared by both (prefill writes through to it). Costs count the
GPUs of both pools.

Not modelled: the engines reserve the decode-side KV and move it before the request takes a
running slot (SGLang's prealloc/transfer queues, vLLM's ``WAITING_FOR_REMOTE_KVS``), where here
the request takes the slot, then the transfer runs (step 3); a request that waits for a slot
therefore pays its transfer after the wait rather than during it.

What this module is not: it does not build instances (``build.py``) and does not schedule
(each instance does); ``simulator/engine/remote.py`` is the engine's side.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar, Literal

import numpy as np

from hardware.schema import GpuSpec
from simulator.cluster.router import InstanceView, Router
from simulator.core import Kernel
from simulator.engine.instance import EngineInstance
from simulator.engine.remote import PdFirstToken, continuation
from simulator.engine.request import EngineRequest
from simulator.latency import Link, gpu_gpu_link
from simulator.workload.request import TraceRequest

__all__ = ["EntryRouter", "PDCoordinator", "PoolSpec", "TransferTimes", "place_on_nodes"]

Overlap = Literal["none", "layerwise"]


@dataclass(frozen=True, slots=True)
class PoolSpec:
    """One pool's hardware: its GPU, TP, pipeline stages and instance count (an instance is
    ``tp × pp`` GPUs)."""

    gpu: GpuSpec
    tp: int
    instances: int
    pp: int = 1

    @property
    def gpus(self) -> int:
        """GPUs of one instance (``tp × pp``)."""
        return self.tp * self.pp

    @property
    def nodes_per_instance(self) -> int:
        """Servers one instance spans (1 when it fits on one)."""
        return -(-self.gpus // self.gpu.gpus_per_node)


def place_on_nodes(pools: Sequence[PoolSpec]) -> list[tuple[str, int]]:
    """Node of every instance, pools in order: ``(gpu name, node number)``; an instance
    spanning several nodes is named by its first.

    Instances are packed onto nodes of ``gpus_per_node`` GPUs of their type in order; an
    instance that fits on one node never straddles two (a TP group stays on one node's
    NVLink); a wider one (multi-node TP, or pipeline stages on several nodes) starts on a
    fresh node and occupies ``nodes_per_instance`` whole nodes.
    """
    cursor: dict[str, tuple[int, int]] = {}  # gpu -> (node, GPUs used on it)
    nodes: list[tuple[str, int]] = []
    for pool in pools:
        per_node = pool.gpu.gpus_per_node
        for _ in range(pool.instances):
            node, used = cursor.get(pool.gpu.name, (0, 0))
            if used and used + pool.gpus > per_node:
                node, used = node + 1, 0
            nodes.append((pool.gpu.name, node))
            if pool.gpus > per_node:  # whole nodes: the next instance starts after them
                node, used = node + pool.nodes_per_instance - 1, per_node
            else:
                used += pool.gpus
            cursor[pool.gpu.name] = (node, used)
    return nodes


class TransferTimes:
    """Seconds to move KV blocks from a prefill instance to a decode instance (module
    docstring, step 4)."""

    def __init__(self, prefill: PoolSpec, decode: PoolSpec, *, bytes_per_block: float) -> None:
        self.bytes_per_block = bytes_per_block
        # Every GPU holds its shard of its stage's layers and moves it over its own link.
        self.lanes = min(prefill.gpus, decode.gpus)
        nodes = place_on_nodes((prefill, decode))
        self._prefill_nodes = nodes[: prefill.instances]
        self._decode_nodes = nodes[prefill.instances :]
        self.nvlink = _slower(
            gpu_gpu_link(prefill.gpu, same_node=True), gpu_gpu_link(decode.gpu, same_node=True)
        )
        self.nic = _slower(
            gpu_gpu_link(prefill.gpu, same_node=False), gpu_gpu_link(decode.gpu, same_node=False)
        )

    def link(self, prefill: int, decode: int) -> Link:
        """The link between prefill instance ``prefill`` and decode instance ``decode``
        (indices within their pools)."""
        same = self._prefill_nodes[prefill] == self._decode_nodes[decode]
        return self.nvlink if same else self.nic

    def seconds(self, prefill: int, decode: int, n_blocks: int) -> float:
        """Transfer time of ``n_blocks`` blocks between the two instances; 0 for none."""
        if n_blocks <= 0:
            return 0.0
        link = self.link(prefill, decode)
        return link.latency_s + n_blocks * self.bytes_per_block / (self.lanes * link.bytes_per_s)


def _slower(a: Link, b: Link) -> Link:
    return a if a.bytes_per_s <= b.bytes_per_s else b


class EntryRouter(Router):
    """Routes arrivals to the prefill pool — the first ``n_instances`` of the cluster's
    instances — with the configured router; never to a decode instance."""

    name: ClassVar[str] = "pd_entry"

    def __init__(self, inner: Router, rng: np.random.Generator) -> None:
        super().__init__(inner.n_instances, rng)
        self.inner = inner

    def route(self, request: TraceRequest, instances: Sequence[InstanceView]) -> int:
        return self.inner.route(request, instances[: self.n_instances])

    def forget(self, index: int) -> None:
        self.inner.forget(index)


class PDCoordinator:
    """The hand-off between the pools (module docstring, steps 3–4); the prefill instances'
    ``Handoff``. Instance indices: prefill ``0..P-1``, decode ``P..P+D-1``."""

    def __init__(
        self,
        kernel: Kernel,
        prefill: Sequence[EngineInstance],
        decode: Sequence[EngineInstance],
        router: Router,
        times: TransferTimes,
        *,
        overlap: Overlap,
        n_layers: int,
        first_token: PdFirstToken = "prefill",
    ) -> None:
        self.kernel = kernel
        self.prefill = list(prefill)
        self.decode = list(decode)
        self.router = router
        self.times = times
        self.overlap = overlap
        self.n_layers = max(1, n_layers)
        self.max_blocks = min(inst.l1_blocks for inst in self.decode)
        self.decode_routable = len(self.decode)
        """Hand-offs go to the first ``decode_routable`` decode instances (the decode pool's
        autoscaler moves it; the others are starting, draining or off)."""
        self.link_free_s = [0.0] * len(self.prefill)
        """When each prefill instance's sending link is next free."""
        self.recv_free_s = [0.0] * len(self.decode)
        """When each decode instance's receiving link is next free."""
        self.n_transfers = 0
        self.blocks_moved = 0
        self.transfer_s = 0.0
        """Sum of the transfer times (whole transfers, overlap not deducted)."""
        self.first_token = first_token
        """Where the client's first token comes from (module docstring, step 5)."""
        for inst in self.prefill:
            inst.handoff = self
            # A handed-off request's first token is the decode instance's to announce.
            inst.announces_handed_off_first_tokens = first_token == "prefill"

    def send(self, source: EngineInstance, req: EngineRequest) -> None:
        """``req``'s prefill is done on ``source``: pick a decode instance and queue it there."""
        serving = self.decode
        if self.decode_routable < len(serving):
            serving = serving[: self.decode_routable]
        choice = self.router.route(req.trace, serving)
        target = self.decode[choice]
        follow = continuation(req, target.index, target.block_tokens, self.first_token)
        follow.remote = _Remote(self, source, req, choice)
        target.accept(follow)

    def _start(self, remote: _Remote, now: float, n_blocks: int) -> float:
        source = remote.source
        slot = source.index  # prefill instances are 0..P-1
        seconds = self.times.seconds(slot, remote.decode, n_blocks)
        free = max(self.link_free_s[slot], self.recv_free_s[remote.decode])
        if n_blocks <= 0:  # the decode instance already holds the whole prompt
            end = now
        elif self.overlap == "layerwise" and not remote.was_blocked:
            begin = max(remote.req.start_s, free)
            end = max(begin + seconds, now + seconds / self.n_layers)
        else:
            end = max(now, free) + seconds
        if n_blocks > 0:
            self.link_free_s[slot] = end
            self.recv_free_s[remote.decode] = end
            self.n_transfers += 1
            self.blocks_moved += n_blocks
            self.transfer_s += seconds
        self.kernel.at(end, functools.partial(source.release_sent, remote.req))
        if self.first_token == "decode_ready":  # ``admit_remote`` records it at ``end``
            hook = self.decode[remote.decode].on_first_token
            if hook is not None:
                self.kernel.at(end, functools.partial(hook, remote.req.trace, end))
        return end


class _Remote:
    """The ``RemoteKV`` of one handed-off request."""

    __slots__ = ("coordinator", "decode", "req", "source", "was_blocked")

    def __init__(
        self, coordinator: PDCoordinator, source: EngineInstance, req: EngineRequest, decode: int
    ) -> None:
        self.coordinator = coordinator
        self.source = source
        self.req = req
        self.decode = decode
        self.was_blocked = False

    def start(self, now_s: float, n_blocks: int) -> float:
        return self.coordinator._start(self, now_s, n_blocks)

    def blocked(self) -> None:
        self.was_blocked = True
