"""Prefill/decode (PD) disaggregation: a prefill pool hands each request's KV to a decode pool.

Life of a request (``pd_mode: disaggregated``):

1. **Arrival** — the configured ``router`` picks a *prefill* instance (``EntryRouter``). The
   request is rejected there if its prompt does not fit a prefill instance's L1, or if prompt
   + output − 1 tokens would not fit a decode instance's L1.
2. **Prefill** — as on any instance (prefix cache, L2/L3, chunking, the prefill instance's
   scheduler). The step that completes the prompt emits the **first token** on the prefill
   instance, so ``TTFT = queueing + prefill`` there; the KV transfer is *not* in TTFT.
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
5. **Decode** — from the second token on the decode instance. The gap between the first token
   (prefill) and the second (decode) holds the hand-off wait, the transfer and the first decode
   step, so it shows in ITL and TPOT: ``TPOT = (finish − first token) / (output − 1)`` is the
   decode side's (transfer included); the request's record names the decode instance, and its
   waiting-queue time is the sum of both waits (prefill queue, decode hand-off queue).

A one-token request finishes on the prefill instance and never moves. Both pools have the
engine knobs and KV tiers of the config; the L3 store is shared by both (prefill writes
through to it). Costs count the GPUs of both pools.

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
from simulator.engine.remote import continuation
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
        for inst in self.prefill:
            inst.handoff = self

    def send(self, source: EngineInstance, req: EngineRequest) -> None:
        """``req``'s prefill is done on ``source``: pick a decode instance and queue it there."""
        serving = self.decode
        if self.decode_routable < len(serving):
            serving = serving[: self.decode_routable]
        choice = self.router.route(req.trace, serving)
        target = self.decode[choice]
        follow = continuation(req, target.index, target.block_tokens)
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
