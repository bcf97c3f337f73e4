"""Step time of a pipeline-parallel instance: micro-batches traversing ``pp`` stages.

An instance with ``pp`` = P (``Deployment``; vLLM ``--pipeline-parallel-size``, SGLang
``--pp-size``, TensorRT-LLM ``pipeline_parallel_size`` / ``trtllm-serve --pp_size``) runs P
stages of ``tp`` GPUs, stage ``i`` holding its consecutive layers. The engines keep up to P
scheduled batches in flight, each a disjoint set of requests (vLLM V1: the engine core's
batch queue of ``max_concurrent_batches`` = P batches, ``step_with_batch_queue`` schedules a
new batch while earlier ones are still in the pipeline; SGLang's pipeline parallelism
likewise has chunks of different requests in different stages at once, its documentation's
"dynamic chunked prefill" across stages). The simulated engine sees one step of the whole
batch, in which every request advances once; ``PipelineModel`` prices it as

    m    = min(P, requests)  micro-batches
    step = group(leading micro-batch)                (the whole model on one stage's tp GPUs:
                                                      the sum of the P stages' times)
         + (P − 1) · hop(leading micro-batch's tokens)

The leading micro-batch is every ``m``-th request of each kind (decodes, prefill chunks) in
decreasing order — the first of every round of a round-robin deal — with each kind's largest
new-token counts paired with its longest cached contexts (``leading_micro_batch``). It is at
least as heavy as any micro-batch of the deal, element by element, so the step is the slowest
micro-batch's or above, and it only grows when a request grows or joins (the latency-model
contract), which the heaviest micro-batch of a deal does not (a grown request can move to
another micro-batch).

A micro-batch's next step needs its sampled tokens, so it can start only after it has
traversed every stage: that traversal is the step. While it runs, the other ``m − 1``
micro-batches occupy the other stages, so all of the batch advances in that time. With
``m < P`` (fewer requests than stages, e.g. a single long prefill or one decoding request)
stages idle — the pipeline bubble: the step costs the whole model's time on the micro-batch,
like TP on ``tp`` GPUs alone, plus the hops; PP then gains nothing.

``hop``: the activations that leave a stage, hidden state and residual (``2 · hidden · tokens ·
activation bytes``; vLLM's ``IntermediateTensors`` and SGLang's ``PPProxyTensors`` of the Llama
family carry both), each of the ``tp`` GPUs sending its ``1 / tp`` slice over its own link
(vLLM sends the slices and all-gathers them on the receiving stage; that all-gather is not
priced): NVLink within a node, the NIC between nodes (``Deployment.boundary_crosses_node``).

Approximations, stated (the first, the one that matters most, makes PP look faster than it
is):

- **Perfect overlap.** Every stage is assumed to take ``1 / P`` of the traversal and the
  scheduler to have the next micro-batch ready the moment a stage frees. In practice the end
  stages carry the embedding and the LM head (the last also samples), layer counts can be
  uneven (``stage_layers``), and the pipeline's rate is set by its slowest stage: a cycle of
  m micro-batches takes at least ``m × slowest stage``, above the traversal when the stages
  differ. The engines' CPU work between micro-batches (scheduling, detokenising) is charged
  once per step, as without PP, although it recurs per micro-batch.
- **Balanced micro-batches.** A round-robin deal sets the step (a real scheduler fills each
  micro-batch up to its own token budget as requests arrive), priced on its leading
  micro-batch: pessimistic when prefill chunks of different shapes share a step (a large
  fresh chunk is priced with the longest cached context of its kind).
- **Hops are cheap and not overlapped with compute of the same micro-batch**: priced in full
  between stages, but only the message (no NCCL set-up beyond the link's fixed latency).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from simulator.latency.base import LatencyModel, StepBreakdown
from simulator.latency.batch import Batch, BatchLike, DecodeRun, as_batch
from simulator.latency.deployment import Deployment
from simulator.latency.transfer import Link, gpu_gpu_link, transfer_seconds

__all__ = ["PipelineModel", "leading_micro_batch"]

#: Entries per cache before it is cleared (as ``model.py``).
_CACHE_LIMIT = 1 << 17
#: Activation tensors a stage hands to the next: the hidden state and the residual.
_HOP_TENSORS = 2


def leading_micro_batch(batch: Batch, micro_batches: int) -> Batch:
    """The leading micro-batch of ``batch`` split into ``micro_batches`` (module doc): of each
    kind, the 1st, (m+1)-th, (2m+1)-th, ... largest new-token counts paired with the cached
    lengths of the same ranks. ``batch`` itself for one micro-batch."""
    m = micro_batches
    if m == 1 or batch.size == 0:
        return batch
    kv = np.sort(batch.decode_kv_lens)[::-1][::m]
    groups = batch.prefill_groups
    counts = [k for _, _, k in groups]
    cache = np.sort(np.repeat([c for c, _, _ in groups], counts).astype(np.int64))[::-1][::m]
    new = np.sort(np.repeat([n for _, n, _ in groups], counts).astype(np.int64))[::-1][::m]
    prefill_logits = max(0, batch.logit_tokens - batch.num_decode)
    size = int(kv.shape[0] + new.shape[0])
    logits = min(size, int(kv.shape[0]) + -(-prefill_logits // m))
    return Batch.from_arrays(
        np.concatenate((cache, kv - 1)),
        np.concatenate((new, np.ones_like(kv))),
        logit_tokens=logits,
    )


class PipelineModel:
    """A ``LatencyModel`` for a pipeline-parallel deployment (module doc).

    Args:
        deployment: the instance (``pp`` > 1).
        group: a model of ``deployment.tp_group()`` (the whole model on one stage's GPUs).
    """

    def __init__(self, deployment: Deployment, group: LatencyModel) -> None:
        if deployment.pp < 2:
            raise ValueError("PipelineModel needs a deployment with pp > 1")
        self._deployment, self._group = deployment, group
        self._stages = deployment.pp
        gpu = deployment.gpu
        self._links = tuple(
            gpu_gpu_link(gpu, same_node=not deployment.boundary_crosses_node(i))
            for i in range(deployment.pp - 1)
        )
        # Bytes one GPU of a stage sends per token of the micro-batch.
        model = deployment.model
        self._hop_bytes = (
            _HOP_TENSORS * model.hidden_size * deployment.activation_bytes / deployment.tp
        )
        self._hops: dict[int, float] = {}

    # ----- LatencyModel -----------------------------------------------------------------------
    @property
    def name(self) -> str:
        """The registry spec that built the kernel source."""
        return self._group.name

    @property
    def deployment(self) -> Deployment:
        """The whole instance (``pp`` stages)."""
        return self._deployment

    @property
    def group_model(self) -> LatencyModel:
        """The model of the whole model on one stage's ``tp`` GPUs."""
        return self._group

    @property
    def links(self) -> tuple[Link, ...]:
        """The link of each stage boundary, first to last."""
        return self._links

    def micro_batches(self, requests: int) -> int:
        """Micro-batches a step of ``requests`` requests is split into (``min(pp, requests)``)."""
        return max(1, min(self._stages, requests))

    def step_seconds(self, batch: BatchLike) -> float:
        """Seconds of one step of the instance's ``batch`` (0.0 when empty; module doc)."""
        b = as_batch(batch)
        if b.size == 0:
            return 0.0
        mine = leading_micro_batch(b, self.micro_batches(b.size))
        return self._group.step_seconds(mine) + self.hop_seconds(mine.num_tokens)

    def decode_step_pricer(self, cache_lens: Sequence[int]) -> Callable[[int], float]:
        """``k -> step_seconds([(c + k, 1) for c in cache_lens])`` (as ``model.py``)."""
        run = DecodeRun(cache_lens)
        return lambda k: self.step_seconds(run.at(k))

    def breakdown(self, batch: BatchLike) -> StepBreakdown:
        """Seconds per operator of the leading micro-batch on the whole model, with the stage
        hops as ``pp_transfer``; sums to ``step_seconds``."""
        b = as_batch(batch)
        if b.size == 0:
            return StepBreakdown.of({})
        mine = leading_micro_batch(b, self.micro_batches(b.size))
        out = dict(self._group.breakdown(mine).seconds)
        out["pp_transfer"] = self.hop_seconds(mine.num_tokens)
        return StepBreakdown.of(out)

    def transfer_seconds(self, nbytes: float, link: Link) -> float:
        """Seconds to move ``nbytes`` over ``link``."""
        return self._group.transfer_seconds(nbytes, link)

    # ----- parts ------------------------------------------------------------------------------
    def hop_seconds(self, tokens: int) -> float:
        """Seconds of the ``pp − 1`` stage-to-stage activation sends of ``tokens`` tokens."""
        hit = self._hops.get(tokens)
        if hit is None:
            nbytes = tokens * self._hop_bytes
            hit = sum(transfer_seconds(nbytes, link) for link in self._links)
            if len(self._hops) >= _CACHE_LIMIT:
                self._hops.clear()
            self._hops[tokens] = hit
        return hit
