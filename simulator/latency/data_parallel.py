"""Step time of an attention data-parallel instance: D ranks' attention, one shared MoE.

An instance of ``tp`` GPUs with ``attention_dp = D`` (``Deployment``; SGLang
``--enable-dp-attention --dp-size D``, vLLM ``--data-parallel-size D --enable-expert-parallel``,
TensorRT-LLM ``enable_attention_dp``) runs D ranks of ``tp / D`` GPUs. Each rank computes
attention, the dense MLPs, the shared experts, embedding and LM head for its own requests; in
every MoE layer the ranks' tokens meet at the routed experts, which all ``tp`` GPUs hold
(``ep`` ways by expert, ``tp / ep`` within one), and go back. The engine sees one instance
with D ranks' KV and batch (``memory.py`` sizes the KV per rank, ×D), so a step's batch is the
whole instance's; ``AttentionDpModel`` prices it as

    step = rank(heaviest rank's batch)  − rank's routed experts  (on its own tokens)
         + routed experts on all T tokens of the instance        (the instance's layout)
         + MoE exchange: per MoE layer an all-gather of the T tokens' hidden states
           (``m = T · hidden · activation bytes``) before the experts and a reduce-scatter
           after. Each is a collective of its own with its own latency floor, and moves
           ``(n-1)/n · m`` per GPU on a ring, what an all-reduce of ``m / 2`` moves: so each
           is priced as the kernel source's all-reduce of ``m / 2`` over ``tp`` GPUs (the
           measured NCCL tables up to 8 GPUs; over the NIC, roofline or the table carried by
           its ratio, when the instance spans nodes). The tables' all-gather and
           reduce-scatter rows are not loaded (``profiles.py`` keeps the all-reduce only);
           on 8 H100s (NCCL 2.29.2) the all-reduce of m/2 is within 3% of the all-gather of
           m at 32 MiB but 50% slower at 8 KiB (16.0 vs 10.6 µs): small decode exchanges
           are priced high.

Approximations, stated:

- **Balanced ranks.** The batch's requests are dealt round-robin to the D ranks in decreasing
  order of new tokens (then KV length); rank 0, which gets the largest of every round, sets
  the step's attention time (the ranks wait for each other at every MoE layer). Real
  engines balance by their own rule (SGLang's DP controller: round robin or shortest queue;
  vLLM: least loaded); an idle rank still joins the collectives.
- **The exchange is all-gather + reduce-scatter** (vLLM's ``allgather_reducescatter``
  all-to-all backend and SGLang's default DP-attention gather). A dispatch/combine all-to-all
  (DeepEP, TensorRT-LLM's) moves ``top_k · T / D`` token copies instead of ``T``: fewer bytes
  when ``top_k < D``; it is not modelled separately.
- **Engine limits are per rank** (``max_batched_tokens``, ``max_running_requests``: each rank
  has its own scheduler in all three engines); the instance's are D times those
  (``build.py``); the KV pool is one shared pool of D ranks' tokens (no rank runs out alone).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from simulator.latency.base import StepBreakdown
from simulator.latency.batch import Batch, BatchLike, DecodeRun, as_batch
from simulator.latency.compose import KernelCall
from simulator.latency.deployment import Deployment
from simulator.latency.model import ComposedLatencyModel
from simulator.latency.transfer import Link

__all__ = ["AttentionDpModel", "heaviest_rank"]

#: Entries per cache before it is cleared (as ``model.py``).
_CACHE_LIMIT = 1 << 17


def heaviest_rank(batch: Batch, ranks: int) -> Batch:
    """The batch of the rank that gets the most work when ``batch``'s requests are dealt
    round-robin to ``ranks`` ranks in decreasing order of new tokens, then of KV length
    (rank 0: the first of every round). ``batch`` itself for one rank."""
    if ranks == 1 or batch.size == 0:
        return batch
    cache: list[int] = []
    new: list[int] = []
    position = 0  # of the next request in the dealing order
    for c, n, k in sorted(batch.prefill_groups, key=lambda g: (-g[1], -g[0])):
        # Of positions position .. position + k - 1, those that are multiples of ``ranks``.
        mine = (position + k - 1) // ranks - (position - 1) // ranks
        cache += [c] * mine
        new += [n] * mine
        position += k
    kv = np.sort(batch.decode_kv_lens)[::-1][(-position) % ranks :: ranks]
    cache_lens = np.concatenate((np.asarray(cache, dtype=np.int64), kv - 1))
    new_tokens = np.concatenate((np.asarray(new, dtype=np.int64), np.ones_like(kv)))
    size = int(new_tokens.shape[0])
    prefill_logits = max(0, batch.logit_tokens - batch.num_decode)
    logits = min(size, int(kv.shape[0]) + -(-prefill_logits // ranks))
    return Batch.from_arrays(cache_lens, new_tokens, logit_tokens=logits)


class AttentionDpModel:
    """A ``LatencyModel`` for an attention-DP deployment (module doc).

    Args:
        instance: a composed model of the whole instance (``attention_dp`` > 1); its routed
            experts and all-reduce price the shared MoE and the exchange.
        rank: a composed model of ``instance.deployment.rank()`` with the same kernel source.
    """

    def __init__(self, instance: ComposedLatencyModel, rank: ComposedLatencyModel) -> None:
        d = instance.deployment
        if d.attention_dp < 2:
            raise ValueError("AttentionDpModel needs a deployment with attention_dp > 1")
        self._instance, self._rank = instance, rank
        self._ranks = d.attention_dp
        self._moe_layers = d.model.num_moe_layers
        self._exchange_bytes = d.model.hidden_size * d.activation_bytes  # per token
        self._shared: dict[int, tuple[float, float]] = {}
        self._own: dict[int, float] = {}

    # ----- LatencyModel -----------------------------------------------------------------------
    @property
    def name(self) -> str:
        """The registry spec that built the kernel source."""
        return self._instance.name

    @property
    def deployment(self) -> Deployment:
        """The whole instance (``attention_dp`` ranks)."""
        return self._instance.deployment

    @property
    def rank_model(self) -> ComposedLatencyModel:
        """The model of one rank (attention, dense layers, overheads)."""
        return self._rank

    def step_seconds(self, batch: BatchLike) -> float:
        """Seconds of one step of the instance's ``batch`` (0.0 when empty; module doc)."""
        b = as_batch(batch)
        if b.size == 0:
            return 0.0
        mine = heaviest_rank(b, self._ranks)
        experts, exchange = self._shared_moe(b.num_tokens)
        return self._rank.step_seconds(mine) - self._own_moe(mine.num_tokens) + experts + exchange

    def decode_step_pricer(self, cache_lens: Sequence[int]) -> Callable[[int], float]:
        """``k -> step_seconds([(c + k, 1) for c in cache_lens])`` (as ``model.py``)."""
        run = DecodeRun(cache_lens)
        return lambda k: self.step_seconds(run.at(k))

    def breakdown(self, batch: BatchLike) -> StepBreakdown:
        """Seconds per operator of the heaviest rank, with the routed experts on the whole
        instance's tokens and the exchange as ``moe_exchange``; sums to ``step_seconds``."""
        b = as_batch(batch)
        if b.size == 0:
            return StepBreakdown.of({})
        out = dict(self._rank.breakdown(heaviest_rank(b, self._ranks)).seconds)
        out.pop("moe_experts", None)
        out.pop("moe_permute", None)
        out["moe_experts"], out["moe_exchange"] = self._shared_moe(b.num_tokens)
        return StepBreakdown.of(out)

    def transfer_seconds(self, nbytes: float, link: Link) -> float:
        """Seconds to move ``nbytes`` over ``link``."""
        return self._rank.transfer_seconds(nbytes, link)

    # ----- parts ------------------------------------------------------------------------------
    def exchange_call(self, tokens: int) -> KernelCall:
        """The MoE exchange of ``tokens`` instance tokens over all MoE layers: an all-gather
        and a reduce-scatter per layer, each an all-reduce of half the message (module doc)."""
        half = tokens * self._exchange_bytes / 2
        return KernelCall("moe_exchange", "nccl", (half, self.deployment.tp), 2 * self._moe_layers)

    def _shared_moe(self, tokens: int) -> tuple[float, float]:
        """(routed experts, exchange) seconds for the instance's ``tokens``."""
        hit = self._shared.get(tokens)
        if hit is None:
            call = self.exchange_call(tokens)
            exchange = call.count * self._instance.call_seconds(call)
            hit = (self._instance.routed_expert_seconds(tokens), exchange)
            if len(self._shared) >= _CACHE_LIMIT:
                self._shared.clear()
            self._shared[tokens] = hit
        return hit

    def _own_moe(self, tokens: int) -> float:
        """The rank model's own routed experts at ``tokens``, which ``step_seconds`` replaces."""
        hit = self._own.get(tokens)
        if hit is None:
            hit = self._rank.routed_expert_seconds(tokens)
            if len(self._own) >= _CACHE_LIMIT:
                self._own.clear()
            self._own[tokens] = hit
        return hit
